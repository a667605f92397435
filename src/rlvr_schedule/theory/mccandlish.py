"""McCandlish et al. 2018 (arXiv:1812.06162): SGD on a local quadratic, the gradient noise scale.

One SGD step of size eps at batch B changes the loss by
``E[dL] = -eps |G|^2 + eps^2/2 (G'HG + tr(H Sigma)/B)``; the best step and its progress both
scale as ``1 / (1 + B_noise / B)``, which gives the steps/samples trade-off
``(S/S_min - 1)(E/E_min - 1) = 1``. ``gradient_noise_from_two_batches`` is the unbiased
two-batch estimate of |G|^2 and tr(Sigma) from gradient norms at the same parameters.
Matrices are full (d, d) or diagonals (d,).
"""

from __future__ import annotations

import numpy as np

from rlvr_schedule.theory._forms import as_operator, as_vector, quad, trace_product

__all__ = [
    "b_noise",
    "b_simple",
    "eps_max",
    "eps_opt",
    "gradient_noise_from_two_batches",
    "progress_opt",
    "samples_ratio",
    "sgd_expected_decrease",
    "steps_for_samples",
    "steps_ratio",
]


def _ghs(gradient, hessian=None, noise_cov=None):
    g = as_vector("gradient", gradient)
    h = None if hessian is None else as_operator("hessian", hessian, g.size)
    s = None if noise_cov is None else as_operator("noise_cov", noise_cov, g.size)
    return g, h, s


def b_noise(gradient, hessian, noise_cov) -> float:
    """B_noise = tr(H Sigma) / G'HG: the batch at which the best SGD step is half its maximum."""
    g, h, s = _ghs(gradient, hessian, noise_cov)
    return trace_product(h, s) / quad(h, g)


def b_simple(gradient, noise_cov) -> float:
    """B_simple = tr(Sigma) / |G|^2 (equals B_noise when H is a multiple of the identity)."""
    g, _, s = _ghs(gradient, None, noise_cov)
    tr = float(np.sum(s)) if s.ndim == 1 else float(np.trace(s))
    return tr / float(g @ g)


def eps_max(gradient, hessian) -> float:
    """Best SGD step size without noise: |G|^2 / G'HG."""
    g, h, _ = _ghs(gradient, hessian)
    return float(g @ g) / quad(h, g)


def eps_opt(batch, eps_max: float, b_noise: float):
    """Best SGD step size at ``batch``: eps_max / (1 + B_noise / B)."""
    return eps_max / (1.0 + b_noise / np.asarray(batch, dtype=float))


def progress_opt(batch, progress_max: float, b_noise: float):
    """Loss decrease of the best step at ``batch``: dL_max / (1 + B_noise / B), dL_max = |G|^4 / (2 G'HG)."""
    return progress_max / (1.0 + b_noise / np.asarray(batch, dtype=float))


def sgd_expected_decrease(eps, batch, gradient, hessian, noise_cov):
    """Expected loss *decrease* of one SGD step: eps |G|^2 - eps^2/2 (G'HG + tr(H Sigma)/B)."""
    g, h, s = _ghs(gradient, hessian, noise_cov)
    eps = np.asarray(eps, dtype=float)
    b = np.asarray(batch, dtype=float)
    return eps * float(g @ g) - 0.5 * eps**2 * (quad(h, g) + trace_product(h, s) / b)


def steps_ratio(batch, b_noise: float):
    """S / S_min = 1 + B_noise / B: optimizer steps to a fixed loss, relative to infinite batch."""
    return 1.0 + b_noise / np.asarray(batch, dtype=float)


def samples_ratio(batch, b_noise: float):
    """E / E_min = 1 + B / B_noise: samples to a fixed loss, relative to batch -> 0."""
    return 1.0 + np.asarray(batch, dtype=float) / b_noise


def steps_for_samples(samples_ratio):
    """The trade-off curve: S/S_min for a given E/E_min (> 1), from (S/S_min - 1)(E/E_min - 1) = 1."""
    e = np.asarray(samples_ratio, dtype=float)
    if np.any(e <= 1):
        raise ValueError("samples_ratio must be > 1 (E_min is the least possible)")
    return 1.0 + 1.0 / (e - 1.0)


def gradient_noise_from_two_batches(g2_small, b_small, g2_big, b_big):
    """Unbiased (|G|^2, tr(Sigma)) from squared gradient norms at two batch sizes, same parameters.

    From E|G_B|^2 = |G|^2 + tr(Sigma)/B:
    |G|^2 = (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small) and
    tr(Sigma) = (|G_small|^2 - |G_big|^2) / (1/B_small - 1/B_big). Works elementwise on arrays;
    average numerator and denominator separately (e.g. EMAs) before taking B_simple = tr / |G|^2.
    """
    bs, bb = np.asarray(b_small, dtype=float), np.asarray(b_big, dtype=float)
    if np.any(bs <= 0) or np.any(bb <= 0):
        raise ValueError("b_small and b_big must be > 0")
    if np.any(bs >= bb):
        raise ValueError("b_small must be smaller than b_big")
    gs, gb = np.asarray(g2_small, dtype=float), np.asarray(g2_big, dtype=float)
    g2 = (bb * gb - bs * gs) / (bb - bs)
    tr = (gs - gb) / (1.0 / bs - 1.0 / bb)
    if g2.ndim == 0:
        return float(g2), float(tr)
    return g2, tr
