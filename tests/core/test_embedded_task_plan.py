"""The embedded-task runner follows its committed plan: the candidates in the plan's order, the
criterion's five items read as stated, the ranking when none meets it."""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.evidence.embedded_task import CANDIDATES, Candidate, criterion, rank_key
from rlvr_schedule.records import Run, StepRecord

PLAN = Path(__file__).parents[2] / "benchmarks" / "evidence" / "EMBEDDED_TASK_PLAN.md"


def test_candidates_run_in_the_plans_order():
    names = re.findall(r"^\| \d+ \| `([a-z0-9-]+)` \|", PLAN.read_text(), flags=re.M)
    assert names == [c.name for c in CANDIDATES]
    assert Candidate("x", {"group_size": 16}).batches == (16, 32, 64, 128, 256)
    assert CANDIDATES[0].lrs == (4e-4, 2e-4, 1e-4)  # the highest first: the screen


def _run(batch: int, seed: int, first: float, best: float) -> Run:
    recs = [
        StepRecord(step=i + 1, samples=(i + 1) * batch, batch=batch, lr=1e-3, extra={"eval_accuracy": v})
        for i, v in enumerate([first, (first + best) / 2, best, best - 0.05])
    ]
    return Run(recs, name=f"b{batch}-s{seed}")


def _fit(
    rates: dict[int, list[float]], fails: dict[int, int], bstar=40.0, iv=(20.0, 90.0), alpha_iv=(-0.3, 0.4)
):
    rows = []
    for b, rs in rates.items():
        for s, r in enumerate(rs):
            rows.append(
                {
                    "batch": b,
                    "rate": r,
                    "constant_batch": True,
                    "failure_samples": 9000.0 if s < fails.get(b, 0) else None,
                }
            )
    return {
        "critical_batch": bstar,
        "critical_batch_interval": list(iv),
        "failure_exponent": sum(alpha_iv) / 2,
        "failure_exponent_interval": list(alpha_iv),
        "runs": rows,
    }


def test_criterion_items():
    c = CANDIDATES[0]
    rates = {8: [1.0, 1.1, 0.9], 16: [0.9] * 3, 32: [0.8] * 3, 64: [0.5] * 3, 128: [0.1, 0.12, 0.08]}
    fails = {8: 3, 16: 2, 32: 2}
    runs = [_run(b, s, 0.1, 0.5) for s in range(3) for b in (8, 16, 32, 64, 128)]
    top = _fit(rates, fails)
    fits = {
        4e-4: {"critical_batch": 40, "critical_batch_interval": [30, 50]},
        2e-4: {"critical_batch": 80, "critical_batch_interval": [60, 100]},
        1e-4: {"critical_batch": 160, "critical_batch_interval": [120, 200]},
    }
    items = criterion(c, top, runs, fits)
    assert [m for m, _ in items] == [True, True, True, True, True], items
    # a run at or below B* (40) gaining only 0.25 fails item 1; one above B* does not count
    runs2 = [_run(64, 0, 0.1, 0.2), *runs[1:]]
    assert criterion(c, top, runs2, fits)[0][0] is True
    runs3 = [_run(16, 0, 0.1, 0.35), *runs[1:]]
    assert criterion(c, top, runs3, fits)[0][0] is False
    # an open B* interval, overlapping rate intervals, a flat B*, too few failures, a wide exponent
    assert criterion(c, _fit(rates, fails, iv=(20.0, float("inf"))), runs, fits)[1][0] is False
    assert criterion(c, _fit({**rates, 128: [0.2, 1.2, 0.4]}, fails), runs, fits)[2][0] is False
    flat = {lr: {"critical_batch": 40, "critical_batch_interval": [30, 50]} for lr in fits}
    assert criterion(c, top, runs, flat)[3][0] is False
    assert criterion(c, top, runs, {4e-4: fits[4e-4]})[3][0] is None  # the other LRs not run
    assert criterion(c, _fit(rates, {8: 3, 16: 2, 32: 1}), runs, fits)[4][0] is False
    assert criterion(c, _fit(rates, fails, alpha_iv=(-0.7, 0.5)), runs, fits)[4][0] is False


def test_ranking_when_none_meets_the_criterion():
    t, f = (True, ""), (False, "")
    a = rank_key(0, [f, t, t, f, f], 2.0)
    b = rank_key(1, [t, f, t, f, f], 9.0)  # same count, but item 1 met: ranks first
    c = rank_key(2, [t, f, t, f, f], 3.0)  # the narrower B* interval ranks first
    d = rank_key(3, [t, t, t, f, f], float("inf"))  # more items met
    assert sorted([a, b, c, d]) == [d, c, b, a]
