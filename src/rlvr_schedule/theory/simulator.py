"""A vectorised noisy-quadratic simulator: many independent Adam or SGD trials at once.

The loss around the current parameters is L(theta) = G'theta + theta'H theta / 2 (theta = 0 now);
a mini-batch of B per-sample gradients at theta is G + H theta + n with n ~ N(0, Sigma / B), drawn
exactly (the mean of B Gaussian per-sample gradients is Gaussian). One-step estimates use
antithetic pairs (n, -n), which cancel the first-order noise term and keep a modest number of
trials within about a percent of the expectation. Zhang et al. 2019 (arXiv:1907.04164) use the
same model to study batch size.

Adam's second moment for a one-step estimate is one of
``"noise"`` (v = diag(Sigma) / B, the noise-dominated limit the local model assumes),
``"expected"`` (v = G^2 + diag(Sigma) / B, exact E[g^2]; shows where that limit breaks) or
``"ema"`` (v an EMA over ``warmup`` sampled gradients at this batch, with Adam's bias correction
and the current gradient included: what Adam actually carries).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlvr_schedule.theory._forms import apply, as_operator, as_vector, diagonal
from rlvr_schedule.theory.quadratic import LocalQuadratic
from rlvr_schedule.theory.scaling import _positive, lr_for_batch

__all__ = ["NoisyQuadratic", "StepEstimate"]

_MODES = ("noise", "expected", "ema")
_OPTIMIZERS = ("adam", "sgd")


@dataclass(frozen=True)
class StepEstimate:
    """Monte Carlo loss decrease of one update at ``batch`` (mean and standard error)."""

    batch: int
    per_step: float
    per_step_se: float
    trials: int

    @property
    def per_sample(self) -> float:
        return self.per_step / self.batch

    @property
    def per_sample_se(self) -> float:
        return self.per_step_se / self.batch


class NoisyQuadratic:
    """Gradient G, Hessian H, per-sample noise covariance Sigma (full (d, d) or diagonal (d,))."""

    def __init__(self, gradient, hessian, noise_cov) -> None:
        self.gradient = as_vector("gradient", gradient)
        d = self.gradient.size
        self.hessian = as_operator("hessian", hessian, d)
        self.noise_cov = as_operator("noise_cov", noise_cov, d)
        if self.noise_cov.ndim == 1:
            if np.any(self.noise_cov < 0):
                raise ValueError("noise_cov must be non-negative")
            self._noise_factor = np.sqrt(self.noise_cov)
        else:
            w, v = np.linalg.eigh(self.noise_cov)
            if w.min() < -1e-10 * max(1.0, w.max()):
                raise ValueError("noise_cov must be positive semi-definite")
            self._noise_factor = v * np.sqrt(np.clip(w, 0, None))  # Sigma = F F'

    @classmethod
    def from_local(cls, model: LocalQuadratic) -> NoisyQuadratic:
        return cls(model.gradient, model.hessian, model.noise_cov)

    @property
    def dim(self) -> int:
        return int(self.gradient.size)

    # -- pieces ---------------------------------------------------------------------------
    def noise(self, rng: np.random.Generator, n: int, batch: float) -> np.ndarray:
        """n draws of the mini-batch gradient noise, N(0, Sigma / batch), as rows."""
        z = rng.standard_normal((n, self.dim))
        f = self._noise_factor
        return (z * f if f.ndim == 1 else z @ f.T) / np.sqrt(batch)

    def loss(self, theta: np.ndarray) -> np.ndarray:
        """L(theta) - L(0) for rows of theta."""
        return theta @ self.gradient + 0.5 * np.einsum("...i,...i->...", theta, apply(self.hessian, theta))

    def _lr(self, batch: float, lr0: float, base_batch: float, rule: str) -> float:
        return lr_for_batch(batch, base_batch, lr0, rule)

    # -- one step -------------------------------------------------------------------------
    def one_step(
        self,
        batch: int,
        *,
        lr0: float,
        base_batch: float,
        rule: str = "sqrt",
        optimizer: str = "adam",
        trials: int = 2000,
        seed: int | np.random.Generator | None = 0,
        second_moment: str = "noise",
        beta2: float = 0.999,
        eps: float = 0.0,
        warmup: int | None = None,
    ) -> StepEstimate:
        """Expected loss decrease of one update at ``batch`` (Adam with beta1 = 0, or SGD).

        ``trials`` is rounded up to an even number (antithetic pairs); the standard error is over pairs.
        """
        if optimizer not in _OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {_OPTIMIZERS}, got {optimizer!r}")
        if second_moment not in _MODES:
            raise ValueError(f"second_moment must be one of {_MODES}, got {second_moment!r}")
        b = _positive("batch", batch)
        pairs = max(2, (int(trials) + 1) // 2)
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        lr = self._lr(b, lr0, base_batch, rule)
        n = self.noise(rng, pairs, b)
        g = self.gradient
        grads = np.concatenate([g + n, g - n])  # rows: pair i and its antithetic twin i + pairs
        if optimizer == "sgd":
            delta = -lr * grads
        else:
            v = self._second_moment(grads, b, rng, second_moment, beta2, warmup)
            delta = -lr * grads / (np.sqrt(v) + eps)
        dec = -self.loss(delta)
        pair_mean = 0.5 * (dec[:pairs] + dec[pairs:])
        se = float(pair_mean.std(ddof=1) / np.sqrt(pairs))
        return StepEstimate(round(b), float(pair_mean.mean()), se, 2 * pairs)

    def _second_moment(
        self,
        grads: np.ndarray,
        b: float,
        rng: np.random.Generator,
        mode: str,
        beta2: float,
        warmup: int | None,
    ) -> np.ndarray:
        sigma2 = diagonal(self.noise_cov)
        if mode == "noise":
            return np.broadcast_to(sigma2 / b, grads.shape)
        if mode == "expected":
            return np.broadcast_to(self.gradient**2 + sigma2 / b, grads.shape)
        if not 0.0 < beta2 < 1.0:
            raise ValueError(f"beta2 must be in (0, 1), got {beta2!r}")
        steps = int(warmup) if warmup is not None else int(np.ceil(3.0 / (1.0 - beta2)))
        pairs = grads.shape[0] // 2
        v = np.zeros((pairs, self.dim))
        for _ in range(steps):  # each pair shares one history: the antithetic twins differ only now
            past = self.gradient + self.noise(rng, pairs, b)
            v = beta2 * v + (1.0 - beta2) * past**2
        v = np.concatenate([v, v])
        v = beta2 * v + (1.0 - beta2) * grads**2
        return v / (1.0 - beta2 ** (steps + 1))

    def sweep(self, batches, **kwargs) -> list[StepEstimate]:
        """:meth:`one_step` at each batch, seeded independently from ``seed``."""
        seed = kwargs.pop("seed", 0)
        batches = list(batches)  # an iterator would be used up by the count
        seqs = np.random.SeedSequence(seed).spawn(len(batches))
        return [
            self.one_step(b, seed=np.random.default_rng(s), **kwargs)
            for b, s in zip(batches, seqs, strict=True)
        ]

    # -- trajectories ---------------------------------------------------------------------
    def simulate(
        self,
        batch: int,
        steps: int,
        *,
        lr0: float,
        base_batch: float,
        rule: str = "sqrt",
        optimizer: str = "adam",
        trials: int = 256,
        beta1: float = 0.0,
        beta2: float = 0.999,
        eps: float = 1e-12,
        seed: int | None = 0,
    ) -> np.ndarray:
        """Mean loss change over ``steps`` updates from theta = 0 (shape (steps + 1,), starts at 0).

        Adam uses bias-corrected moments; ``beta1`` > 0 adds momentum. The gradient moves with
        theta (G + H theta), so this leaves the one-step regime: use it for trajectories.
        """
        if optimizer not in _OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {_OPTIMIZERS}, got {optimizer!r}")
        b = _positive("batch", batch)
        rng = np.random.default_rng(seed)
        lr = self._lr(b, lr0, base_batch, rule)
        theta = np.zeros((int(trials), self.dim))
        m = np.zeros_like(theta)
        v = np.zeros_like(theta)
        out = np.zeros(int(steps) + 1)
        for t in range(1, int(steps) + 1):
            grad = self.gradient + apply(self.hessian, theta) + self.noise(rng, int(trials), b)
            if optimizer == "sgd":
                theta -= lr * grad
            else:
                m = beta1 * m + (1.0 - beta1) * grad
                v = beta2 * v + (1.0 - beta2) * grad**2
                m_hat = m / (1.0 - beta1**t) if beta1 > 0 else m
                theta -= lr * m_hat / (np.sqrt(v / (1.0 - beta2**t)) + eps)
            out[t] = float(self.loss(theta).mean())
        return out
