"""The progress clock of a run whose batch changes smooths over rollouts, not records.

A window of 2% of the *records* of a ramp 8 -> 128 spans only a few batch-8 updates at the start,
so a lucky start reads as reaching the target (seen on the tiny task: "target reached after 16
rollouts"). Counted in rollouts the window is the same stretch of training everywhere.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlvr_schedule.clocks import ProgressClock
from rlvr_schedule.records import Run, StepRecord


def ramp_run(seed: int, budget: int = 8192) -> Run:
    """Batch 8 -> 128 in steps of 8 over the first half, then 128; the reward rises linearly in
    rollouts from 0.3 to 0.5, with binomial-size noise at each update's batch."""
    rng = np.random.default_rng(seed)
    recs, s, k = [], 0, 0
    while s < budget:
        b = min(128, 8 * (1 + int(16 * s / (budget / 2))))
        p = 0.3 + 0.2 * s / budget
        s += b
        k += 1
        recs.append(StepRecord(step=k, samples=s, batch=b, lr=1e-4, reward_mean=rng.binomial(b, p) / b))
    return Run(recs, name=f"ramp-s{seed}")


def test_a_ramp_reaches_the_target_where_its_reward_does() -> None:
    # the mean reward crosses 0.4 at 4096 rollouts; the first crossing of a noisy smoothed curve
    # comes earlier (as at any constant batch), but not within the first few updates: with a
    # 2%-of-records window (3 records here) the median was 38 rollouts
    got = np.array(
        [
            ProgressClock(target=0.4).fit(ramp_run(seed), failure_samples=None).samples_to_target_
            for seed in range(40)
        ]
    )
    assert np.median(got) > 1200, got
    assert np.mean(got < 300) < 0.1, got


def test_a_constant_batch_run_keeps_its_record_window() -> None:
    rng = np.random.default_rng(0)
    run = Run(
        [
            StepRecord(step=i + 1, samples=32 * (i + 1), batch=32, lr=1e-4, reward_mean=float(rng.random()))
            for i in range(500)
        ],
        name="c32",
    )
    pc = ProgressClock(target=0.9).fit(run, failure_samples=None)
    x, ys = pc.curve_
    assert ys[250] == pytest.approx(
        np.mean(run.array("reward_mean")[245:255])
    )  # 10 records = 2% of 500, centred
