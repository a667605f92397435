"""Learning-rate scaling rules: how the LR moves when the rollout batch does.

Adam keeps its per-sample drift when the LR grows with the square root of the batch
(Malladi et al. 2022, arXiv:2205.10287); SGD's counterpart is the linear rule. The
schedulers switch batch mid-run, so every switch goes through :func:`lr_for_batch`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["RULES", "AdamHparams", "adam_hparams_for_batch", "lr_for_batch", "rule_exponent"]

#: Names accepted by ``rule``: exponent of kappa = batch / base_batch in lr x kappa**p.
RULES: dict[str, float] = {"sqrt": 0.5, "linear": 1.0, "constant": 0.0}


def _positive(name: str, value: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return v


def rule_exponent(rule: str) -> float:
    """e in LR ~ batch^e for an LR rule (:data:`RULES`: sqrt 1/2, linear 1, constant 0)."""
    try:
        return RULES[rule]
    except (KeyError, TypeError):
        raise ValueError(f"rule must be one of {sorted(RULES)}, got {rule!r}") from None


def lr_for_batch(batch: float, base_batch: float, base_lr: float, rule: str = "sqrt") -> float:
    """LR for ``batch`` rollouts per update when ``base_lr`` was tuned at ``base_batch``.

    ``sqrt``: lr x sqrt(kappa) (Adam); ``linear``: lr x kappa (SGD); ``constant``: unchanged.
    """
    b = _positive("batch", batch)
    b0 = _positive("base_batch", base_batch)
    lr0 = _positive("base_lr", base_lr)
    return lr0 * (b / b0) ** rule_exponent(rule)


@dataclass(frozen=True, slots=True)
class AdamHparams:
    """Adam hyperparameters for one batch size (what to put into the optimizer's param groups)."""

    lr: float
    beta1: float
    beta2: float
    eps: float


def _beta(name: str, value: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if not 0.0 <= v < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    return v


def adam_hparams_for_batch(
    batch: float,
    base_batch: float,
    base_lr: float,
    *,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    rule: str = "sqrt",
    scale_betas: bool = True,
) -> AdamHparams:
    """Malladi's square-root scaling of all Adam hyperparameters for batch x kappa.

    lr follows ``rule``; with ``scale_betas`` 1 - beta is multiplied by kappa (the EMAs then
    average over the same number of *samples*) and eps divided by sqrt(kappa) (eps keeps its
    size relative to sqrt(v), which shrinks as sigma / sqrt(B)). A beta whose (1 - beta) x kappa
    exceeds 1 is clipped to 0 (no averaging left to shorten).
    """
    lr = lr_for_batch(batch, base_batch, base_lr, rule)
    b1, b2 = _beta("beta1", beta1), _beta("beta2", beta2)
    e = float(eps)
    if not math.isfinite(e) or e < 0:
        raise ValueError(f"eps must be finite and >= 0, got {eps!r}")
    if not scale_betas:
        return AdamHparams(lr, b1, b2, e)
    kappa = float(batch) / float(base_batch)
    return AdamHparams(
        lr=lr,
        beta1=max(0.0, 1.0 - (1.0 - b1) * kappa),
        beta2=max(0.0, 1.0 - (1.0 - b2) * kappa),
        eps=e / math.sqrt(kappa),
    )
