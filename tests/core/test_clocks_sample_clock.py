"""The default detectors judge every batch of a sweep over the same stretch of *rollouts*.

A failure that arrives after a fixed number of rollouts (a sample clock) must be found at that
rollout count at every batch, so that a sweep's fitted failure exponent reads ~0, not ~1. With
warm-ups counted in records (the old defaults) only the small batches of a short run could
alarm at all, which biased the exponent towards a step clock.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_schedule.clocks import FailureClock, FailureScalingFit, RewardCrash
from rlvr_schedule.records import Run, StepRecord

BATCHES = [8, 16, 32, 64, 128]


def crash_run(
    batch: int, crash_at: int, seed: int, *, budget: int = 4096, spike_at: int | None = None, r0: float = 0.3
) -> Run:
    """Reward r0 (binomial noise at this batch) until ``crash_at`` rollouts, then falling to 0 over
    400 rollouts; grad norm x20 from ``spike_at`` on. No progress first (as on the tiny task at a
    too-high LR)."""
    rng = np.random.default_rng(seed)
    recs = []
    for k in range(budget // batch):
        s = (k + 1) * batch
        p = r0 * min(1.0, max(0.0, 1 - (s - crash_at) / 400))
        gn = float(np.exp(rng.normal(0, 0.1))) * (20.0 if spike_at is not None and s >= spike_at else 1.0)
        recs.append(
            StepRecord(
                step=k + 1,
                samples=s,
                batch=batch,
                lr=1e-4,
                reward_mean=rng.binomial(batch, p) / batch,
                entropy=0.4,
                grad_norm=gn,
                kl=0.01,
            )
        )
    return Run(recs, name=f"b{batch}-s{seed}")


@pytest.mark.parametrize("crash_at", [1200, 2400])
def test_a_reward_crash_on_a_sample_clock_reads_as_one(crash_at: int) -> None:
    runs = [crash_run(b, crash_at, seed) for seed in range(3) for b in BATCHES]
    clocks = [FailureClock().fit(r) for r in runs]
    assert all(c.signal_ == "reward_crash" for c in clocks), [c.signal_ for c in clocks]
    found = np.array([c.failure_samples_ for c in clocks], float)
    # the smoothed reward falls below 0.65 x its peak ~70-330 rollouts into the fall, +- one update
    assert np.all(found > crash_at) and np.all(found < crash_at + 650), found
    fit = FailureScalingFit().fit(runs, list(found))
    lo, hi = fit.alpha_interval_
    # a sample clock (0), far from a step clock (1); the onset rule of the reward crash reads the
    # smallest batches ~100 rollouts later (alpha ~ -0.03, an interval that may just miss 0)
    assert abs(fit.alpha_) < 0.1 and -0.15 < lo and hi < 0.15, (fit.alpha_, fit.alpha_interval_)


def test_a_grad_norm_spike_at_a_rollout_count_is_found_at_every_batch() -> None:
    for b in BATCHES:
        run = crash_run(b, 10**9, 0, spike_at=1500)
        c = FailureClock().fit(run)
        assert c.signal_ == "grad_norm_spike" and 1500 <= c.failure_samples_ < 1500 + b, (
            b,
            c.failure_samples_,
        )


def test_no_alarm_without_a_failure_at_any_batch() -> None:
    for seed in range(3):
        for b in BATCHES:
            assert FailureClock().fit(crash_run(b, 10**9, seed)).failure_samples_ is None


@settings(max_examples=25, deadline=None)
@given(batch=st.sampled_from(BATCHES), start_span=st.integers(1, 3000))
def test_reward_crash_start_level_is_counted_in_rollouts(batch: int, start_span: int) -> None:
    """The starting level is the mean over the first ``floor_span_samples`` rollouts (at least
    ``warmup`` records): later rewards do not move it."""
    det = RewardCrash(floor_span_samples=start_span)
    fixed_at, seen = None, []
    for k in range(4000 // batch):
        r = 0.2 + 0.1 * (k % 3)
        seen.append(r)
        det.update(StepRecord(step=k + 1, samples=(k + 1) * batch, batch=batch, lr=1.0, reward_mean=r))
        if fixed_at is None and det._floor_armed:
            fixed_at = k + 1
    n = max(-(-start_span // batch), det.warmup)  # records until the first update at or past start_span
    if n <= 4000 // batch:
        assert fixed_at == n and det.start == pytest.approx(np.mean(seen[:n]))
    else:
        assert fixed_at is None
