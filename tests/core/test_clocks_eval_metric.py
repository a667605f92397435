"""The progress clock on held-out accuracy: it reads the eval curve where runs logged one, and
the training reward stays the failure clock's."""

from __future__ import annotations

import numpy as np

from rlvr_schedule.clocks import EVAL_METRIC, ProgressClock, fit_sweep, progress_metric
from rlvr_schedule.records import Run, StepRecord


def _run(batch: int, speed: float, *, total: int = 8192, every: int = 256, seed: int = 0, evals=True) -> Run:
    """Flat, noisy training reward; held-out accuracy climbing at ``speed`` per rollout (logged
    before each update that crosses a multiple of ``every``)."""
    rng = np.random.default_rng([batch, seed])
    recs, s = [], 0
    while s < total:
        extra = {}
        if evals and (s == 0 or s // every != (s + batch) // every):
            extra = {EVAL_METRIC: float(min(0.9, 0.1 + speed * s + rng.normal(0, 0.005)))}
        s += batch
        recs.append(
            StepRecord(
                step=len(recs) + 1,
                samples=s,
                batch=batch,
                lr=1e-3,
                reward_mean=float(0.3 + rng.normal(0, 0.1)),
                entropy=1.0,
                extra=extra,
            )
        )
    return Run(recs, name=f"b{batch}-s{seed}")


def test_clock_reads_eval_points_at_the_rollouts_trained_on():
    r = _run(16, 1e-4)
    c = ProgressClock(metric=EVAL_METRIC).fit(r, None)
    x = c.curve_[0]
    assert x[0] == 0 and np.all(np.diff(x) >= 256 - 16)  # sparse: one point per eval
    assert c.rate_ > 5e-5  # the eval curve climbs; the training reward is flat
    assert abs(ProgressClock().fit(r, None).rate_) < 2e-5


def test_sweep_prefers_eval_accuracy_and_recovers_the_critical_batch():
    bstar = 64.0
    runs = [_run(b, 1e-4 * (1 - b / (2 * bstar)), seed=s) for s in (0, 1) for b in (8, 16, 32, 64, 96)]
    assert progress_metric(runs) == EVAL_METRIC
    fit = fit_sweep(runs, n_boot=60)
    assert fit.metric == EVAL_METRIC and fit.to_dict()["metric"] == EVAL_METRIC
    assert 0.5 * bstar < fit.critical_batch < 2 * bstar, fit.critical_batch
    # one run without evals: the whole sweep falls back to the training reward
    runs[0] = _run(8, 1e-4, evals=False)
    assert progress_metric(runs) == "reward_mean"
    assert fit_sweep(runs, n_boot=20).metric == "reward_mean"


def test_samples_to_target_interval_has_the_eval_sets_binomial_noise():
    r = _run(16, 1e-4)
    for rec in r.records:
        if "eval_accuracy" in rec.extra:
            rec.extra["eval_size"] = 64.0
    c = ProgressClock(target=0.5, metric=EVAL_METRIC).fit(r, None)
    lo, hi = c.samples_to_target_interval_
    # +-1.96 sqrt(0.25/64) = +-0.12 accuracy at 1e-4 per rollout: about +-1,200 rollouts
    assert lo < c.samples_to_target_ - 800 and hi > c.samples_to_target_ + 800, (lo, c.samples_to_target_, hi)
