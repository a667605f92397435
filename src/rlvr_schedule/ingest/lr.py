"""A run's learning rate: the one it trains at after warm-up, not its first record's.

Real runs warm the LR up (verl ``lr_warmup_steps``, TRL ``warmup_ratio``/``warmup_steps``): their
first logged LR is a small fraction of the LR they train at, and the square-root rule scaled from it
gives LRs tens of times too small. :func:`training_lr` takes the run's highest logged LR (where the
warm-up ends: the first record within ``tol`` of it) and says whether the LR decays afterwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlvr_schedule.records import Run

__all__ = ["LrInfo", "training_lr"]


@dataclass(frozen=True)
class LrInfo:
    """``lr``: the LR after warm-up (NaN when the run logs none); ``warmup_samples``: rollouts until
    the warm-up ended (0 without one); ``decays``: the LR falls below ``1 - tol`` of ``lr`` later;
    ``final_lr``: the last logged LR; ``first_lr``: the first."""

    lr: float
    first_lr: float
    final_lr: float
    warmup_samples: int
    decays: bool

    @property
    def warms_up(self) -> bool:
        return self.warmup_samples > 0

    def describe(self) -> str:
        """A short note for tables: 'warm-up 2,048 rollouts; decays to 1e-07'."""
        parts = []
        if self.warms_up:
            parts.append(f"warm-up {self.warmup_samples:,} rollouts")
        if self.decays:
            parts.append(f"decays to {self.final_lr:.3g}")
        return "; ".join(parts) or "constant"

    def to_dict(self) -> dict[str, Any]:
        return {
            "lr": self.lr if math.isfinite(self.lr) else None,
            "first_lr": self.first_lr if math.isfinite(self.first_lr) else None,
            "final_lr": self.final_lr if math.isfinite(self.final_lr) else None,
            "warmup_samples": self.warmup_samples,
            "decays": self.decays,
        }


def training_lr(run: Run, *, tol: float = 0.02) -> LrInfo:
    """The LR ``run`` trains at after its warm-up (see the module docstring)."""
    lr = run.array("lr")
    samples = run.array("samples")
    ok = np.isfinite(lr) & (lr > 0)
    if not ok.any():
        nan = math.nan
        return LrInfo(nan, nan, nan, 0, False)
    idx = np.flatnonzero(ok)
    vals = lr[idx]
    peak = float(vals.max())
    reach = int(idx[np.argmax(vals >= (1 - tol) * peak)])
    first_i = int(idx[0])
    warm = lr[first_i] < (1 - tol) * peak
    # warm-up ends where the LR first reaches the peak; rollouts consumed before that update
    warmup_samples = int(samples[reach] - run.records[reach].batch) if warm else 0
    after = lr[reach:][np.isfinite(lr[reach:])]
    decays = bool(after.size and after.min() < (1 - max(tol, 0.1)) * peak)
    return LrInfo(
        lr=peak,
        first_lr=float(lr[first_i]),
        final_lr=float(vals[-1]),
        warmup_samples=max(warmup_samples, 0),
        decays=decays,
    )
