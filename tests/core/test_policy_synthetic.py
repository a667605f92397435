"""End to end on the synthetic closed-loop task: the two-clock policy switches before failure."""

from __future__ import annotations

import json

import pytest

from rlvr_schedule.clocks import fit_sweep
from rlvr_schedule.policy import BatchConstraints, PolicyConfig, TwoClockScheduler
from rlvr_schedule.synthetic import SyntheticEnvironment, make_sweep
from rlvr_schedule.synthetic.testing import assert_beats_constant, assert_switches_before_failure

B_STAR, FAIL = 256, 50_000


def make(**kw):
    cfg = dict(initial_batch="auto", fallback_batch=32, base_batch=64, base_lr=1e-6,
               constraints=BatchConstraints(group_size=8))
    cfg.update(kw)
    return TwoClockScheduler(PolicyConfig(**cfg))


@pytest.mark.parametrize("drift, seed", [(0.0, 0), (3.0, 1)])
def test_starts_below_critical_batch_and_grows_before_collapse(drift, seed):
    env = SyntheticEnvironment(critical_batch=B_STAR, failure_samples=FAIL, drift=drift, seed=seed)
    sched = make()
    check = assert_switches_before_failure(sched, env, max_samples=60_000)
    auto, *grown = [d for d in env.decisions if d.switched]
    # the gradient-noise estimate puts the start at about half the task's B_simple (= B*)
    assert auto.reason.startswith("auto") and 0.3 * B_STAR <= auto.batch < B_STAR
    # the failure forecast grows the batch before the collapse (B* tracking may grow it earlier)
    forecast = [d for d in grown if d.reason.startswith("forecast failure")]
    assert forecast and check.failure_samples is not None
    assert forecast[0].samples < check.failure_samples
    assert all(d.samples < forecast[0].samples for d in grown if d not in forecast)
    assert [d.batch for d in grown] == [2 * auto.batch * 2**i for i in range(len(grown))]


@pytest.mark.parametrize("seed", [1, 2])
def test_fitted_critical_batch_then_policy_beats_constant_batches(seed):
    """The intended flow: fit a short sweep, start the policy below the fitted B*. With B* rising
    as reward climbs (drift), the policy tracks it and needs fewer updates than any constant
    batch within 1.25 x the best constant's rollouts."""
    runs = make_sweep([32, 64, 128, 256, 512], critical_batch=B_STAR, failure_samples=FAIL, drift=3.0,
                      seed=seed + 10)
    fit = fit_sweep(runs)
    env = SyntheticEnvironment(critical_batch=B_STAR, failure_samples=FAIL, drift=3.0, seed=seed)
    res = assert_beats_constant(make(critical_batch=fit.critical_batch), env, batches=[32, 64, 128, 256],
                                target=0.5)
    assert res.schedule_steps < res.constants[res.baseline_batch][1]
    tracked = [d for d in env.decisions if d.switched and d.reason.startswith("critical batch estimate")]
    assert tracked and tracked[0].samples < res.schedule_samples  # grew with B* before the target


def test_resume_mid_run_makes_the_same_decisions():
    env = SyntheticEnvironment(critical_batch=B_STAR, failure_samples=FAIL, drift=3.0, seed=4)
    run = env.run(make(), 60_000)
    full = env.decisions
    assert sum(d.switched for d in full) >= 3  # auto, tracking and failure switches all covered
    for k in (50, 150, 300):
        a = make()
        head = [a.step(r) for r in run.records[:k]]
        b = make()
        b.load_state_dict(json.loads(json.dumps(a.state_dict())))
        assert head + [b.step(r) for r in run.records[k:]] == full


def test_known_critical_batch_starts_below_it_at_once():
    env = SyntheticEnvironment(critical_batch=B_STAR, failure_samples=FAIL, seed=2)
    sched = make(critical_batch=B_STAR)
    assert sched.current.batch == 128
    assert_switches_before_failure(sched, env, max_samples=60_000)
    assert sched.stages[0].batch == 128 and sched.stages[1].reason.startswith("forecast failure")
