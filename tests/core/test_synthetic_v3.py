"""The v3 synthetic task: entropy-driven failure clock, damped progress, crash hazard."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlvr_schedule.synthetic import ClockModel, SyntheticEnvironment
from rlvr_schedule.synthetic.tasks import BATCHES, COMMON, TASKS


def test_failure_rates_are_normalised_to_the_base_batch_and_the_default_is_unchanged():
    m = ClockModel(failure_samples=10_000, failure_rates=(1.0, 0.3, 0.0005))
    assert m.failure_at(64) == pytest.approx(10_000)  # sqrt rule at base_batch: F
    assert ClockModel(failure_samples=10_000).failure_at(256, 1e-6) == pytest.approx(10_000 * 2)  # 1/r
    # k3 B << k1 + k2: nearly a sample clock on the sqrt rule over the 16x range (within 10%)
    spans = [m.failure_at(b) for b in BATCHES]
    assert max(spans) / min(spans) < 1.1
    # LR held while the batch doubles (r = 1/sqrt 2): the clock is postponed by about sqrt 2 or more
    assert m.failure_at(128, m.sqrt_lr(64)) / m.failure_at(64) > 1.35


def test_damped_progress_follows_the_entropy_law_on_a_constant_run():
    env = SyntheticEnvironment(
        noise=0.0, seed=0, entropy_damping=True, failure_samples=20_000, reward_ceiling=0.95, reward0=0.05
    )
    run = env.run_constant(32, 18_000)
    H = run.array("entropy")
    # reward after the exp saturation: invert reward_after to the accumulated gain, which must be
    # linear in exp(H) (dG/dH = -(p/kappa) exp(H - H0) with p and kappa constant)
    m = env.model
    span = m.reward_ceiling - m.reward0
    gain = -span * np.log(1.0 - (run.array("reward_mean") - m.reward0) / span)
    slope, icpt = np.polyfit(np.exp(H), gain, 1)
    resid = gain - (slope * np.exp(H) + icpt)
    assert slope < 0 and np.max(np.abs(resid)) < 1e-3 * np.ptp(gain) + 1e-9
    # and the damping is real: the undamped task gains more by the same rollouts
    plain = SyntheticEnvironment(noise=0.0, seed=0, failure_samples=20_000, reward_ceiling=0.95, reward0=0.05)
    assert plain.run_constant(32, 18_000).array("reward_mean")[-1] > run.array("reward_mean")[-1]


def test_crash_hazard_crashes_some_runs_before_the_entropy_budget_and_scales_with_r_squared():
    early, causes = [], []
    for seed in range(40):
        env = SyntheticEnvironment(noise=0.0, seed=seed, failure_samples=20_000, crash_hazard=1.0)
        env.run_constant(64, 25_000)
        causes.append(env.crash_cause)
        early.append(env.collapsed_at)
    n_hazard = causes.count("hazard")
    # P(crash before F) = 1 - exp(-1) = 0.63 at r = 1: 25.3 of 40 expected
    assert 15 <= n_hazard <= 35 and causes.count("entropy") == 40 - n_hazard
    m = ClockModel(crash_hazard=1.0)
    assert m.crash_rate(64, 0.5 * m.sqrt_lr(64)) == pytest.approx(m.crash_rate(64) / 4)
    assert ClockModel().crash_rate(64) == 0.0


def test_the_task_table_builds_and_a_constant_at_the_first_batch_collapses():
    assert len(TASKS) == 6
    for name, kw in TASKS.items():
        env = SyntheticEnvironment(seed=0, **COMMON, **kw)
        env.run_constant(32, 1.5 * env.model.failure_at(32))
        assert env.collapsed_at is not None, name
        assert math.isfinite(env.collapsed_at)
