"""End to end on the synthetic closed-loop task: the two-clock policy switches before failure."""

from __future__ import annotations

import json

import pytest

from rlvr_schedule.clocks import fit_sweep
from rlvr_schedule.policy import BatchConstraints, PolicyConfig, TwoClockScheduler
from rlvr_schedule.synthetic import SyntheticEnvironment, make_sweep
from rlvr_schedule.synthetic.testing import assert_beats_constant, assert_switches_before_failure

B_STAR, FAIL = 256, 50_000
FAILURE_REASONS = ("failure forecast", "forecast failure")


def make(**kw):
    cfg = dict(
        forecast="on",  # the live forecast switches (default: advisory)
        initial_batch="auto",
        fallback_batch=32,
        base_batch=64,
        base_lr=1e-6,
        growth=2.0,
        constraints=BatchConstraints(group_size=8),
    )
    cfg.update(kw)
    return TwoClockScheduler(PolicyConfig(**cfg))


@pytest.mark.parametrize("drift, seed", [(0.0, 0), (3.0, 1)])
def test_starts_below_critical_batch_and_grows_before_collapse(drift, seed):
    """alpha > 0 (failure postponed by a larger batch): the forecast grows the batch x2 before collapse."""
    env = SyntheticEnvironment(critical_batch=B_STAR, failure_samples=FAIL, drift=drift, seed=seed)
    sched = make(failure_exponent=0.5)
    check = assert_switches_before_failure(sched, env, max_samples=60_000)
    auto, *grown = [d for d in env.decisions if d.switched]
    # the gradient-noise estimate puts the start at about 0.46 x the task's B_simple (= B*; tolerance 0.3)
    assert auto.trigger == "auto" and 0.15 * B_STAR <= auto.batch < 0.6 * B_STAR
    # the failure forecast grows the batch before the collapse (B* tracking may grow it earlier)
    forecast = [d for d in grown if d.reason.startswith(FAILURE_REASONS)]
    assert forecast and forecast[0].samples < FAIL * 1.5**0.5  # before the first stage would collapse
    # a held-LR switch (the default q = 0) slows the clock: the task may not collapse in the run at all
    assert check.failure_samples is None or forecast[0].samples < check.failure_samples
    others = [d for d in grown if d not in forecast and not d.reason.startswith("alarm")]
    assert all(d.samples < forecast[0].samples for d in others)  # tracking first (an alarm may come late)
    prev = {d.samples: p.batch for p, d in zip([auto, *grown], grown, strict=False)}
    assert all(d.batch == 2 * prev[d.samples] for d in forecast)


def test_sample_clock_square_root_switch_is_held_not_grown():
    """alpha = 0 and q = 1/2: a square-root switch cannot postpone the failure, the forecast says "hold"."""
    env = SyntheticEnvironment(critical_batch=B_STAR, failure_samples=FAIL, seed=0)
    env.run(make(failure_lr_exponent=0.5), 60_000)
    assert not any(d.switched and d.reason.startswith(FAILURE_REASONS) for d in env.decisions)
    held = [d for d in env.decisions if "failure forecast: hold" in d.reason]
    assert held and held[0].samples < FAIL


def test_sample_clock_default_grows_at_the_held_lr_and_postpones_the_collapse():
    """The defaults (alpha = 0, q = 0): batch x 2 at the same LR once under a quarter of the failure
    clock is left; the per-rollout drift falls, so the collapse comes later than at the first stage."""
    env = SyntheticEnvironment(critical_batch=B_STAR, failure_samples=FAIL, seed=0)
    check = assert_switches_before_failure(make(track_critical_batch=False), env, max_samples=90_000)
    grown = [d for d in env.decisions if d.switched and d.reason.startswith("failure forecast")]
    assert grown and grown[0].samples < FAIL
    before = env.decisions[env.decisions.index(grown[0]) - 1]
    assert grown[0].batch == 2 * before.batch and grown[0].lr == before.lr
    assert check.failure_samples is None or check.failure_samples > FAIL * 1.1


@pytest.mark.parametrize("seed", [1, 2])
def test_fitted_critical_batch_then_policy_beats_constant_batches(seed):
    """The intended flow: fit a short sweep, start the policy below the fitted B*. With B* rising
    as reward climbs (drift), the policy tracks it and needs fewer updates than any constant
    batch within 1.25 x the best constant's rollouts."""
    runs = make_sweep(
        [32, 64, 128, 256, 512], critical_batch=B_STAR, failure_samples=FAIL, drift=3.0, seed=seed + 10
    )
    fit = fit_sweep(runs)
    env = SyntheticEnvironment(critical_batch=B_STAR, failure_samples=FAIL, drift=3.0, seed=seed)
    # the test keeps v1's operating point (0.5 x B*): the default tolerance 0.10 trades updates for rollouts
    res = assert_beats_constant(
        make(critical_batch=fit.critical_batch, sample_tolerance=PolicyConfig.tolerance_for(0.5)),
        env,
        batches=[32, 64, 128, 256],
        target=0.5,
    )
    assert res.schedule_steps < res.constants[res.baseline_batch][1]
    tracked = [d for d in env.decisions if d.switched and d.trigger in ("track_up", "track_down")]
    assert tracked and tracked[0].samples < res.schedule_samples  # grew with B* before the target


def test_resume_mid_run_makes_the_same_decisions():
    env = SyntheticEnvironment(critical_batch=B_STAR, failure_samples=FAIL, drift=3.0, seed=4)
    run = env.run(make(failure_exponent=0.5), 60_000)
    full = env.decisions
    assert sum(d.switched for d in full) >= 3  # auto, tracking and failure switches all covered
    for k in (50, 150, 300):
        a = make(failure_exponent=0.5)
        head = [a.step(r) for r in run.records[:k]]
        b = make(failure_exponent=0.5)
        b.load_state_dict(json.loads(json.dumps(a.state_dict())))
        assert head + [b.step(r) for r in run.records[k:]] == full


def test_known_critical_batch_starts_below_it_at_once():
    env = SyntheticEnvironment(critical_batch=B_STAR, failure_samples=FAIL, seed=2)
    sched = make(
        critical_batch=B_STAR,
        sample_tolerance=PolicyConfig.tolerance_for(0.5),
        failure_exponent=0.5,
        track_critical_batch=False,
    )
    assert sched.current.batch == 128
    # the fixed tolerance 0.3: 0.462 x 256 = 118.2, the nearest whole groups of 8
    assert make(critical_batch=B_STAR, sample_tolerance=0.3).current.batch == 120
    # the default: the batch cheapest at the default price 16, -16 + sqrt(16^2 + 2 x 16 x 256) = 76.0,
    # the nearest whole groups of 8
    assert make(critical_batch=B_STAR).current.batch == 72
    assert_switches_before_failure(sched, env, max_samples=60_000)
    assert sched.stages[0].batch == 128 and sched.stages[1].reason.startswith(FAILURE_REASONS)
