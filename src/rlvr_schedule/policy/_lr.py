"""LR for a batch under a scaling rule.

Delegates to :func:`rlvr_schedule.theory.scaling.lr_for_batch` when it is available; the local
fallback implements the same three rules (THEORY.md section 2) so the policy works on its own.
"""

from __future__ import annotations

import math

RULES = ("sqrt", "linear", "constant")


def lr_for_batch(batch: float, base_batch: float, base_lr: float, rule: str = "sqrt") -> float:
    """``base_lr`` scaled from ``base_batch`` to ``batch``: sqrt (Adam), linear (SGD) or constant."""
    try:
        from rlvr_schedule.theory.scaling import lr_for_batch as theory_lr
    except ImportError:
        theory_lr = None
    if theory_lr is not None:
        return float(theory_lr(batch, base_batch, base_lr, rule=rule))
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    if batch <= 0 or base_batch <= 0:
        raise ValueError("batch and base_batch must be positive")
    kappa = batch / base_batch
    if rule == "sqrt":
        return base_lr * math.sqrt(kappa)
    if rule == "linear":
        return base_lr * kappa
    return float(base_lr)
