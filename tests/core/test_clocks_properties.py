"""Property tests (hypothesis) of the clock estimators and their numeric helpers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvr_schedule.clocks import (
    CriticalBatchFit,
    FailureClock,
    FailureScalingFit,
    GradientNoiseScale,
    ProgressClock,
    RewardCeilingFit,
    expected_group_variance,
    expected_zero_std_fraction,
)
from rlvr_schedule.clocks._stats import SlidingOLS, t_quantile
from rlvr_schedule.records import Run, StepRecord

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _curve_run(
    batch: int,
    rate: float,
    n_samples: float,
    *,
    reward0: float = 0.1,
    ceiling: float = 0.8,
    noise: float = 0.0,
    seed: int = 0,
    step0: int = 0,
    name: str | None = None,
    fail_at: float | None = None,
) -> Run:
    """Reward R0 + span (1 - exp(-rate t / span)) (negative rate: falls); entropy collapses at fail_at."""
    rng = np.random.default_rng(seed)
    span = ceiling - reward0
    recs = []
    n = int(n_samples // batch)
    for i in range(n):
        t = i * batch  # rollouts trained on before this update's rollouts
        r = reward0 + span * (1 - math.exp(-rate * t / span)) + noise * rng.normal()
        ent = 1.0 if fail_at is None or t < fail_at else 0.01
        recs.append(
            StepRecord(
                step=step0 + i + 1, samples=(i + 1) * batch, batch=batch, lr=1e-6, reward_mean=r, entropy=ent
            )
        )
    return Run(recs, name=name or f"b{batch}")


@SETTINGS
@given(bstar=st.floats(40, 2000), seed=st.integers(0, 10_000))
def test_critical_batch_exact_on_theory_curves(bstar: float, seed: int) -> None:
    """Runs that follow p(B) = p0 (1 - B/(2B*)) exactly give back B* (a 16x sweep)."""
    p0 = 2e-5
    batches = [16, 32, 64, 128, 256]
    runs = [_curve_run(b, p0 * (1 - b / (2 * bstar)), 120_000) for b in batches]
    f = CriticalBatchFit(n_boot=0).fit(runs, failure_samples=[None] * len(runs))
    # B* far past the sweep is only bounded from below by it
    if bstar < 1000:
        assert f.critical_batch_ == pytest.approx(bstar, rel=0.05)
    else:
        assert f.critical_batch_ > 600
    # rate_at_zero_ is the mean reward per rollout from the start to the target at B -> 0
    span, gain = 0.7, f.target_ - 0.1
    e0 = -span / p0 * math.log(1 - gain / span)
    assert f.rate_at_zero_ == pytest.approx(gain / e0, rel=0.05)


@SETTINGS
@given(k1=st.floats(5e-6, 5e-5), ratio=st.floats(1.2, 4.0), seed=st.integers(0, 1000))
def test_faster_runs_have_higher_rate_and_reach_target_sooner(k1: float, ratio: float, seed: int) -> None:
    slow = _curve_run(32, k1, 200_000, noise=0.005, seed=seed)
    fast = _curve_run(32, k1 * ratio, 200_000, noise=0.005, seed=seed + 1)
    a = ProgressClock(target=0.4).fit(slow, failure_samples=None)
    b = ProgressClock(target=0.4).fit(fast, failure_samples=None)
    assert b.rate_ > a.rate_
    assert b.samples_to_target_ < a.samples_to_target_


@SETTINGS
@given(offset=st.integers(1, 10**6), seed=st.integers(0, 1000))
def test_step_renumbering_changes_nothing(offset: int, seed: int) -> None:
    """Clocks count rollouts, not step numbers: renumbered steps give the same fits."""
    base = _curve_run(64, 1e-5, 80_000, noise=0.01, seed=seed, fail_at=50_000)
    moved = _curve_run(64, 1e-5, 80_000, noise=0.01, seed=seed, fail_at=50_000, step0=offset)
    fa, fb = FailureClock().fit(base), FailureClock().fit(moved)
    assert fa.failure_samples_ == fb.failure_samples_ and fa.signal_ == fb.signal_
    assert fa.failure_step_ + offset == fb.failure_step_
    pa, pb = ProgressClock().fit(base), ProgressClock().fit(moved)
    assert pa.samples_to_target_ == pb.samples_to_target_ and pa.rate_ == pb.rate_


@settings(max_examples=15, deadline=None)
@given(
    dim=st.integers(2, 24),
    b_simple=st.floats(2.0, 500.0),
    b_small=st.integers(1, 32),
    factor=st.integers(2, 16),
    seed=st.integers(0, 10_000),
)
def test_gradient_noise_scale_is_unbiased_on_gaussian_gradients(
    dim: int, b_simple: float, b_small: int, factor: int, seed: int
) -> None:
    """EMAs of the two-batch estimates match |G|^2 and tr(Sigma) within 5 standard errors."""
    rng = np.random.default_rng(seed)
    n, beta = 3000, 0.999
    G = rng.normal(size=dim)
    g2 = float(G @ G)
    var = rng.uniform(0.2, 1.0, dim)
    var *= b_simple * g2 / var.sum()  # tr(Sigma) / |G|^2 = b_simple
    b_big = b_small * factor
    small = G + rng.normal(size=(n, dim)) * np.sqrt(var / b_small)
    rest = G + rng.normal(size=(n, dim)) * np.sqrt(var / (b_big - b_small))
    full = (b_small * small + (b_big - b_small) * rest) / b_big
    gns = GradientNoiseScale(beta=beta)
    g2_est, tr_est = [], []
    for i in range(n):
        rec = StepRecord(
            step=i + 1,
            samples=(i + 1) * b_big,
            batch=b_big,
            lr=1e-3,
            grad_norm=float(np.linalg.norm(full[i])),
            grad_norm_micro=float(np.linalg.norm(small[i])),
            micro_batch=b_small,
        )
        gns.update(rec)
        a, c = float(np.sum(small[i] ** 2)), float(np.sum(full[i] ** 2))
        g2_est.append((b_big * c - b_small * a) / (b_big - b_small))
        tr_est.append((a - c) / (1 / b_small - 1 / b_big))
    w = beta ** np.arange(n)[::-1]
    n_eff = w.sum() ** 2 / (w**2).sum()
    assert abs(gns.g2 - g2) < 5 * np.std(g2_est) / math.sqrt(n_eff)
    assert abs(gns.trace_sigma - var.sum()) < 5 * np.std(tr_est) / math.sqrt(n_eff)


@SETTINGS
@given(alpha=st.floats(-0.5, 1.5), f0=st.floats(1e3, 1e6), seed=st.integers(0, 1000))
def test_failure_scaling_exponent(alpha: float, f0: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    batches = [8, 16, 32, 64, 128, 256]
    runs = [Run([StepRecord(step=1, samples=b, batch=b, lr=1e-6)], name=str(b)) for b in batches]
    fs = [f0 * (b / 8) ** alpha * math.exp(0.02 * rng.normal()) for b in batches]
    fit = FailureScalingFit().fit(runs, failure_samples=fs)
    assert fit.alpha_ == pytest.approx(alpha, abs=0.05)
    lo, hi = fit.alpha_interval_
    assert lo < fit.alpha_ < hi
    assert fit.failure_samples_ == pytest.approx(math.exp(np.mean(np.log(fs))))


@SETTINGS
@given(a=st.floats(0.01, 2.0), b=st.floats(0.0, 3.0), h0=st.floats(0.5, 3.0))
def test_reward_ceiling_exact(a: float, b: float, h0: float) -> None:
    h = np.linspace(h0, 0.05, 50)
    r = -a * np.exp(h) + b
    fit = RewardCeilingFit().fit(h, r)
    assert fit.a_ == pytest.approx(a, rel=1e-6, abs=1e-9)
    assert fit.ceiling_ == pytest.approx(b - a, rel=1e-6, abs=1e-9)


@SETTINGS
@given(
    offset=st.floats(0, 1e9),
    slope=st.floats(-1e-3, 1e-3),
    window=st.integers(3, 60),
    n=st.integers(3, 400),
    seed=st.integers(0, 1000),
)
def test_sliding_ols_matches_polyfit_on_large_sample_counts(
    offset: float, slope: float, window: int, n: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    x = offset + np.cumsum(rng.integers(1, 512, n)).astype(float)
    y = slope * (x - offset) + rng.normal(0, 0.1, n)
    ols = SlidingOLS(window)
    for xi, yi in zip(x, y, strict=True):
        ols.add(xi, yi)
    xs, ys = x[-window:], y[-window:]
    ref = np.polyfit(xs - xs.mean(), ys, 1)[0]
    got = ols.fit()[0]
    assert got == pytest.approx(ref, rel=1e-6, abs=1e-12)


def test_t_quantiles() -> None:
    for q, df, want in [
        (0.975, 1, 12.706),
        (0.975, 2, 4.303),
        (0.975, 5, 2.571),
        (0.975, 10, 2.228),
        (0.975, 30, 2.042),
        (0.95, 4, 2.132),
        (0.975, math.inf, 1.960),
    ]:
        assert t_quantile(q, df) == pytest.approx(want, abs=2e-3)


@given(p=st.floats(0, 1), g=st.integers(2, 16))
@settings(max_examples=20, deadline=None)
def test_group_statistics_match_monte_carlo(p: float, g: int) -> None:
    rng = np.random.default_rng(0)
    r = rng.random((20_000, g)) < p
    zero = np.mean(r.all(1) | (~r).all(1))
    var = np.mean(r.var(1, ddof=0))
    assert zero == pytest.approx(expected_zero_std_fraction(p, g), abs=0.015)
    assert var == pytest.approx(expected_group_variance(p, g), abs=0.01)


def test_progress_clock_errors_name_the_run_and_field() -> None:
    run = Run(
        [StepRecord(step=i + 1, samples=i + 1, batch=1, lr=1.0) for i in range(10)],
        name="nolog",
        source="runs/nolog.jsonl",
    )
    with pytest.raises(ValueError, match=r"nolog.*runs/nolog.jsonl.*reward_mean"):
        ProgressClock().fit(run)
    with pytest.raises(ValueError, match="fraction"):
        ProgressClock(fraction=0.0)


def test_zero_progress_run_past_2bstar() -> None:
    """A run past 2B* (reward falls, the target never reached): the fit still finds B*."""
    p0, bstar = 2e-5, 100.0
    runs = [_curve_run(b, p0 * (1 - b / (2 * bstar)), 100_000) for b in (16, 32, 64, 128, 256)]
    f = CriticalBatchFit(n_boot=50).fit(runs, failure_samples=[None] * 5)
    assert f.critical_batch_ == pytest.approx(bstar, rel=0.1)
    rows = {r["batch"]: r for r in f.table_}
    assert not rows[256]["reached_target"] and math.isnan(rows[256]["samples_to_target"])
    assert rows[256]["rate"] < 0.05 * rows[16]["rate"]
    assert f.samples_ratio(256) == math.inf and f.samples_ratio(100) == pytest.approx(2.0, rel=0.1)
