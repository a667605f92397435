"""Property: records -> write_jsonl -> read_jsonl gives the same records (CSV too)."""

from __future__ import annotations

import csv
import math
import tempfile
import warnings
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_schedule.bounds import MAX_ABS_REWARD, MAX_LR
from rlvr_schedule.errors import IngestWarning
from rlvr_schedule.ingest import read_csv, read_jsonl, write_jsonl
from rlvr_schedule.records import METRIC_FIELDS, StepRecord

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
metric = st.one_of(st.just(math.nan), finite)
# rewards and LRs within the plausibility bounds (rlvr_schedule.bounds): beyond them a reader sets
# the value to NaN with a warning, which test_implausible_values_read_as_nan asserts
reward = st.floats(-MAX_ABS_REWARD, MAX_ABS_REWARD)
lr = st.floats(0.0, MAX_LR)
extra_names = st.sampled_from(["x_a", "x_b", "team/score_raw", "eval/acc"])


@st.composite
def runs(draw) -> list[StepRecord]:
    n = draw(st.integers(1, 12))
    step = draw(st.integers(0, 5))
    samples = 0
    out = []
    for i in range(n):
        step += draw(st.integers(1, 3))
        batch = draw(st.integers(1, 4096))
        samples += draw(st.integers(1, 10_000))
        metrics = {f: draw(metric) for f in METRIC_FIELDS}
        for f in ("reward_mean", "reward_std"):
            metrics[f] = draw(st.one_of(st.just(math.nan), reward))
        if i == 0:
            metrics["reward_mean"] = draw(reward)  # a run needs some reward
        out.append(
            StepRecord(
                step=step,
                samples=samples,
                batch=batch,
                lr=draw(st.one_of(st.just(math.nan), lr)),
                micro_batch=draw(st.one_of(st.none(), st.integers(1, 512))),
                extra=draw(st.dictionaries(extra_names, finite, max_size=3)),
                **metrics,
            )
        )
    return out


@settings(max_examples=60, deadline=None)
@given(records=runs())
def test_jsonl_write_read_round_trip(records: list[StepRecord]) -> None:
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)  # extra names are unknown metrics
        run = read_jsonl(write_jsonl(Path(d) / "run.jsonl", records))
    assert [r.to_dict() for r in run] == [r.to_dict() for r in records]


@settings(max_examples=30, deadline=None)
@given(records=runs())
def test_csv_write_read_round_trip(records: list[StepRecord]) -> None:
    rows = [r.to_dict() for r in records]
    cols: list[str] = []
    for row in rows:
        cols += [k for k in row if k not in cols]
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        path = Path(d) / "run.csv"
        with open(path, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=cols)
            w.writeheader()
            w.writerows({k: repr(v) for k, v in row.items()} for row in rows)
        run = read_csv(path)
    assert [r.to_dict() for r in run] == rows


def test_implausible_values_read_as_nan(tmp_path) -> None:
    """A reward or LR beyond its bound is a missing value with a located warning, as a NaN is; a
    null reward too (null and NaN alike)."""
    import json

    import pytest

    from rlvr_schedule.errors import IngestWarning

    rows = [{"step": i, "batch": 8, "lr": 1e-6, "reward_mean": 0.1 * i} for i in range(1, 6)]
    rows[1]["reward_mean"] = 1e30
    rows[2]["lr"] = 1e7
    rows[3]["reward_mean"] = None
    p = tmp_path / "r.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.warns(IngestWarning) as rec:
        run = read_jsonl(p)
    msgs = " | ".join(str(w.message) for w in rec)
    assert f"{p}:2: field 'reward_mean': implausible value 1e+30" in msgs
    assert f"{p}:3: field 'lr': implausible value 10000000.0" in msgs
    assert "2 non-finite values" in msgs  # the null: counted with the first
    assert [math.isnan(r.reward_mean) for r in run.records] == [False, True, False, True, False]
    assert math.isnan(run.records[2].lr)
