"""Properties of the closed forms (THEORY sections 1 and 3)."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rlvr_schedule.theory import (
    LocalQuadratic,
    b_noise,
    b_simple,
    eps_max,
    gradient_noise_from_two_batches,
    mccandlish,
    sgd_expected_decrease,
    steps_for_samples,
)

B0 = 64
dims = st.integers(min_value=2, max_value=12)


@st.composite
def quadratics(draw):
    d = draw(dims)
    pos = st.floats(min_value=0.05, max_value=20.0)
    h = draw(arrays(float, d, elements=pos))
    s = draw(arrays(float, d, elements=pos))
    g = draw(arrays(float, d, elements=st.floats(min_value=-3, max_value=3)))
    assume(np.abs(g).max() > 0.05)
    return LocalQuadratic.from_spectra(g, h, s)


@settings(max_examples=50, deadline=None)
@given(lq=quadratics(), lr=st.floats(min_value=1e-4, max_value=1.0))
def test_per_sample_progress_is_a_line_in_batch(lq, lr):
    b = np.array([1.0, 7.0, 50.0, 333.0, 1024.0])
    p = lq.progress_per_sample(b, lr, B0)
    a, c, d = lq.coefficients(lr, B0)
    np.testing.assert_allclose(p, a - c - d * b, rtol=1e-9, atol=1e-12 * (abs(a) + abs(c) + abs(d) * 1024))
    slopes = np.diff(p) / np.diff(b)
    np.testing.assert_allclose(slopes, -d, rtol=1e-6, atol=1e-12 * (abs(a) + abs(c)))


@settings(max_examples=50, deadline=None)
@given(lq=quadratics(), lr=st.floats(min_value=1e-4, max_value=1.0), k=st.floats(min_value=0.1, max_value=10))
def test_critical_batch_scales_inversely_with_lr(lq, lr, k):
    """B* + B~_noise / 2 = eps~ sqrt(B0) / lr0: proportional to 1 / lr0 on the sqrt rule."""
    shifted = lq.critical_batch(lr, B0) + lq.b_noise_tilde / 2
    assert lq.critical_batch(k * lr, B0) + lq.b_noise_tilde / 2 == pytest.approx(shifted / k, rel=1e-9)
    assert shifted == pytest.approx(lq.eps_tilde * np.sqrt(B0) / lr, rel=1e-9)


@settings(max_examples=50, deadline=None)
@given(
    lq=quadratics(),
    bstar=st.floats(min_value=2.0, max_value=5000.0),
    frac=st.floats(min_value=0.01, max_value=1.9),
)
def test_critical_batch_halves_per_sample_progress_and_peaks_per_step(lq, bstar, frac):
    lr = lq.lr_for_critical_batch(bstar, B0)
    assert lq.critical_batch(lr, B0) == pytest.approx(bstar, rel=1e-9)
    p0 = lq.progress_per_sample(1e-9, lr, B0)
    assert lq.progress_per_sample(bstar, lr, B0) == pytest.approx(p0 / 2, rel=1e-6)
    assert lq.progress_per_sample(lq.zero_progress_batch(lr, B0), lr, B0) == pytest.approx(0, abs=1e-9 * p0)
    peak = lq.progress_per_step(bstar, lr, B0)
    assert lq.progress_per_step(frac * bstar, lr, B0) <= peak * (1 + 1e-12)
    # samples and steps to a fixed progress, relative to their minima
    b = frac * bstar
    p = lq.progress_per_sample(b, lr, B0)
    assert lq.samples_ratio(b, lr, B0) == pytest.approx(p0 / p, rel=1e-6)
    assert lq.steps_ratio(b, lr, B0) == pytest.approx(peak / (b * p), rel=1e-6)


def test_past_the_zero_progress_batch_ratios_are_infinite():
    lq = LocalQuadratic.from_spectra([1.0, 0.5], [1.0, 2.0], [1.0, 1.0])
    lr = lq.lr_for_critical_batch(100, B0)
    assert lq.samples_ratio([100, 200, 300], lr, B0).tolist() == [2.0, np.inf, np.inf]
    assert lq.steps_ratio(250, lr, B0) == np.inf


@settings(max_examples=50, deadline=None)
@given(bn=st.floats(min_value=0.5, max_value=1e4), b=st.floats(min_value=0.5, max_value=1e5))
def test_mccandlish_tradeoff_is_a_hyperbola(bn, b):
    s = mccandlish.steps_ratio(b, bn)
    e = mccandlish.samples_ratio(b, bn)
    assert (s - 1) * (e - 1) == pytest.approx(1.0, rel=1e-9)
    assert steps_for_samples(e) == pytest.approx(s, rel=1e-6)


@settings(max_examples=50, deadline=None)
@given(lq=quadratics(), b=st.floats(min_value=1, max_value=4096))
def test_eps_opt_maximises_the_sgd_step(lq, b):
    g, h, s = lq.gradient, lq.hessian, lq.noise_cov
    e = float(mccandlish.eps_opt(b, eps_max(g, h), b_noise(g, h, s)))
    best = sgd_expected_decrease(e, b, g, h, s)
    assert best >= sgd_expected_decrease(0.9 * e, b, g, h, s)
    assert best >= sgd_expected_decrease(1.1 * e, b, g, h, s)
    dl_max = float(g @ g) ** 2 / (2 * float(g @ (h * g)))
    assert best == pytest.approx(float(mccandlish.progress_opt(b, dl_max, b_noise(g, h, s))), rel=1e-9)


def test_noise_scales_agree_when_hessian_is_identity():
    g, s = np.array([1.0, -2.0, 0.5]), np.array([3.0, 1.0, 2.0])
    assert b_noise(g, np.ones(3), s) == pytest.approx(b_simple(g, s)) == pytest.approx(6.0 / 5.25)
    full = LocalQuadratic(g, np.eye(3), np.diag(s))
    assert full.b_noise == pytest.approx(full.b_simple)


@settings(max_examples=50, deadline=None)
@given(
    g2=st.floats(min_value=1e-6, max_value=1e3),
    tr=st.floats(min_value=0, max_value=1e5),
    bs=st.integers(min_value=1, max_value=512),
    k=st.integers(min_value=2, max_value=64),
)
def test_two_batch_estimator_is_exact_on_expectations(g2, tr, bs, k):
    bb = k * bs
    est_g2, est_tr = gradient_noise_from_two_batches(g2 + tr / bs, bs, g2 + tr / bb, bb)
    assert est_g2 == pytest.approx(g2, rel=1e-6, abs=1e-9 * (g2 + tr))
    assert est_tr == pytest.approx(tr, rel=1e-6, abs=1e-9 * (g2 + tr) * bs)


def test_two_batch_estimator_is_unbiased_on_samples():
    rng = np.random.default_rng(0)
    d, bs, bb, n = 20, 4, 64, 20_000
    grad, sigma = np.full(d, 0.3), 1.5
    small = grad + rng.standard_normal((n, d)) * sigma / np.sqrt(bs)
    big = grad + rng.standard_normal((n, d)) * sigma / np.sqrt(bb)
    g2s, g2b = (small**2).sum(1), (big**2).sum(1)
    est_g2, est_tr = gradient_noise_from_two_batches(g2s, bs, g2b, bb)
    assert est_g2.shape == (n,)
    assert est_g2.mean() == pytest.approx(d * 0.09, rel=0.05)
    assert est_tr.mean() == pytest.approx(d * sigma**2, rel=0.05)
    with pytest.raises(ValueError, match="b_small"):
        gradient_noise_from_two_batches(1.0, 64, 1.0, 64)


def test_quadratic_validation_names_the_field():
    with pytest.raises(ValueError, match="hessian"):
        LocalQuadratic([1.0, 2.0], [[1.0, 0.5], [0.0, 1.0]], [1.0, 1.0])
    with pytest.raises(ValueError, match="noise_cov"):
        LocalQuadratic([1.0, 2.0], [1.0, 1.0], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="preconditioner"):
        LocalQuadratic([1.0, 2.0], [1.0, 1.0], [1.0, 1.0], preconditioner=[1.0, -1.0])
    with pytest.raises(ValueError, match="batch"):
        LocalQuadratic([1.0], [1.0], [1.0]).progress_per_sample(0, 1e-3, 64)
    with pytest.raises(ValueError, match="rule"):
        LocalQuadratic([1.0], [1.0], [1.0]).progress_per_step(8, 1e-3, 64, rule="cube")
    with pytest.raises(ValueError, match="second_moment"):
        LocalQuadratic([1.0], [1.0], [1.0]).progress_per_step(8, 1e-3, 64, second_moment="ema")
    with pytest.raises(ValueError, match="samples_ratio"):
        steps_for_samples(1.0)
