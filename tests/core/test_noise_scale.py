"""The two-batch noise-scale probe's estimator, checked on the noisy-quadratic simulator at a known
noise scale, and the sweep range derived from it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlvr_schedule.theory import NoisyQuadratic
from rlvr_schedule.theory.noise_scale import (
    closed_form_b_simple,
    critical_batch_from_noise,
    noise_scale_from_draws,
    sweep_batches,
    zero_variance_share,
)

UNITS, PER_UNIT, B_SMALL = 32, 8, 16  # 32 big batches of 8 x 16 = 128 samples


def _model(b_simple: float, d: int = 64, seed: int = 1) -> NoisyQuadratic:
    rng = np.random.default_rng(seed)
    sig = rng.uniform(0.2, 2.0, d)
    g = rng.normal(size=d)
    g *= math.sqrt(sig.sum() / b_simple / (g @ g))
    return NoisyQuadratic(g, np.ones(d), sig)


def _draws(model: NoisyQuadratic, rng: np.random.Generator, shared: float = 0.0, precond=None):
    """Squared norms of small batches nested in big ones, and the big batches' Gram matrix.
    ``shared`` adds a noise term common to the small batches of one big batch (they are then
    not independent: the two-batch |G|^2 is biased)."""
    g = model.gradient + model.noise(rng, UNITS * PER_UNIT, B_SMALL)
    g = g.reshape(UNITS, PER_UNIT, -1)
    if shared:
        g = g + shared * model.noise(rng, UNITS, B_SMALL)[:, None, :]
    if precond is not None:
        g = g * precond
    big = g.mean(axis=1)
    return (g**2).sum(-1), (big**2).sum(-1), big @ big.T


def test_interval_covers_the_known_noise_scale_and_the_parts_are_unbiased():
    model = _model(300.0)
    true = closed_form_b_simple(model.gradient, model.noise_cov)
    assert true == pytest.approx(300.0)
    seeds = 60
    cover, stable, g2, tr = 0, 0, [], []
    for seed in range(seeds):
        ss, sb, gram = _draws(model, np.random.default_rng(seed))
        e = noise_scale_from_draws(ss, sb, B_SMALL, B_SMALL * PER_UNIT, big_gram=gram, n_boot=400, seed=seed)
        cover += e.interval[0] <= true <= e.interval[1]
        stable += bool(e.g2_stable)
        g2.append(e.g2)
        tr.append(e.trace)
    assert cover / seeds >= 0.85  # nominal 95%
    assert stable / seeds >= 0.85  # independent parts: |G|^2 agrees across the two sizes
    g = model.gradient @ model.gradient
    # unbiased: the mean over seeds within 3 standard errors of the truth
    assert abs(np.mean(g2) - g) < 3 * np.std(g2) / math.sqrt(seeds)
    assert abs(np.mean(tr) - model.noise_cov.sum()) < 3 * np.std(tr) / math.sqrt(seeds)


def test_cross_size_check_flags_small_batches_that_are_not_independent():
    model = _model(300.0)
    flagged = 0
    for seed in range(20):
        ss, sb, gram = _draws(model, np.random.default_rng(seed), shared=1.0)
        e = noise_scale_from_draws(ss, sb, B_SMALL, B_SMALL * PER_UNIT, big_gram=gram, n_boot=400, seed=seed)
        flagged += e.g2_stable is False
        assert e.g2 > e.g2_cross  # the shared term reads as mean gradient in the two-batch estimate
    assert flagged >= 16


def test_preconditioned_noise_scale_matches_its_closed_form():
    """As the trainer's probe does it: Adam's v is the mean squared small-batch gradient over a
    warm-up and the probe's own draws, D = 1 / sqrt(v); the estimate on D-scaled gradients covers
    tr(D Sigma D) / |D G|^2 for that D."""
    model = _model(300.0)
    cover = 0
    for seed in range(30):
        rng = np.random.default_rng(100 + seed)
        warm = model.gradient + model.noise(rng, 8, B_SMALL)
        g = (model.gradient + model.noise(rng, UNITS * PER_UNIT, B_SMALL)).reshape(UNITS, PER_UNIT, -1)
        v = (np.sum(warm**2, axis=0) + np.sum(g**2, axis=(0, 1))) / (8 + UNITS * PER_UNIT)
        d = 1.0 / np.sqrt(v)
        true = closed_form_b_simple(model.gradient, model.noise_cov, d)
        assert true != pytest.approx(300.0, rel=0.05)  # the preconditioner changes the noise scale
        gp = g * d
        big = gp.mean(axis=1)
        e = noise_scale_from_draws((gp**2).sum(-1), (big**2).sum(-1), B_SMALL, B_SMALL * PER_UNIT, n_boot=400)
        cover += e.interval[0] <= true <= e.interval[1]
    assert cover >= 25


def test_noise_dominated_draws_leave_the_upper_end_open():
    model = _model(1e6)  # far above the big batch: |G|^2 is lost in the noise
    ss, sb, _ = _draws(model, np.random.default_rng(0))
    e = noise_scale_from_draws(ss, sb, B_SMALL, B_SMALL * PER_UNIT, n_boot=400)
    assert math.isinf(e.interval[1]) and not e.bounded
    assert e.g2_stable is None  # no Gram matrix: not checked
    assert sweep_batches(e.b_simple, e.interval, group_size=8, fallback=(8, 128)).designed is False


def test_bad_draws_are_refused():
    with pytest.raises(ValueError, match="b_small < b_big"):
        noise_scale_from_draws([1.0, 2.0], [1.0, 1.0], 16, 16)
    with pytest.raises(ValueError, match="one entry per unit"):
        noise_scale_from_draws([1.0, 2.0, 3.0], [1.0, 1.0], 8, 16)
    with pytest.raises(ValueError, match="at least 2 units"):
        noise_scale_from_draws([1.0], [1.0], 8, 16)


def test_sweep_batches_span_a_quarter_to_four_times_the_noise_scale():
    r = sweep_batches(256.0, (200.0, 330.0), group_size=8)
    assert r.designed and r.batches == [64, 128, 256, 512, 1024]
    r = sweep_batches(100.0, (80.0, 130.0), group_size=8, max_batch=256)
    assert r.batches[0] == 24 and r.batches[-1] == 256 and any("capped" in n for n in r.notes)
    wide = sweep_batches(100.0, (10.0, 900.0), group_size=8)
    assert wide.designed and any("wider" in n for n in wide.notes)


def test_critical_batch_from_noise_is_the_theory_line():
    # B* = B~_noise (lambda_0 / lambda - 1/2): half the noise scale at the small-batch best LR
    assert critical_batch_from_noise(200.0, 1.0) == pytest.approx(100.0)
    assert critical_batch_from_noise(200.0, 0.25) == pytest.approx(700.0)
    assert critical_batch_from_noise(200.0, 2.0) == pytest.approx(0.0)
    # the [B/4, 4B] range holds B* for lambda in [lambda_0 / 4.5, 4/3 lambda_0]
    assert critical_batch_from_noise(200.0, 4 / 3) == pytest.approx(50.0)
    assert critical_batch_from_noise(200.0, 1 / 4.5) == pytest.approx(800.0)


def test_zero_variance_share():
    assert zero_variance_share([1, 1, 0, 1, 0, 0, 0, 0], 4) == 0.5
    with pytest.raises(ValueError, match="group_size"):
        zero_variance_share([1, 0, 1], 2)
