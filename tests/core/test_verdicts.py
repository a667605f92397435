"""Verdict lines read the fit the way the seed's predictions are stated (rlvr_schedule.verdicts)."""

from __future__ import annotations

import pytest

from rlvr_schedule.clocks import fit_sweep
from rlvr_schedule.verdicts import failure_verdict, lr_verdict, progress_verdict, switch_verdict, verdicts

BATCHES = [32, 64, 128, 256, 512]


@pytest.fixture(scope="module")
def fit() -> dict:
    from rlvr_schedule.synthetic import make_sweep

    # a sample-clock task with B* = 128 inside the sweep: both predictions hold by construction
    return fit_sweep(make_sweep(BATCHES, critical_batch=128, failure_samples=60_000, seed=4)).to_dict()


def test_a_sweep_with_its_critical_batch_inside_and_a_sample_clock_reads_yes(fit: dict) -> None:
    p = progress_verdict(fit)
    assert p.startswith("per-sample progress falls above B*: yes"), p
    assert "B=512" in p and "B=32" in p
    f = failure_verdict(fit)
    assert f.startswith("failure on a sample clock (alpha ~ 0): yes"), f
    # at 512 = 4 B* the reward falls from the start: a divergence, not a failure after 2,048 rollouts
    # that pulled the pooled clock to half and alpha to -0.97
    assert "4/5 runs failed" in f and "1 diverged" in f
    assert abs(fit["failure_samples"] / 60_000 - 1) < 0.05 and fit["diverging"] == [fit["runs"][-1]["name"]]


def test_no_finite_critical_batch_and_no_failure_read_no_and_not_testable(fit: dict) -> None:
    flat = dict(fit, critical_batch=None, critical_batch_interval=[None, None])
    assert progress_verdict(flat).startswith("per-sample progress falls above B*: no (no finite B*")
    healthy = dict(fit, runs=[dict(r, failure_samples=None) for r in fit["runs"]])
    assert failure_verdict(healthy).startswith("failure on a sample clock (alpha ~ 0): not testable")


def test_a_step_clock_exponent_reads_no() -> None:
    fit = {
        "failure_exponent": 1.02,
        "failure_exponent_interval": [0.7, 1.3],
        "failure_samples": 5000.0,
        "failure_samples_interval": [4000.0, 6000.0],
        "runs": [
            {"batch": b, "failure_samples": 100.0 * b, "failure_signal": "reward_crash"} for b in BATCHES
        ],
    }
    assert failure_verdict(fit).startswith("failure on a sample clock (alpha ~ 0): no, a step clock")


def test_critical_batch_against_lr() -> None:
    inverse = {
        1e-4: {"critical_batch": 400.0},
        2e-4: {"critical_batch": 210.0},
        4e-4: {"critical_batch": 95.0},
    }
    assert lr_verdict(inverse).startswith("B* ~ 1/lr: yes (log-log slope -1.04")
    flat = {1e-4: {"critical_batch": 270.0}, 2e-4: {"critical_batch": 330.0}, 4e-4: {"critical_batch": 266.0}}
    assert lr_verdict(flat).startswith("B* ~ 1/lr: no")
    assert lr_verdict({1e-4: {"critical_batch": None}}).startswith("B* ~ 1/lr: not testable")


def test_switch_verdict_names_the_first_switch_and_the_failure_point() -> None:
    decisions = [
        {"step": 1, "samples": 8, "batch": 8, "switched": False},
        {"step": 90, "samples": 720, "batch": 16, "switched": True, "reason": "failure forecast"},
        {"step": 91, "samples": 736, "batch": 16, "switched": False},
    ]
    line = switch_verdict(decisions, failure_samples=5000.0)
    assert line.startswith("the schedule switched: yes, 1 batch switch (batch 8 -> 16;"), line
    assert "1 of 1 before the sweep's failure point" in line and "720 rollouts" in line
    assert switch_verdict(decisions[:1]) == "the schedule switched: no"


def test_switch_verdict_reads_each_seed_as_its_own_run() -> None:
    """Three seeds' decisions one after another (steps restart): 16->32->64 in each, not an
    oscillation 32 -> 64 -> 32 -> 64."""
    decisions = []
    for first, second in ((784, 8240), (624, 5456), (736, 5728)):
        decisions += [
            {"step": 1, "samples": 16, "batch": 16, "switched": False},
            {"step": 40, "samples": first, "batch": 32, "switched": True, "reason": "forecast"},
            {"step": 200, "samples": second, "batch": 64, "switched": True, "reason": "clock"},
        ]
    line = switch_verdict(decisions, failure_samples=7000.0)
    assert line.startswith(
        "the schedule switched: yes, in 3 of 3 runs, 6 batch switches (batch 16 -> 32 -> 64;"
    ), line
    assert "first at 624-784 rollouts, 3 of 3 before" in line


def test_switch_verdict_tells_lr_cuts_at_a_held_batch_from_batch_switches() -> None:
    """One switch 112 -> 128, then LR cuts at 128: not "5 switches (batch -> 128 -> 128 ...)"."""
    decisions = [{"step": 1, "samples": 112, "batch": 112, "switched": False}]
    decisions += [
        {"step": 50 + k, "samples": 5600 + 100 * k, "batch": 128, "switched": True, "reason": "clock"}
        for k in range(5)
    ]
    line = switch_verdict(decisions, failure_samples=12000.0)
    assert line.startswith("the schedule switched: yes, 1 batch switch and 4 LR cuts at a held batch "), line
    assert "(batch 112 -> 128; first at 5600 rollouts" in line


def test_verdicts_lists_every_prediction(fit: dict) -> None:
    lines = verdicts(fit, decisions=[{"samples": 10, "batch": 64, "switched": True}])
    assert len(lines) == 4 and all(line.startswith("- ") for line in lines)
    assert "not testable with one learning rate" in lines[2]


def test_critical_batch_against_lr_with_intervals_decides_by_the_slope_interval() -> None:
    def f(b: float, lo: float, hi: float) -> dict:
        return {"critical_batch": b, "critical_batch_interval": [lo, hi]}

    tight = {1e-4: f(400, 350, 460), 2e-4: f(210, 180, 240), 4e-4: f(95, 80, 110)}
    v = lr_verdict(tight)
    assert v.startswith("B* ~ 1/lr: yes (log-log slope -1.0"), v
    lo, hi = (float(x) for x in v.split("[", 1)[1].split("]", 1)[0].split(","))
    assert lo < -1 < hi < 0
    flat = {1e-4: f(270, 240, 300), 2e-4: f(330, 290, 370), 4e-4: f(266, 230, 300)}
    assert lr_verdict(flat).startswith("B* ~ 1/lr: no (log-log slope")
    loose = {1e-4: f(300, 30, 3000), 2e-4: f(200, 20, 2000), 4e-4: f(150, 15, 1500)}
    assert lr_verdict(loose).startswith("B* ~ 1/lr: undetermined")
