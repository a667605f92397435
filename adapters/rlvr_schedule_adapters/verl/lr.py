"""A new peak LR for an optimizer driven by a multiplicative scheduler (verl's LambdaLR).

verl's FSDP engine builds a ``LambdaLR`` (constant or cosine, with warm-up) whose LR is
``base_lrs[i] x lambda(step)``. Writing ``param_groups[i]["lr"]`` alone is undone by the next
``scheduler.step()``; writing ``base_lrs`` alone takes effect one step late. :func:`rescale_lr`
changes both (and ``initial_lr``, what a resumed scheduler starts from, and the scheduler's
last-LR value that verl logs as ``actor/lr``), keeping the warm-up/decay factor in effect and
the ratio between param groups. Duck-typed: torch is not imported.
"""

from __future__ import annotations

from typing import Any

__all__ = ["rescale_lr"]


def rescale_lr(optimizer: Any, lr_scheduler: Any, lr: float) -> list[float]:
    """Make ``lr`` the peak LR of group 0 (other groups keep their ratio to it); returns the
    LR of each param group now in effect (``lr`` times the scheduler's current factor)."""
    lr = float(lr)
    if not lr >= 0.0:
        raise ValueError(f"lr must be a non-negative number, got {lr!r}")
    groups = optimizer.param_groups
    bases = getattr(lr_scheduler, "base_lrs", None) if lr_scheduler is not None else None
    if lr_scheduler is not None and bases is None:
        raise TypeError(f"{type(lr_scheduler).__name__} has no base_lrs (only torch LR schedulers such as "
                        "LambdaLR are supported; Megatron's OptimizerParamScheduler is not)")
    if bases is None:  # no scheduler: the group LRs are the peak LRs
        bases = [g["lr"] for g in groups]
    if len(bases) != len(groups):
        raise ValueError(f"scheduler has {len(bases)} base LRs for {len(groups)} param groups")
    ref = float(bases[0])
    new_bases = [lr * float(b) / ref if ref > 0 else lr for b in bases]
    applied: list[float] = []
    for g, old_base, new_base in zip(groups, bases, new_bases):
        factor = float(g["lr"]) / float(old_base) if float(old_base) > 0 else 1.0
        g["lr"] = new_base * factor
        if "initial_lr" in g or lr_scheduler is not None:
            g["initial_lr"] = new_base
        applied.append(g["lr"])
    if lr_scheduler is not None:
        lr_scheduler.base_lrs = list(new_bases)
        if hasattr(lr_scheduler, "_last_lr"):
            lr_scheduler._last_lr = list(applied)
    return applied
