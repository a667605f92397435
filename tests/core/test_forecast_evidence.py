"""FailureForecast's evidence and confidence conditions: counted in rollouts."""

from __future__ import annotations

import numpy as np

from rlvr_schedule.clocks import FailureForecast
from rlvr_schedule.records import StepRecord


def feed(fc: FailureForecast, entropy, batch: int = 16) -> None:
    for i, h in enumerate(entropy):
        fc.update(StepRecord(step=i, samples=batch * (i + 1), batch=batch, lr=1e-6, entropy=float(h)))


def test_ready_needs_min_samples_rollouts_whatever_the_batch():
    h = np.linspace(1.0, 0.5, 200)
    for batch in (8, 64):
        need = 1024 // batch
        short = FailureForecast(min_points=3, warmup_samples=64, min_samples=1024)
        feed(short, h[: need - 1], batch)
        assert short.significant and not short.ready  # a clear trend, under 1024 rollouts of evidence
        enough = FailureForecast(min_points=3, warmup_samples=64, min_samples=1024)
        feed(enough, h[:need], batch)
        assert enough.ready


def test_noise_without_trend_is_not_significant():
    rng = np.random.default_rng(0)
    fc = FailureForecast(min_points=3, warmup_samples=64, min_samples=0)
    feed(fc, 0.5 + 0.1 * rng.standard_normal(300))
    assert not fc.significant and not fc.ready
    fc = FailureForecast(min_points=3, warmup_samples=64, min_samples=0)
    feed(fc, np.linspace(0.5, 0.3, 300) + 0.1 * rng.standard_normal(300))
    assert fc.significant and fc.ready


def test_the_window_forgets_an_early_transient():
    # a fast early fall (an LR warm-up) then a slow decline: the later-half window forecasts from
    # the slow part; a window over everything extrapolates the transient, far too early
    s = np.arange(1, 601) * 16.0
    h = 0.3 + 0.3 * np.exp(-s / 300.0) - 2e-5 * s
    recent = FailureForecast(min_points=3, warmup_samples=512, recent=0.5, window=1000)
    whole = FailureForecast(min_points=3, warmup_samples=512, window=1000)
    feed(recent, h)
    feed(whole, h)
    true_left = (h[-1] - 0.1 * np.median(h[s <= 512])) / 2e-5
    assert abs(recent.samples_to_failure / true_left - 1) < 0.1
    assert whole.samples_to_failure < 0.8 * true_left


def test_stage_fraction_left_counts_rollouts_since_the_restart():
    fc = FailureForecast(min_points=3, warmup_samples=64, threshold=0.0)
    feed(fc, np.linspace(1.0, 0.5, 100))  # 1600 rollouts, half-way: 1600 left
    assert abs(fc.stage_fraction_left - 0.5) < 0.02
    fc.restart()
    assert fc.start_samples == 1600
