"""The failure forecast on the recorded `make demo` runs: no switch on a few hundred
noisy rollouts, and still a switch before the one collapse the sweep saw.

The demo's live policy once doubled the batch at 784 rollouts on "forecast failure in 578 samples
< 2 x 10 x 32": a linear fit through 49 records of an early entropy transient (a 512-rollout LR
warm-up, entropy 0.63 -> 0.3), extrapolated by a horizon counted in updates (policy v2's horizon trigger, since removed;
its replay test went with it). The constants at the
schedule's first stage (batch 16) never collapsed within the 14,336 rollouts; batch 8 (seed 0) did,
at 10,824. Records: ``tests/data/demo`` (origin in its README).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from rlvr_schedule.clocks import EntropyCollapse
from rlvr_schedule.ingest.load import load_run
from rlvr_schedule.policy import BatchConstraints, PolicyConfig, TwoClockScheduler

DATA = Path(__file__).resolve().parents[1] / "data" / "demo"


def demo_policy(**kw) -> TwoClockScheduler:
    """The demo's policy: `critical_batch` from its sweep's fit, the trainer's LR and batch range."""
    cfg = dict(
        forecast="on",  # the live forecast switches (default: advisory)
        initial_batch="auto",
        critical_batch=110.6678556376168,
        base_lr=4e-4,
        base_batch=32,
        lr_rule="sqrt",
        growth=2.0,
        constraints=BatchConstraints(group_size=8, min_batch=8, max_batch=128),
    )
    cfg.update(kw)
    return TwoClockScheduler(PolicyConfig(**cfg))


def records(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unknown metric names kept in extra
        return load_run(DATA / f"{name}.jsonl.gz").records


def failure_switches(sched: TwoClockScheduler, recs) -> list[int]:
    return [
        r.samples
        for r in recs
        if (d := sched.step(r)).switched and d.trigger in ("failure_clock", "forecast")
    ]


def collapse(recs) -> int | None:
    det = EntropyCollapse()
    return next((r.samples for r in recs if det.update(r) is not None), None)


@pytest.mark.parametrize("name", ["schedule_s0", "b16_s0", "b16_s1"])
def test_no_failure_switch_where_nothing_collapses(name):
    recs = records(name)
    assert collapse(recs) is None  # batch 16 at this LR keeps its entropy for the whole run
    assert failure_switches(demo_policy(), recs) == []


def test_switches_before_the_collapse_of_the_run_that_collapses():
    # advisory replay of the constant 8 run: the forecast's first trigger is what the policy would
    # have done at that point (what follows rests on records of the unswitched run)
    recs = records("b8_s0")
    at = collapse(recs)
    assert at is not None and 10_000 < at < 11_500
    first = failure_switches(demo_policy(initial_batch=8), recs)[:1]
    assert first and 2048 <= first[0] < at  # backed by 2048 rollouts of evidence, before the collapse


def test_a_forecast_needs_its_evidence_window_in_rollouts():
    # the same records with the evidence window shortened to the old ~300 rollouts switch early again
    # (at the old hysteresis of 3 records, 24 rollouts at batch 8)
    recs = records("b8_s0")
    early = failure_switches(demo_policy(initial_batch=8, forecast_samples=256, hysteresis_samples=24), recs)
    late = failure_switches(demo_policy(initial_batch=8), recs)
    assert early and late and early[0] < 1000 < 2048 <= late[0]
    # the default hysteresis of 48 rollouts (6 records at batch 8) alone also holds the early trigger
    held = failure_switches(demo_policy(initial_batch=8, forecast_samples=256), recs)
    assert held and held[0] > 2048


def demo_failure_clock() -> dict:
    """The failure clock of the demo's sweep (tests/data/demo/demo_sweep_rewards.json: 10 runs, 3
    collapsed, 7 right-censored at 14,336 rollouts), as ``SweepFit.failure_clock()`` gives it."""
    import json

    from rlvr_schedule.clocks import FailureScalingFit
    from rlvr_schedule.clocks.failure.scaling import clock_exponent
    from rlvr_schedule.records import Run, StepRecord

    doc = json.loads((DATA / "demo_sweep_rewards.json").read_text())["runs"]
    runs, fails = [], []
    for name, r in doc.items():
        recs = [
            StepRecord(step=i, samples=int(s), batch=r["batch"], lr=r["lr"])
            for i, s in enumerate(r["samples"])
        ]
        runs.append(Run(recs, name=name))
        fails.append(r["failure_samples"])
    fit = FailureScalingFit().fit(runs, fails, [False] * len(runs))
    lo, hi = fit.failure_samples_interval_
    return dict(
        failure_samples=fit.failure_samples_,
        failure_samples_interval=(lo, hi),
        failure_exponent=clock_exponent(fit.alpha_, fit.alpha_interval_),
        failure_batch=fit.batch_,
    )


def test_the_sweep_failure_clock_switches_between_0_4f_and_its_lower_bound():
    # the live policy given the sweep's clocks (B* and the failure clock), as the demo does
    clock = demo_failure_clock()
    f, (lo, hi) = clock["failure_samples"], clock["failure_samples_interval"]
    # censoring the 7 runs that did not collapse lifts the pooled clock above the 3 failures (10.8k-11.3k):
    # 7 of 10 runs outlived 14,336 rollouts, so the median clock is past them (the likelihood-ratio
    # interval; a Wald one with the failures' t quantile reached down to 8,640)
    assert 11_300 < lo < f < hi and f < 20_000
    sched = demo_policy(**{**clock, "forecast": "advisory"})
    # the constant run at the demo policy's first batch at sample_tolerance 0.10 (16); at the default
    # 0.3 the policy starts at 48 (0.462 x 110.7 = 51.1, nearest group of 8): the clock spends
    # rollouts alike (alpha 0)
    recs = records("b16_s0")
    decisions = [sched.step(r) for r in recs]
    first = next(d for d in decisions if d.switched and d.trigger == "failure_clock")
    assert 0.4 * f <= first.samples <= lo
    assert first.batch == 2 * sched.stages[0].batch and first.lr == pytest.approx(
        sched.stages[0].lr
    )  # LR held
    # the reason says which clock, how much of it was spent, and what is left
    assert (
        "sweep's clock" in first.reason and "lower bound" in first.reason and "rollouts left" in first.reason
    )
