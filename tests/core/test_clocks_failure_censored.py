"""The sweep's pooled failure clock with censored runs: a log-normal by maximum likelihood, pooled at
a sample clock unless the batch exponent is resolved, with a likelihood-ratio interval."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlvr_schedule.clocks import FailureScalingFit
from rlvr_schedule.clocks._stats import t_quantile
from rlvr_schedule.clocks.failure.scaling import censored_lognormal, likelihood_ratio_interval
from rlvr_schedule.policy.triggers import FailureClockTrigger
from rlvr_schedule.records import Run, StepRecord


def _sweep(
    points: list[tuple[int, float | None, float]],
) -> tuple[list[Run], list[float | None], list[float]]:
    """(batch, failure rollouts or None, rollouts consumed) per run."""
    runs = [
        Run([StepRecord(step=0, samples=int(t), batch=b, lr=1e-4)], name=f"b{b}-{i}")
        for i, (b, _, t) in enumerate(points)
    ]
    return runs, [f for _, f, _ in points], [t for _, _, t in points]


def _fit(points: list[tuple[int, float | None, float]]) -> FailureScalingFit:
    runs, fails, used = _sweep(points)
    return FailureScalingFit().fit(runs, fails, [False] * len(runs), consumed=used)


def test_without_censored_runs_the_clock_is_the_geometric_mean_with_its_t_interval():
    vals = [9000.0, 10000.0, 12000.0, 11000.0]
    fit = _fit([(16, v, v) for v in vals])
    lv = np.log(vals)
    assert fit.failure_samples_ == pytest.approx(math.exp(lv.mean()))
    h = t_quantile(0.975, 3) * lv.std(ddof=1) / 2
    assert fit.failure_samples_interval_ == pytest.approx((math.exp(lv.mean() - h), math.exp(lv.mean() + h)))


def test_two_failures_among_censored_runs_pool_at_a_sample_clock_with_an_interval():
    # the fresh-clone demo of 2026-12-04: 10 runs of 14,336 rollouts at batches 8-128, two reward
    # crashes (batch 8 at 13,448, batch 32 at 6,912). Two points fit any slope exactly (alpha -0.48,
    # no spread), which used to leave the clock at their geometric mean (9,641) with no interval.
    budget = 14_336.0
    pts = [(8, 13_448.0, budget), (32, 6_912.0, budget)]
    pts += [(b, None, budget) for b in (16, 64, 128, 8, 16, 32, 64, 128)]
    fit = _fit(pts)
    assert fit.alpha_ == pytest.approx(-0.48, abs=0.01) and math.isnan(fit.alpha_interval_[0])
    assert fit.exponent_ == 0.0  # unresolved: pooled and spent as a sample clock
    f, (lo, hi) = fit.failure_samples_, fit.failure_samples_interval_
    # 8 of 10 runs outlived the budget: the median clock lies past it, and so does the lower end
    assert f == pytest.approx(26_082, rel=1e-3) and lo == pytest.approx(14_378, rel=1e-2) and hi > 10 * f
    assert fit.failure_probability(budget) == pytest.approx(0.2, abs=0.01)  # 2 of 10 observed
    # the live policy's first failure switch, at the rule's LR, falls between 0.4 F and the lower end
    trig = FailureClockTrigger(f, lower=lo, batch=fit.batch_, lr=2e-4, exponent=fit.exponent_)
    spent = 0
    while trig.propose(16, 2e-4, (32, 2e-4)) is None:
        trig.spend(16, 16, 2e-4)
        spent += 16
    assert 0.4 * f <= spent <= lo


def test_more_runs_outliving_the_budget_lengthen_the_clock():
    fails = [(16, 9_000.0, 9_000.0), (16, 11_000.0, 11_000.0), (16, 10_000.0, 10_000.0)]
    los, fs = [], []
    for k in (1, 3, 7):
        fit = _fit(fails + [(16, None, 12_000.0)] * k)
        fs.append(fit.failure_samples_)
        los.append(fit.failure_samples_interval_[0])
    assert fs[0] < fs[1] < fs[2] and los[0] < los[1] < los[2]


def test_a_resolved_batch_exponent_is_kept_for_pooling():
    # a step clock (failure samples ~ B) over four batches: alpha's interval excludes 0
    rng = np.random.default_rng(0)
    pts = [(b, 100.0 * b * math.exp(rng.normal(0, 0.05)), 100.0 * b * 2) for b in (8, 16, 32, 64)]
    fit = _fit(pts + [(128, None, 6_000.0)])  # censored below its predicted 12,800
    assert fit.alpha_interval_[0] > 0 and fit.exponent_ == fit.alpha_
    assert fit.predict(64) == pytest.approx(fit.failure_samples_ * (64 / fit.batch_) ** fit.alpha_)


def test_the_likelihood_ratio_interval_covers_the_clock():
    # 100 simulated sweeps of 10 runs (log-normal clock, median 10,000, log spread 0.4), censored at
    # a budget near the median: the 95% interval should cover the median about 95% of the time
    rng = np.random.default_rng(1)
    mu0, hit, n = math.log(10_000), 0, 0
    for _ in range(100):
        v = rng.normal(mu0, 0.4, 10)
        cut = math.log(11_000)
        x, c = [a for a in v if a <= cut], [cut] * int((v > cut).sum())
        if len(x) < 2 or not c:
            continue
        mu, sig = censored_lognormal(x, c)
        lo, hi = likelihood_ratio_interval(x, c, mu, sig)
        n += 1
        hit += lo <= mu0 <= hi
    assert n >= 90 and hit / n >= 0.88
