"""Property: records -> write_jsonl -> read_jsonl gives the same records (CSV too)."""

from __future__ import annotations

import csv
import math
import tempfile
import warnings
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_schedule.errors import IngestWarning
from rlvr_schedule.ingest import read_csv, read_jsonl, write_jsonl
from rlvr_schedule.records import METRIC_FIELDS, StepRecord

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
metric = st.one_of(st.just(math.nan), finite)
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
        if i == 0:
            metrics["reward_mean"] = draw(finite)  # a run needs some reward
        out.append(
            StepRecord(
                step=step,
                samples=samples,
                batch=batch,
                lr=draw(st.one_of(st.just(math.nan), finite)),
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
