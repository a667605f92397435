"""The local quadratic model of Adam in the noise-dominated regime.

Per-sample gradients have mean G and covariance Sigma; the loss is quadratic with Hessian H over
one step. With beta1 = 0, a slow beta2, eps ~ 0 and noise dominating the second moment
(v_i ~ sigma_i^2 / B) Adam's preconditioner is sqrt(B) D, D = diag(1 / sigma_i). An LR rule
lr(B) = lr0 f(B / B0) then gives an update of mean -eta D G and covariance eta^2 D Sigma D / B with
eta = lr(B) sqrt(B), so one step decreases the loss by

    dL_step(B) = eta G'DG - eta^2/2 (G'DHDG + tr(DHD Sigma) / B).

On the square-root rule eta = lambda B (lambda = lr0 / sqrt(B0)) and the per-sample progress is a
line, p(B) = a - c - d B with a = lambda G'DG, c = lambda^2/2 tr(DHD Sigma), d = lambda^2/2 G'DHDG:
drift and noise per sample are batch-invariant and only the curvature term grows with B. Hence
the critical batch B* = (a - c) / (2d) = eps~/lambda - B~_noise/2 (per-sample progress halves and
per-step progress peaks there; it is ~ 1/lr0), zero progress at 2 B*, and samples to a fixed
progress grow as 1 / (1 - B / (2 B*)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlvr_schedule.theory import mccandlish
from rlvr_schedule.theory._forms import as_operator, as_vector, diagonal, quad, sandwich, trace_product
from rlvr_schedule.theory.mccandlish import (
    b_noise,
    b_simple,
    eps_max,
    eps_opt,
    gradient_noise_from_two_batches,
    progress_opt,
    sgd_expected_decrease,
    steps_for_samples,
)
from rlvr_schedule.theory.scaling import _positive, rule_exponent

__all__ = [
    "LocalQuadratic",
    "b_noise",
    "b_simple",
    "eps_max",
    "eps_opt",
    "gradient_noise_from_two_batches",
    "progress_opt",
    "sgd_expected_decrease",
    "steps_for_samples",
]


@dataclass(frozen=True, eq=False)
class LocalQuadratic:
    """G, H, Sigma at the current parameters, and Adam's diagonal preconditioner D.

    ``hessian`` and ``noise_cov`` are symmetric (d, d) matrices or (d,) diagonals (spectra in a
    shared eigenbasis); ``preconditioner`` is D's diagonal, by default 1 / sqrt(diag Sigma) (what
    Adam converges to when noise dominates).
    """

    gradient: np.ndarray
    hessian: np.ndarray
    noise_cov: np.ndarray
    preconditioner: np.ndarray | None = None

    def __post_init__(self) -> None:
        g = as_vector("gradient", self.gradient)
        h = as_operator("hessian", self.hessian, g.size)
        s = as_operator("noise_cov", self.noise_cov, g.size)
        if np.any(diagonal(s) < 0):
            raise ValueError("noise_cov must have a non-negative diagonal")
        if self.preconditioner is None:
            sd = diagonal(s)
            if np.any(sd <= 0):
                raise ValueError("noise_cov needs a positive diagonal for the default preconditioner")
            d = 1.0 / np.sqrt(sd)
        else:
            d = as_vector("preconditioner", self.preconditioner)
            if d.size != g.size or np.any(d <= 0):
                raise ValueError(f"preconditioner must be {g.size} positive numbers")
        for name, v in (("gradient", g), ("hessian", h), ("noise_cov", s), ("preconditioner", d)):
            object.__setattr__(self, name, v)
        if quad(sandwich(d, h), g) <= 0:
            raise ValueError("G'DHDG must be > 0 (the gradient must see positive curvature)")

    @classmethod
    def from_spectra(cls, gradient, hessian_eigs, noise_var, preconditioner=None) -> LocalQuadratic:
        """Diagonal model: H and Sigma share an eigenbasis with the given spectra."""
        return cls(gradient, np.asarray(hessian_eigs, float), np.asarray(noise_var, float), preconditioner)

    @property
    def dim(self) -> int:
        return int(self.gradient.size)

    # -- preconditioned McCandlish quantities ---------------------------------------------
    @property
    def _dhd(self) -> np.ndarray:
        d = self.preconditioner
        assert d is not None  # __post_init__ sets the default
        return sandwich(d, self.hessian)

    @property
    def drift(self) -> float:
        """G'DG: first-order decrease per unit step."""
        return float(self.gradient @ (self.preconditioner * self.gradient))

    @property
    def curvature(self) -> float:
        """G'DHDG: curvature along the preconditioned gradient."""
        return quad(self._dhd, self.gradient)

    @property
    def noise_curvature(self) -> float:
        """tr(DHD Sigma): curvature seen by the per-sample noise."""
        return trace_product(self._dhd, self.noise_cov)

    @property
    def eps_tilde(self) -> float:
        """eps~ = G'DG / G'DHDG (eps_max in preconditioned coordinates)."""
        return self.drift / self.curvature

    @property
    def b_noise_tilde(self) -> float:
        """B~_noise = tr(DHD Sigma) / G'DHDG (B_noise in preconditioned coordinates)."""
        return self.noise_curvature / self.curvature

    # -- Adam under an LR rule -------------------------------------------------------------
    def coefficients(self, lr0: float, base_batch: float) -> tuple[float, float, float]:
        """(a, c, d) of the sqrt-rule line p(B) = a - c - d B."""
        lam = _positive("lr0", lr0) / np.sqrt(_positive("base_batch", base_batch))
        return lam * self.drift, 0.5 * lam**2 * self.noise_curvature, 0.5 * lam**2 * self.curvature

    def progress_per_step(
        self, batch, lr0: float, base_batch: float, rule: str = "sqrt", second_moment: str = "noise"
    ):
        """Expected loss decrease of one Adam update at ``batch`` (array-valued for an array of batches).

        ``second_moment="noise"`` is the model above (preconditioner sqrt(B) D). ``"expected"``
        keeps the G^2 term, v_i = G_i^2 + Sigma_ii / B: drift per sample then also falls, by
        1 / sqrt(1 + B / B_i) per coordinate with B_i = Sigma_ii / G_i^2 (the refined second moment).
        """
        b = _batches(batch)
        lr = _positive("lr0", lr0) * (b / _positive("base_batch", base_batch)) ** rule_exponent(rule)
        if second_moment == "noise":
            eta = lr * np.sqrt(b)
            out = eta * self.drift - 0.5 * eta**2 * (self.curvature + self.noise_curvature / b)
        elif second_moment == "expected":
            g, sig2 = self.gradient, diagonal(self.noise_cov)
            out = np.empty(b.shape)
            for idx, (bb, ll) in enumerate(zip(b.ravel(), np.broadcast_to(lr, b.shape).ravel(), strict=True)):
                pre = 1.0 / np.sqrt(g**2 + sig2 / bb)
                php = sandwich(pre, self.hessian)
                out.flat[idx] = ll * float(g @ (pre * g)) - 0.5 * ll**2 * (
                    quad(php, g) + trace_product(php, self.noise_cov) / bb
                )
        else:
            raise ValueError(f"second_moment must be 'noise' or 'expected', got {second_moment!r}")
        return float(out) if out.ndim == 0 else out

    def progress_per_sample(
        self, batch, lr0: float, base_batch: float, rule: str = "sqrt", second_moment: str = "noise"
    ):
        """Expected loss decrease per rollout: progress_per_step / B."""
        return self.progress_per_step(batch, lr0, base_batch, rule, second_moment) / _batches(batch)

    def critical_batch(self, lr0: float, base_batch: float) -> float:
        """B* = (a - c) / (2d) on the sqrt rule; <= 0 means no batch makes progress at this LR."""
        a, c, d = self.coefficients(lr0, base_batch)
        return (a - c) / (2.0 * d)

    def zero_progress_batch(self, lr0: float, base_batch: float) -> float:
        """2 B*: per-sample progress reaches zero (and turns negative beyond)."""
        return 2.0 * self.critical_batch(lr0, base_batch)

    def samples_ratio(self, batch, lr0: float, base_batch: float):
        """Samples to a fixed progress relative to B -> 0: 1 / (1 - B / (2 B*)); inf from 2 B* on."""
        b = _batches(batch)
        frac = 1.0 - b / self.zero_progress_batch(lr0, base_batch)
        with np.errstate(divide="ignore"):
            out = np.where(frac > 0, 1.0 / np.where(frac > 0, frac, 1.0), np.inf)
        return float(out) if out.ndim == 0 else out

    def steps_ratio(self, batch, lr0: float, base_batch: float):
        """Updates to a fixed progress relative to the fewest (at B*): B*^2 / (B (2 B* - B)); inf from 2 B*."""
        b = _batches(batch)
        bs = self.critical_batch(lr0, base_batch)
        den = b * (2.0 * bs - b)
        out = np.where(den > 0, bs**2 / np.where(den > 0, den, 1.0), np.inf)
        return float(out) if out.ndim == 0 else out

    def lr_for_critical_batch(self, critical_batch: float, base_batch: float) -> float:
        """The base LR (at ``base_batch``) whose sqrt-rule critical batch is ``critical_batch``."""
        bs = _positive("critical_batch", critical_batch)
        lam = self.eps_tilde / (bs + 0.5 * self.b_noise_tilde)
        return float(lam * np.sqrt(_positive("base_batch", base_batch)))

    # -- SGD counterpart (McCandlish) -----------------------------------------------------
    @property
    def b_noise(self) -> float:
        return mccandlish.b_noise(self.gradient, self.hessian, self.noise_cov)

    @property
    def b_simple(self) -> float:
        return mccandlish.b_simple(self.gradient, self.noise_cov)

    @property
    def eps_max(self) -> float:
        return mccandlish.eps_max(self.gradient, self.hessian)

    def sgd_progress_per_step(self, batch, lr):
        """Expected loss decrease of one SGD step of size ``lr`` at ``batch``."""
        return mccandlish.sgd_expected_decrease(
            lr, _batches(batch), self.gradient, self.hessian, self.noise_cov
        )


def _batches(batch) -> np.ndarray:
    b = np.asarray(batch, dtype=float)
    if not np.all(np.isfinite(b)) or np.any(b <= 0):
        raise ValueError(f"batch must be finite and > 0, got {batch!r}")
    return b
