"""Reward ceiling from the entropy-reward trade-off (Cui et al. 2025, arXiv:2505.22617).

Along a run, reward and policy entropy follow R = -a exp(H) + b: spending entropy buys reward
until H = 0, where the reward can rise no further, R = b - a. Linear least squares in x = exp(H).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rlvr_schedule.clocks._stats import ols, t_quantile

__all__ = ["RewardCeilingFit"]


class RewardCeilingFit:
    """``fit(entropy, reward)`` -> ``a_``, ``b_``, ``ceiling_`` (= b - a, the reward at H = 0),
    ``ceiling_interval_`` (``level`` t-interval), ``r2_`` (fit quality)."""

    def __init__(self, level: float = 0.95) -> None:
        self.level = level

    def fit(
        self, entropy: Sequence[float] | np.ndarray, reward: Sequence[float] | np.ndarray
    ) -> RewardCeilingFit:
        h = np.asarray(entropy, float)
        r = np.asarray(reward, float)
        if h.shape != r.shape:
            raise ValueError(f"entropy and reward differ in length: {h.shape} vs {r.shape}")
        ok = np.isfinite(h) & np.isfinite(r)
        if ok.sum() < 3:
            raise ValueError(f"need at least 3 finite (entropy, reward) pairs, got {int(ok.sum())}")
        x, y = np.exp(h[ok]), r[ok]
        res = ols(x, y)
        if not math.isfinite(res.slope):
            raise ValueError("entropy does not vary: the ceiling is not identifiable")
        self.a_ = -res.slope
        self.b_ = res.intercept
        self.ceiling_ = self.b_ - self.a_
        # prediction at x = 1 (H = 0): se of intercept + slope * 1
        n = res.n
        se = res.resid_sd * math.sqrt(1.0 / n + (1.0 - res.x_mean) ** 2 / res.sxx) if n > 2 else math.nan
        hw = t_quantile(0.5 + self.level / 2, n - 2) * se if n > 2 else math.nan
        self.ceiling_interval_ = (self.ceiling_ - hw, self.ceiling_ + hw)
        ss = float(((y - y.mean()) ** 2).sum())
        self.r2_ = 1.0 - float(((y - res.intercept - res.slope * x) ** 2).sum()) / ss if ss > 0 else math.nan
        return self

    def predict(self, entropy: float | np.ndarray) -> float | np.ndarray:
        return -self.a_ * np.exp(entropy) + self.b_
