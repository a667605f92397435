"""End to end on the synthetic closed-loop task: the two-clock policy switches before failure."""

from __future__ import annotations

import pytest

from rlvr_schedule.policy import BatchConstraints, PolicyConfig, TwoClockScheduler
from rlvr_schedule.synthetic import SyntheticEnvironment
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
    # the failure forecast grows the batch before the collapse
    assert grown and grown[0].reason.startswith("forecast failure")
    assert check.failure_samples is not None
    assert all(d.samples < check.failure_samples for d in grown)
    assert [d.batch for d in grown] == [2 * auto.batch * 2**i for i in range(len(grown))]


def test_beats_the_best_constant_batch_in_updates():
    env = SyntheticEnvironment(critical_batch=B_STAR, failure_samples=FAIL, drift=3.0, seed=0)
    res = assert_beats_constant(make(), env, batches=[32, 64, 128, 256], target=0.5)
    assert res.schedule_steps < res.constants[res.baseline_batch][1]


def test_known_critical_batch_starts_below_it_at_once():
    env = SyntheticEnvironment(critical_batch=B_STAR, failure_samples=FAIL, seed=2)
    sched = make(critical_batch=B_STAR)
    assert sched.current.batch == 128
    assert_switches_before_failure(sched, env, max_samples=60_000)
    assert sched.stages[0].batch == 128 and sched.stages[1].reason.startswith("forecast failure")
