"""O(1)-per-record signals the scheduler needs on every update.

``TrendForecast`` extrapolates an exponentially weighted linear trend of a failure signal
against samples to its collapse threshold (samples-to-failure); ``NoiseScale`` is the
two-batch gradient-noise estimate (THEORY.md section 1, separate EMAs of numerator and
denominator). Both keep a handful of floats, so a 10^6-step run costs no memory, and their
state is a flat JSON-able dict.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from rlvr_schedule.records import StepRecord

__all__ = ["TrendForecast", "NoiseScale", "FALLING_SIGNALS", "RISING_SIGNALS"]

#: Signals that fall towards collapse; the others rise towards it.
FALLING_SIGNALS = frozenset({"entropy", "reward_mean", "reward_std"})
RISING_SIGNALS = frozenset({"kl", "grad_norm", "clip_frac", "frac_zero_std", "response_length"})

_INF = math.inf


class TrendForecast:
    """Samples until ``signal`` crosses its collapse threshold, from a weighted linear trend.

    The threshold is ``threshold`` if given, else ``fraction`` x (falling signals) or
    ``1/fraction`` x (rising signals) the mean of the first ``baseline`` finite values.
    ``reset_trend()`` forgets the slope (not the baseline): after a batch switch the slope per
    sample may change.
    """

    _STATE = ("n", "base_n", "base_sum", "w", "mx", "my", "cxx", "cxy", "last_x")

    def __init__(self, signal: str = "entropy", *, threshold: float | None = None, fraction: float = 0.5,
                 half_life: float = 20.0, baseline: int = 5, min_records: int = 5) -> None:
        self.signal = signal
        self.falling = signal in FALLING_SIGNALS
        self.threshold_cfg = threshold
        self.fraction = fraction
        self.beta = 0.5 ** (1.0 / half_life)
        self.baseline = baseline
        self.min_records = min_records
        self.n = 0
        self.base_n = 0
        self.base_sum = 0.0
        self.w = self.mx = self.my = self.cxx = self.cxy = 0.0
        self.last_x = 0.0
        self.stf = _INF

    @property
    def threshold(self) -> float:
        if self.threshold_cfg is not None:
            return self.threshold_cfg
        if self.base_n == 0:
            return math.nan
        base = self.base_sum / self.base_n
        return base * self.fraction if self.falling else base / self.fraction

    @property
    def samples_to_failure(self) -> float:
        """Forecast rollouts left before the threshold is crossed (inf: no failure in sight)."""
        return self.stf

    def reset_trend(self) -> None:
        self.n = 0
        self.w = self.mx = self.my = self.cxx = self.cxy = 0.0
        self.stf = _INF

    def update(self, record: StepRecord) -> float:
        y = getattr(record, self.signal, None)
        if y is None:
            y = record.extra.get(self.signal, math.nan)
        if y != y:  # NaN: not logged this step
            return self.stf
        x = float(record.samples)
        self.last_x = x
        if self.base_n < self.baseline:
            self.base_n += 1
            self.base_sum += y
        beta = self.beta
        self.w = w = beta * self.w + 1.0
        a = 1.0 / w
        dx = x - self.mx
        self.mx += a * dx
        self.my += a * (y - self.my)
        self.cxx = beta * self.cxx + dx * (x - self.mx)
        self.cxy = beta * self.cxy + dx * (y - self.my)
        self.n += 1
        self.stf = self._forecast(x)
        return self.stf

    def _forecast(self, x: float) -> float:
        thr = self.threshold
        if thr != thr:
            return _INF
        if self.n < self.min_records or self.cxx <= 0.0:
            return _INF
        slope = self.cxy / self.cxx
        level = self.my + slope * (x - self.mx)
        if (level <= thr) if self.falling else (level >= thr):
            return 0.0
        if (slope >= 0.0) if self.falling else (slope <= 0.0):
            return _INF
        return (thr - level) / slope

    def state_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self._STATE}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for k in self._STATE:
            setattr(self, k, int(state[k]) if k in ("n", "base_n") else float(state[k]))
        self.stf = self._forecast(self.last_x)


class NoiseScale:
    """Two-batch B_simple = tr(Sigma)/|G|^2 from the full-batch and one micro-batch grad norm."""

    _STATE = ("g2", "tr")

    def __init__(self, beta: float = 0.95) -> None:
        self.beta = beta
        self.g2 = self.tr = 0.0

    @property
    def b_simple(self) -> float:
        """NaN until the smoothed |G|^2 is positive."""
        return self.tr / self.g2 if self.g2 > 0.0 and self.tr > 0.0 else math.nan

    def update(self, record: StepRecord) -> float:
        bs, bb = record.micro_batch, record.batch
        gs, gb = record.grad_norm_micro, record.grad_norm
        if bs is None or not bs < bb or gs != gs or gb != gb:
            return self.b_simple
        gs2, gb2 = gs * gs, gb * gb
        g2 = (bb * gb2 - bs * gs2) / (bb - bs)
        tr = (gs2 - gb2) / (1.0 / bs - 1.0 / bb)
        b = self.beta
        self.g2 = b * self.g2 + (1 - b) * g2
        self.tr = b * self.tr + (1 - b) * tr
        return self.b_simple

    def state_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self._STATE}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for k in self._STATE:
            setattr(self, k, float(state[k]))
