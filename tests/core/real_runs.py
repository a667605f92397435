"""The real runs of tests/data/real/runs, read by the product's own reader, and the label rule.

``load_real(name)`` maps a ``SPLIT.json`` name to its raw log (``RUNS.json``: file, origin, and the
options a user would pass where the log is silent, with why) and reads it with
:func:`rlvr_schedule.ingest.load_run`. ``label(records)`` is the rule the labels in ``SPLIT.json``
follow (see ``ORIGIN.md``); it lives here, in the tests, not in any converter.
"""

from __future__ import annotations

import json
import warnings
from functools import cache
from pathlib import Path
from typing import Any

from rlvr_schedule.ingest import ReadOptions, load_run
from rlvr_schedule.records import Run, StepRecord

ROOT = Path(__file__).resolve().parents[1] / "data" / "real" / "runs"
RUNS: dict[str, dict[str, Any]] = json.loads((ROOT / "RUNS.json").read_text())
SPLIT: dict[str, Any] = json.loads((ROOT / "SPLIT.json").read_text())

#: a collapse must have lasted this many records when the log ends, else the label is inconclusive
MIN_DOWN = 5


def raw_path(name: str) -> Path:
    return ROOT / RUNS[name]["file"]


def read_options(name: str) -> ReadOptions:
    opts = RUNS[name]["options"]
    return ReadOptions(batch=opts.get("batch"), aliases=opts.get("aliases"))


@cache
def load_real(name: str) -> Run:
    """The run as ``rlvr-schedule fit RAW [--batch N] [--alias ...]`` reads it (warnings silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_run(raw_path(name), name=name, options=read_options(name))


def label(records: list[StepRecord]) -> dict[str, Any]:
    """Best reward and the collapse point: the first record from which every later reward stays
    below half the best. ``collapsed`` when it stayed down for at least ``MIN_DOWN`` records,
    ``inconclusive`` when the log ends sooner (left out of SPLIT.json), else ``healthy``; a run
    whose best reward is 0 has no label (None). ``collapse_step`` is the record's optimizer step,
    ``collapse_record`` its 1-based rank among the records."""
    r = [rec.reward_mean for rec in records]
    best = max(r)
    idx = next((i for i in range(len(r)) if all(x < best / 2 for x in r[i:])), None)
    if best <= 0:
        lab = None
    elif idx is None:
        lab = "healthy"
    else:
        lab = "collapsed" if len(r) - idx >= MIN_DOWN else "inconclusive"
    return {
        "label": lab,
        "collapse_step": None if idx is None else records[idx].step,
        "collapse_record": None if idx is None else idx + 1,
        "best_reward": best,
        "records": len(records),
    }
