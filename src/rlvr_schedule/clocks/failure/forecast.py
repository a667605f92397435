"""The online failure forecast: samples left until a signal's trend reaches its threshold."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import Any

from rlvr_schedule.clocks._stats import SlidingOLS, finite, t_quantile
from rlvr_schedule.records import StepRecord

__all__ = ["AnyForecast", "FailureForecast", "policy_forecast"]

_DIRECTION = {
    "entropy": "down",
    "reward_mean": "down",
    "kl": "up",
    "grad_norm": "up",
    "frac_zero_std": "up",
    "clip_frac": "up",
    "response_clip_ratio": "up",
}

#: Where a signal that is no record field is looked for in ``record.extra`` (first finite wins):
#: the share of responses cut at the length cap, as the trainers log it.
_EXTRA = {"response_clip_ratio": ("response_clip_ratio", "truncated_frac", "completions/clipped_ratio")}


def _value(record: StepRecord, signal: str) -> float:
    v = getattr(record, signal, None)
    if v is not None:
        return float(v)
    for k in _EXTRA.get(signal, (signal,)):
        x = record.extra.get(k)
        if x is not None and finite(x):
            return float(x)
    return math.nan


class FailureForecast:
    """Online forecast of rollouts left until a failure signal's trend reaches its threshold.

    A regression of the signal (``model="linear"``) or its log (``"loglinear"``, exponential
    decay/growth) on cumulative samples over the last ``window`` records is extrapolated to the
    threshold: ``threshold`` if given, else ``fraction`` x the early level (median of the first
    ``warmup`` records; the default 0.1 matches :class:`EntropyCollapse`). ``interval`` takes the
    slope's ``level`` confidence band through the window's mean point; its upper end is inf when
    the band includes no trend. ``samples_to_failure`` is inf while the trend points away from the
    threshold and 0 once the smoothed signal has crossed it.

    Everything a switch may rest on counts rollouts: ``warmup_samples`` (the early level's span),
    ``recent`` (the window keeps the later ``recent`` part of the rollouts since the (re)start, so an
    early fast transient, e.g. under an LR warm-up, leaves it as the stage goes on) and
    ``min_samples`` (the evidence :attr:`ready` asks for: a forecast extrapolated from a few hundred
    noisy rollouts once predicted a collapse 20x too early). :attr:`ready` also asks for a
    confidence condition: the slope's ``level`` band excludes a flat trend or one heading away from
    the threshold (or the smoothed signal has crossed it).
    """

    def __init__(
        self,
        signal: str = "entropy",
        *,
        threshold: float | None = None,
        fraction: float = 0.1,
        direction: str | None = None,
        window: int = 200,
        min_points: int = 20,
        warmup: int = 10,
        model: str = "linear",
        level: float = 0.9,
        warmup_samples: int | None = None,
        min_samples: int = 0,
        recent: float = 1.0,
        switch_fraction: float = 0.25,
    ) -> None:
        if model not in ("linear", "loglinear"):
            raise ValueError(f"model must be 'linear' or 'loglinear', got {model!r}")
        direction = direction or _DIRECTION.get(signal)
        if direction not in ("up", "down"):
            raise ValueError(f"direction must be 'up' or 'down' for signal {signal!r}")
        if threshold is None and not fraction > 0:
            raise ValueError(f"fraction must be > 0, got {fraction}")
        if not 3 <= min_points <= window:
            raise ValueError(f"min_points must be in [3, window], got {min_points}")
        self.signal, self.fixed_threshold, self.fraction = signal, threshold, fraction
        self.direction, self.window, self.min_points = direction, int(window), int(min_points)
        self.warmup, self.model, self.level = max(1, int(warmup)), model, float(level)
        self.warmup_samples = None if warmup_samples is None else int(warmup_samples)
        if not 0 < recent <= 1:
            raise ValueError(f"recent must be in (0, 1], got {recent}")
        if min_samples < 0:
            raise ValueError(f"min_samples must be >= 0, got {min_samples}")
        self.min_samples, self.recent = int(min_samples), float(recent)
        if not 0 < switch_fraction <= 1:
            raise ValueError(f"switch_fraction must be in (0, 1], got {switch_fraction}")
        self.switch_fraction = float(switch_fraction)
        self.start_samples = 0  # rollouts at the last (re)start
        self._ols = SlidingOLS(self.window)
        self._early: list[float] = []
        self.reference = math.nan
        self.samples = 0
        self.start_level = math.nan  # the fitted level at the last restart (NaN: the early level)
        self.restarts = 0
        self._cache: tuple[tuple[float, float, float, float] | None] | None = None

    @property
    def threshold(self) -> float:
        if self.fixed_threshold is not None:
            return float(self.fixed_threshold)
        return self.fraction * self.reference if finite(self.reference) else math.nan

    def _y(self, v: float) -> float:
        return math.log(max(v, 1e-12)) if self.model == "loglinear" else v

    def update(self, record: StepRecord) -> float:
        """Consume one record; returns the current ``samples_to_failure``."""
        self.samples = int(record.samples)
        v = _value(record, self.signal)
        if finite(v):
            if (
                len(self._early) < self.warmup
                if self.warmup_samples is None
                else not self._early or self.samples <= self.warmup_samples
            ):
                self._early.append(float(v))
                self.reference = float(statistics.median(self._early))  # no numpy call per record
            self._ols.add(float(record.samples), self._y(float(v)))
            if self.recent < 1:
                start = self.start_samples
                self._ols.drop_before(start + (1.0 - self.recent) * (self.samples - start))
            self._cache = None
        return self.samples_to_failure

    def restart(self) -> None:
        """Forget the window (a switch changed the trend) but keep the early level; the level
        fitted now becomes the start of :attr:`remaining_fraction`."""
        lvl = self.fitted_level
        self.start_level = lvl if finite(lvl) else self.start_level
        self._ols.clear()
        self.start_samples = self.samples
        self.restarts += 1
        self._cache = None

    @property
    def fitted_level(self) -> float:
        """The trend's value at the current sample count (signal units; NaN before a fit)."""
        f = self._fit()
        if f is None:
            return math.nan
        slope, _se, xm, ym = f
        y = ym + slope * (self.samples - xm)
        return math.exp(y) if self.model == "loglinear" else y

    @property
    def remaining_fraction(self) -> float:
        """(fitted level - threshold) / (start level - threshold), in the model's space: 1 at the
        (re)start, 0 at the threshold; NaN before a fit."""
        f = self._fit()
        if f is None:
            return math.nan
        thr = self.fixed_threshold if self.fixed_threshold is not None else self.fraction * self.reference
        start = self.start_level if self.start_level == self.start_level else self.reference  # NaN check
        y = f[3] + f[0] * (self.samples - f[2])  # the fitted level, in the model's space
        if not (math.isfinite(thr) and math.isfinite(start) and math.isfinite(y)):
            return math.nan
        yt = self._y(thr)
        span = self._y(start) - yt
        if span == 0:
            return 0.0
        return (y - yt) / span

    @property
    def significant(self) -> bool:
        """The smoothed signal has crossed the threshold, or the slope's ``level`` band lies wholly
        on the side of heading for it (False before a fit)."""
        f = self._fit()
        if f is None:
            return False
        slope, se, xm, ym = f
        if self._crossing(slope, xm, ym) == 0.0:
            return True
        sign = -1.0 if self.direction == "down" else 1.0
        if not finite(se):
            return False
        if se == 0:  # an exact line
            return sign * slope > 0
        return sign * slope / se > t_quantile(0.5 + self.level / 2, len(self._ols) - 2)

    @property
    def ready(self) -> bool:
        """Whether the forecast may trigger: ``min_samples`` rollouts since the (re)start, a fit
        (``min_points`` records in the window) and :attr:`significant`."""
        return self.samples - self.start_samples >= self.min_samples and self.significant

    def warns(self) -> bool:
        """Whether a failure switch may fire on this record: :attr:`ready` (evidence and a
        confident trend) and less than ``switch_fraction`` of the stage's failure clock left
        (:meth:`fraction_left`). The one rule the policy's trigger and the skill replay
        (:mod:`rlvr_schedule.clocks.failure.skill`) share."""
        if self.samples - self.start_samples < self.min_samples:
            return False
        left = self.fraction_left(self.samples_to_failure)
        return left < self.switch_fraction and self.significant  # False on NaN

    @property
    def stage_fraction_left(self) -> float:
        """Rollouts to failure / (rollouts since the (re)start + rollouts to failure): the part of
        this stage's failure clock left, in rollouts (1 with no trend towards failure, 0 once
        crossed; NaN before a fit)."""
        return self.fraction_left(self.samples_to_failure)

    def fraction_left(self, stf: float) -> float:
        """:attr:`stage_fraction_left` for a known ``samples_to_failure`` (no second extrapolation)."""
        if stf != stf:  # NaN
            return math.nan
        if math.isinf(stf):
            return 1.0
        total = self.samples - self.start_samples + stf
        return stf / total if total > 0 else 0.0

    def _crossing(self, slope: float, xm: float, ym: float) -> float:
        thr = self.threshold
        if not finite(thr):
            return math.nan
        yt = self._y(thr)
        sign = -1.0 if self.direction == "down" else 1.0
        if sign * (ym - yt) >= 0:  # the window's mean is already past the threshold
            return 0.0
        if not finite(slope) or sign * slope <= 0:
            return math.inf
        return max(0.0, xm + (yt - ym) / slope - self.samples)

    def _fit(self) -> tuple[float, float, float, float] | None:
        # one fit per record: the forecast, its interval and the remaining fraction share it
        if self._cache is not None:
            return self._cache[0]
        fit = self._fit_now()
        self._cache = (fit,)
        return fit

    def _fit_now(self) -> tuple[float, float, float, float] | None:
        if len(self._ols) < self.min_points:
            return None
        slope, intercept, se, _ = self._ols.fit()
        if not finite(slope):
            return None
        xm, ym = self._ols.mean_point()
        return slope, se, xm, ym

    @property
    def samples_to_failure(self) -> float:
        """Rollouts left until the trend reaches the threshold (NaN until ``min_points`` records)."""
        f = self._fit()
        return math.nan if f is None else self._crossing(f[0], f[2], f[3])

    @property
    def failure_samples(self) -> float:
        """Forecast cumulative samples at failure."""
        return self.samples + self.samples_to_failure

    @property
    def interval(self) -> tuple[float, float]:
        """(low, high) of ``samples_to_failure`` from the slope's confidence band."""
        f = self._fit()
        if f is None or not finite(f[1]):
            return (math.nan, math.nan)
        slope, se, xm, ym = f
        h = t_quantile(0.5 + self.level / 2, len(self._ols) - 2) * se
        ends = sorted((self._crossing(slope - h, xm, ym), self._crossing(slope + h, xm, ym)))
        return (ends[0], ends[1])

    def state_dict(self) -> dict[str, Any]:
        return {
            "signal": self.signal,
            "threshold": self.fixed_threshold,
            "fraction": self.fraction,
            "direction": self.direction,
            "window": self.window,
            "min_points": self.min_points,
            "warmup": self.warmup,
            "model": self.model,
            "level": self.level,
            "ols": self._ols.state_dict(),
            "early": list(self._early),
            "reference": self.reference if finite(self.reference) else None,
            "samples": self.samples,
            "warmup_samples": self.warmup_samples,
            "restarts": self.restarts,
            "start_level": self.start_level if finite(self.start_level) else None,
            "min_samples": self.min_samples,
            "recent": self.recent,
            "start_samples": self.start_samples,
            "switch_fraction": self.switch_fraction,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.signal, self.fixed_threshold = state["signal"], state["threshold"]
        self.fraction, self.direction = float(state["fraction"]), state["direction"]
        self.window, self.min_points = int(state["window"]), int(state["min_points"])
        self.warmup, self.model, self.level = int(state["warmup"]), state["model"], float(state["level"])
        self._ols = SlidingOLS(self.window)
        self._ols.load_state_dict(state["ols"])
        self._cache = None
        self._early = [float(x) for x in state["early"]]
        self.reference = math.nan if state["reference"] is None else float(state["reference"])
        self.samples = int(state["samples"])
        ws = state.get("warmup_samples")
        self.warmup_samples = None if ws is None else int(ws)
        self.restarts = int(state.get("restarts", 0))
        sl = state.get("start_level")
        self.start_level = math.nan if sl is None else float(sl)
        self.min_samples = int(state.get("min_samples", 0))
        self.recent = float(state.get("recent", 1.0))
        self.start_samples = int(state.get("start_samples", 0))
        self.switch_fraction = float(state.get("switch_fraction", 0.25))


def policy_forecast(
    signal: str = "entropy",
    *,
    fraction: float | None = None,
    threshold: float | None = None,
    min_samples: int = 2048,
    switch_fraction: float = 0.25,
    warmup_samples: int = 512,
    window: int = 1000,
) -> FailureForecast:
    """The forecast as the live policy configures it (``PolicyConfig``'s failure knobs): the early
    level over the first ``warmup_samples`` rollouts, the trend fitted on the later half of the
    rollouts since the (re)start (at most ``window`` records), ``min_samples`` rollouts of
    evidence, and :meth:`FailureForecast.warns` at ``switch_fraction``. ``fraction`` defaults to
    0.1 for a falling signal and 10 for a rising one."""
    direction = _DIRECTION.get(signal)
    if fraction is None:
        fraction = 0.1 if direction != "up" else 10.0
    return FailureForecast(
        signal,
        threshold=threshold,
        fraction=fraction,
        window=window,
        min_points=3,
        warmup_samples=warmup_samples,
        min_samples=min_samples,
        recent=0.5,
        switch_fraction=switch_fraction,
    )


class AnyForecast:
    """Several :class:`FailureForecast` s on one record stream (e.g. entropy falling and a
    precursor of a reward crash rising): it warns when any member warns, and its
    ``samples_to_failure`` is the members' earliest. :attr:`reason` names the member that warned
    first on the current record. The same ``update`` / ``warns`` / ``restart`` / ``state_dict``
    interface as one forecast."""

    def __init__(self, members: list[FailureForecast]) -> None:
        if not members:
            raise ValueError("AnyForecast needs at least one member forecast")
        self.members = list(members)

    def update(self, record: StepRecord) -> float:
        return min((m.update(record) for m in self.members), key=lambda x: math.inf if x != x else x)

    @property
    def samples_to_failure(self) -> float:
        vals = [m.samples_to_failure for m in self.members]
        finite_vals = [v for v in vals if v == v]
        return min(finite_vals) if finite_vals else math.nan

    def warns(self) -> bool:
        return any(m.warns() for m in self.members)

    @property
    def reason(self) -> str:
        """The signal of the first member that warns now ("" if none)."""
        return next((m.signal for m in self.members if m.warns()), "")

    def restart(self) -> None:
        for m in self.members:
            m.restart()

    def state_dict(self) -> dict[str, Any]:
        return {"members": [m.state_dict() for m in self.members]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        ms = state["members"]
        if len(ms) != len(self.members):
            raise ValueError(f"state has {len(ms)} member forecasts, this AnyForecast {len(self.members)}")
        for m, st in zip(self.members, ms, strict=True):
            m.load_state_dict(st)
