"""The failure clock: detectors of collapse, the samples a run survives, and a forecast.

GRPO-style training fails in a few recognisable ways: policy entropy collapses, the reward
crashes from its best, the gradient norm or the KL to the reference spikes, or most groups stop
carrying signal because every rollout of a prompt gets the same reward. Each detector watches one
of these in a record stream (``update(record) -> Alarm | None``) and raises an alarm only once the
condition held for ``patience`` consecutive records; the alarm carries the *onset* (first record
of that streak) so the measured failure point is not delayed by the confirmation.

Warm-ups and smoothing spans are counted in rollouts (``warmup_samples``, ``span_samples``), with
a small floor in records: a warm-up of N records would cover 16x more training at a 16x larger
batch, so only small batches could alarm within a budget and a sweep's fitted failure exponent
would lean towards a step clock (1) even where failure arrives on a sample clock (0).

* :class:`FailureClock` - ``fit(run)``: rollouts consumed before the first sustained alarm.
* :class:`FailureForecast` - online: samples left until a signal's trend reaches its threshold.
* :class:`FailureScalingFit` - across a sweep: failure samples ~ B^alpha (0: sample clock,
  1: step clock) and the pooled failure samples.
"""

from __future__ import annotations

import copy
import math
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from rlvr_schedule.clocks._stats import SlidingOLS, finite, ols, t_quantile
from rlvr_schedule.records import Run, StepRecord

__all__ = [
    "Alarm",
    "Detector",
    "EntropyCollapse",
    "RewardCrash",
    "GradNormSpike",
    "KLBlowup",
    "ZeroVarianceGroups",
    "default_detectors",
    "expected_group_variance",
    "expected_zero_std_fraction",
    "FailureClock",
    "FailureForecast",
    "FailureScalingFit",
]


@dataclass(frozen=True, slots=True)
class Alarm:
    """A sustained failure condition. ``step``/``samples``/``value`` are at the onset (first record
    of the streak); ``confirmed_step``/``confirmed_samples`` where ``patience`` was reached."""

    name: str
    step: int
    samples: int
    value: float
    message: str
    confirmed_step: int = -1
    confirmed_samples: int = -1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def expected_group_variance(p: float, g: int) -> float:
    """Expected within-group (sample) variance of binary rewards with success rate p, group size g:
    p(1-p)(g-1)/g. GRPO's advantage signal scales with it."""
    return p * (1 - p) * (g - 1) / g


def expected_zero_std_fraction(p: float, g: int) -> float:
    """Fraction of groups of g binary rewards that are all equal (zero std) at success rate p."""
    return p**g + (1 - p) ** g


class Detector:
    """Base class: subclasses implement ``_check(record) -> (triggered | None, value)``
    (None: the record does not carry the signal, the streak is left as it is)."""

    name = "detector"

    def __init__(self, patience: int = 3) -> None:
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}")
        self.patience = int(patience)
        self._streak = 0
        self._onset: tuple[int, int, float] | None = None
        self.first_alarm: Alarm | None = None
        self.n_alarms = 0

    def _check(self, record: StepRecord) -> tuple[bool | None, float]:  # pragma: no cover
        raise NotImplementedError

    def _describe(self, value: float) -> str:
        return f"{self.name}: value {value:.4g}"

    def update(self, record: StepRecord) -> Alarm | None:
        """Consume one record; an :class:`Alarm` exactly when a streak reaches ``patience``."""
        hit, value = self._check(record)
        if hit is None:
            return None
        if not hit:
            self._streak = 0
            self._onset = None
            return None
        self._streak += 1
        if self._streak == 1:
            self._onset = (int(record.step), int(record.samples), float(value))
        if self._streak != self.patience:
            return None
        step, samples, v0 = self._onset  # type: ignore[misc]
        alarm = Alarm(self.name, step, samples, v0,
                      f"{self._describe(v0)} from step {step} ({samples} rollouts), "
                      f"sustained {self.patience} records to step {record.step}",
                      int(record.step), int(record.samples))
        self.n_alarms += 1
        if self.first_alarm is None:
            self.first_alarm = alarm
        return alarm

    # state: base fields + subclass `_extra_state`
    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "patience": self.patience, "streak": self._streak,
            "onset": None if self._onset is None else list(self._onset),
            "first_alarm": None if self.first_alarm is None else self.first_alarm.to_dict(),
            "n_alarms": self.n_alarms, **self._extra_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("name", self.name) != self.name:
            raise ValueError(f"state of {state.get('name')!r} loaded into {self.name!r}")
        self.patience = int(state["patience"])
        self._streak = int(state["streak"])
        o = state["onset"]
        self._onset = None if o is None else (int(o[0]), int(o[1]), float(o[2]))
        fa = state["first_alarm"]
        self.first_alarm = None if fa is None else Alarm(**fa)
        self.n_alarms = int(state["n_alarms"])
        self._load_extra(state)


class EntropyCollapse(Detector):
    """Entropy below ``fraction`` of its early level or below the absolute ``floor``, whichever is
    higher. The early level is the median over the first ``warmup_samples`` rollouts (and at least
    ``warmup`` records): the same stretch of training at every batch."""

    name = "entropy_collapse"

    def __init__(self, fraction: float | None = 0.1, floor: float | None = None, warmup: int = 3,
                 patience: int = 3, warmup_samples: float = 512) -> None:
        super().__init__(patience)
        if fraction is None and floor is None:
            raise ValueError("EntropyCollapse needs a fraction or a floor")
        if fraction is not None and not 0 < fraction < 1:
            raise ValueError(f"fraction must be in (0, 1), got {fraction}")
        if not warmup_samples >= 0:
            raise ValueError(f"warmup_samples must be >= 0, got {warmup_samples}")
        self.fraction, self.floor, self.warmup = fraction, floor, max(1, int(warmup))
        self.warmup_samples = float(warmup_samples)
        self._early: list[float] = []
        self.reference = math.nan

    @property
    def threshold(self) -> float:
        t = -math.inf
        if self.floor is not None:
            t = self.floor
        if self.fraction is not None and finite(self.reference):
            t = max(t, self.fraction * self.reference)
        return t

    def _check(self, record: StepRecord) -> tuple[bool | None, float]:
        h = record.entropy
        if not finite(h):
            return None, math.nan
        if not finite(self.reference):
            self._early.append(float(h))
            if len(self._early) >= self.warmup and record.samples >= self.warmup_samples:
                self.reference = float(np.median(self._early))
        return h < self.threshold, float(h)

    def _describe(self, value: float) -> str:
        return f"entropy {value:.4g} below {self.threshold:.4g}"

    def _extra_state(self) -> dict[str, Any]:
        return {"early": list(self._early), "reference": self.reference if finite(self.reference) else None}

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        self._early = [float(x) for x in state["early"]]
        ref = state["reference"]
        self.reference = math.nan if ref is None else float(ref)


class RewardCrash(Detector):
    """The reward crashed: from its best, or below a fraction of where it started.

    Two smoothed rewards (EMAs whose span is counted in rollouts, at least ``span`` records, so a
    small-batch run, whose per-record reward is noisy, is smoothed over as many rollouts as a
    large-batch one), two conditions, each only by more than ``noise_z`` standard deviations of
    its EMA (per-record noise is tracked from first differences, so a noisy run does not alarm on
    its own wiggles):

    * **fall from the best**: the slow EMA (~``span_samples`` rollouts; its initial level is
      where it settled) fell from its running best by more than ``drop`` x (best - initial) and
      at least ``min_drop``; armed once the best rose ``min_drop`` above the initial level (a
      run that never progressed has no progress to lose). The long span keeps slow reward
      fluctuations of a healthy run from reading as a crash.
    * **fall below the start**: the fast EMA (~``floor_span_samples`` rollouts) fell below
      ``floor_fraction`` x the mean reward of the first ``floor_span_samples`` rollouts (None:
      off), progress or not: a policy that breaks before it learns anything has crashed too,
      and the short span dates the crash within a few hundred rollouts at any batch.
    """

    name = "reward_crash"

    def __init__(self, drop: float = 0.3, min_drop: float = 0.05, span: int = 3, warmup: int = 3,
                 patience: int = 5, noise_z: float = 6.0, span_samples: float = 4000.0,
                 floor_fraction: float | None = 0.5, floor_span_samples: float = 512.0) -> None:
        super().__init__(patience)
        if not 0 < drop <= 1:
            raise ValueError(f"drop must be in (0, 1], got {drop}")
        if floor_fraction is not None and not 0 < floor_fraction < 1:
            raise ValueError(f"floor_fraction must be in (0, 1), got {floor_fraction}")
        if not floor_span_samples > 0:
            raise ValueError(f"floor_span_samples must be > 0, got {floor_span_samples}")
        self.drop, self.min_drop, self.span, self.warmup = drop, min_drop, max(1, int(span)), max(1, int(warmup))
        self.noise_z, self.span_samples = float(noise_z), float(span_samples)
        self.floor_fraction, self.floor_span_samples = floor_fraction, float(floor_span_samples)
        self._alpha = 2.0 / (self.span + 1)
        self._alpha_fast = self._alpha
        self.ema = math.nan  # slow
        self.ema_fast = math.nan
        self.initial = math.nan  # slow EMA where it settled
        self.start = math.nan  # mean reward over the first floor_span_samples rollouts
        self.best = -math.inf
        self._last = math.nan
        self._absdiff = math.nan  # slow EMA of |r_t - r_{t-1}|
        self._n = 0
        self._sum = 0.0  # rollout-weighted reward sum over the start window
        self._w = 0.0
        self._floor_armed = False

    def _sd(self, alpha: float) -> float:
        if not finite(self._absdiff):
            return 0.0
        sd = self._absdiff * math.sqrt(math.pi) / 2  # E|diff| = 2 sd / sqrt(pi) for Gaussian noise
        return sd * math.sqrt(alpha / (2 - alpha))

    @property
    def ema_sd(self) -> float:
        """Standard deviation of the slow EMA from reward noise alone."""
        return self._sd(self._alpha)

    def _check(self, record: StepRecord) -> tuple[bool | None, float]:
        r = record.reward_mean
        if not finite(r):
            return None, math.nan
        r = float(r)
        self._n += 1
        batch = max(int(record.batch), 1)
        self._alpha = 2.0 / (max(self.span, self.span_samples / batch) + 1)
        self._alpha_fast = 2.0 / (max(self.span, self.floor_span_samples / batch) + 1)
        if finite(self._last):  # running mean of |diff| for the first 100 records, then an EMA
            d = abs(r - self._last)
            a = max(0.01, 1.0 / (self._n - 1))
            self._absdiff = d if not finite(self._absdiff) else self._absdiff + a * (d - self._absdiff)
        self._last = r
        self.ema = r if not finite(self.ema) else self.ema + self._alpha * (r - self.ema)
        self.ema_fast = r if not finite(self.ema_fast) else self.ema_fast + self._alpha_fast * (r - self.ema_fast)

        floor_hit = False
        if self.floor_fraction is not None:
            if not self._floor_armed:
                self._sum += r * batch
                self._w += batch
                self.start = self._sum / self._w
                self._floor_armed = self._n >= self.warmup and record.samples >= self.floor_span_samples
            elif self.start > 0 and self.ema_fast < self.floor_fraction * self.start:
                floor_hit = self.start - self.ema_fast > max(self.min_drop, self.noise_z * self._sd(self._alpha_fast))
        if floor_hit:
            return True, self.ema_fast

        if self._n <= max(self.warmup, 2.0 / self._alpha):  # let the slow EMA settle first
            self.initial = self.ema
            return False, self.ema
        self.best = max(self.best, self.ema)
        if self.best - self.initial < self.min_drop:
            return False, self.ema
        margin = max(self.min_drop, self.drop * (self.best - self.initial), self.noise_z * self.ema_sd)
        return self.ema < self.best - margin, self.ema

    def _describe(self, value: float) -> str:
        if self.floor_fraction is not None and finite(self.start) and value < self.floor_fraction * self.start:
            return (f"smoothed reward {value:.4g} fell below {self.floor_fraction:g} x its initial "
                    f"{self.start:.4g}")
        return f"smoothed reward {value:.4g} fell from best {self.best:.4g}"

    def _extra_state(self) -> dict[str, Any]:
        f = lambda x: x if finite(x) else None  # noqa: E731
        return {"ema": f(self.ema), "ema_fast": f(self.ema_fast), "initial": f(self.initial),
                "start": f(self.start), "best": f(self.best), "last": f(self._last),
                "absdiff": f(self._absdiff), "n": self._n, "alpha": self._alpha, "alpha_fast": self._alpha_fast,
                "sum": self._sum, "w": self._w, "floor_armed": self._floor_armed}

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        g = lambda x: math.nan if x is None else float(x)  # noqa: E731
        self.ema, self.initial = g(state["ema"]), g(state["initial"])
        self.best = -math.inf if state["best"] is None else float(state["best"])
        self._last, self._absdiff = g(state["last"]), g(state["absdiff"])
        self._n, self._alpha = int(state["n"]), float(state["alpha"])
        # states saved before the fall-below-the-start condition existed have no fast EMA: it starts now
        self.ema_fast, self.start = g(state.get("ema_fast")), g(state.get("start"))
        self._alpha_fast = float(state.get("alpha_fast", self._alpha))
        self._sum, self._w = float(state.get("sum", 0.0)), float(state.get("w", 0.0))
        self._floor_armed = bool(state.get("floor_armed", False))


class _RobustSpike(Detector):
    """Robust z-score of log(value) against the median/MAD of the last ``window`` non-alarming
    values; spikes are kept out of the window so a sustained blow-up keeps alarming. The median
    and MAD are refreshed every ``refresh`` values (a slow baseline; keeps a record O(1)).
    Scoring starts after ``warmup_samples`` rollouts and at least ``warmup`` values (early training
    moves KL and gradient norm fast without anything failing). A spike must also be ``min_ratio``
    times the baseline median: a smooth series (tiny MAD) with a steady trend is not a blow-up."""

    field = "grad_norm"

    def __init__(self, z: float = 6.0, window: int = 100, warmup: int = 8, patience: int = 2,
                 max_value: float | None = None, refresh: int = 10, warmup_samples: float = 1024,
                 min_ratio: float = 2.0) -> None:
        super().__init__(patience)
        if not min_ratio >= 1:
            raise ValueError(f"min_ratio must be >= 1, got {min_ratio}")
        self.min_ratio = float(min_ratio)
        if not warmup_samples >= 0:
            raise ValueError(f"warmup_samples must be >= 0, got {warmup_samples}")
        self.warmup_samples = float(warmup_samples)
        if window < warmup or warmup < 3:
            raise ValueError(f"need 3 <= warmup <= window, got warmup={warmup}, window={window}")
        if refresh < 1:
            raise ValueError(f"refresh must be >= 1, got {refresh}")
        self.z, self.window, self.warmup, self.max_value = float(z), int(window), int(warmup), max_value
        self.refresh = int(refresh)
        self._hist: deque[float] = deque(maxlen=self.window)
        self._stale = 0
        self._med = math.nan
        self._mad = math.nan
        self.last_z = math.nan

    def _baseline(self) -> tuple[float, float]:
        if self._stale > 0 or not finite(self._med):
            if self._stale >= self.refresh or not finite(self._med):
                h = np.fromiter(self._hist, float, len(self._hist))
                self._med = float(np.median(h))
                # floor: a flat history must not turn tiny wiggles into spikes
                self._mad = max(float(np.median(np.abs(h - self._med))) * 1.4826, 1e-3)
                self._stale = 0
        return self._med, self._mad

    def _check(self, record: StepRecord) -> tuple[bool | None, float]:
        v = getattr(record, self.field)
        if not finite(v):
            return None, math.nan
        v = float(v)
        if self.max_value is not None and v > self.max_value:
            self.last_z = math.inf
            return True, v
        lv = math.log(max(v, 1e-12))
        hit = False
        if len(self._hist) >= self.warmup and record.samples >= self.warmup_samples:
            med, mad = self._baseline()
            self.last_z = (lv - med) / mad
            hit = self.last_z > self.z and lv - med > math.log(self.min_ratio)
        if not hit:
            self._hist.append(lv)
            self._stale += 1
        return hit, v

    def _describe(self, value: float) -> str:
        return f"{self.field} {value:.4g} spiked (robust z {self.last_z:.3g} > {self.z:g})"

    def _extra_state(self) -> dict[str, Any]:
        f = lambda x: x if finite(x) else None  # noqa: E731
        return {"hist": list(self._hist), "last_z": f(self.last_z), "stale": self._stale,
                "med": f(self._med), "mad": f(self._mad)}

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        g = lambda x: math.nan if x is None else float(x)  # noqa: E731
        self._hist = deque((float(x) for x in state["hist"]), maxlen=self.window)
        self.last_z, self._med, self._mad = g(state["last_z"]), g(state["med"]), g(state["mad"])
        self._stale = int(state["stale"])


class GradNormSpike(_RobustSpike):
    """Gradient norm far above its recent level (robust z-score of log grad_norm)."""

    name = "grad_norm_spike"
    field = "grad_norm"


class KLBlowup(_RobustSpike):
    """KL to the reference (or PPO KL) far above its recent level, or above ``max_value``."""

    name = "kl_blowup"
    field = "kl"


class ZeroVarianceGroups(Detector):
    """Fraction of groups whose rewards are all equal above ``threshold``: those groups give GRPO
    no advantage signal. With ``group_size`` and ``excess`` it also alarms when the fraction
    exceeds the binomial expectation p^g + (1-p)^g at the current reward by ``excess``."""

    name = "zero_variance_groups"

    def __init__(self, threshold: float = 0.8, patience: int = 3, group_size: int | None = None,
                 excess: float | None = None) -> None:
        super().__init__(patience)
        if not 0 < threshold <= 1:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        if excess is not None and not group_size:
            raise ValueError("excess needs group_size")
        self.threshold, self.group_size, self.excess = threshold, group_size, excess

    def _check(self, record: StepRecord) -> tuple[bool | None, float]:
        f = record.frac_zero_std
        if not finite(f):
            return None, math.nan
        hit = f > self.threshold
        if self.excess is not None and finite(record.reward_mean):
            p = min(max(record.reward_mean, 0.0), 1.0)
            hit = hit or f - expected_zero_std_fraction(p, int(self.group_size)) > self.excess
        return hit, float(f)

    def _describe(self, value: float) -> str:
        return f"fraction of zero-std groups {value:.3g}"


def default_detectors() -> list[Detector]:
    """Entropy collapse, reward crash, grad-norm spike and KL blow-up with conservative defaults
    (zero-variance groups is opt-in: easy problems legitimately saturate). Every warm-up is
    counted in rollouts, so all batches of a sweep are judged over the same stretch of training:
    the spike detectors score from 1024 rollouts (at least 8 values), the entropy's early level
    and the reward's starting level are taken over the first 512, and the reward is smoothed over
    512 rollouts (fall below half the start) and 4000 (fall from the best)."""
    return [EntropyCollapse(), RewardCrash(), GradNormSpike(), KLBlowup()]


class FailureClock:
    """``fit(run)``: rollouts consumed before collapse = onset of the first sustained alarm.

    Fitted: ``failure_samples_`` (None if no detector fired), ``failure_step_``, ``signal_``
    (name of the detector that fired first), ``alarms_`` (first alarm of every detector that fired).
    Detectors are copied per fit, so one clock can fit many runs.
    """

    def __init__(self, detectors: Sequence[Detector] | None = None, *, stop_at_failure: bool = True) -> None:
        self.detectors = list(detectors) if detectors is not None else None
        self.stop_at_failure = stop_at_failure

    def fit(self, run: Run | Iterable[StepRecord]) -> "FailureClock":
        """With ``stop_at_failure`` (default) reading stops once no later alarm can have an earlier
        onset (``max patience`` records after the first confirmation), so ``alarms_`` holds the
        alarms up to the failure; False reads the whole run."""
        dets = copy.deepcopy(self.detectors) if self.detectors is not None else default_detectors()
        left = -1
        horizon = max((d.patience for d in dets), default=1)
        for rec in run:
            for d in dets:
                if d.update(rec) is not None and left < 0 and self.stop_at_failure:
                    left = horizon
            if left >= 0:
                left -= 1
                if left < 0:
                    break
        alarms = sorted((d.first_alarm for d in dets if d.first_alarm is not None),
                        key=lambda a: (a.samples, a.step))
        self.alarms_ = alarms
        first = alarms[0] if alarms else None
        self.failure_samples_ = None if first is None else first.samples
        self.failure_step_ = None if first is None else first.step
        self.signal_ = None if first is None else first.name
        return self


_DIRECTION = {"entropy": "down", "reward_mean": "down", "kl": "up", "grad_norm": "up",
              "frac_zero_std": "up", "clip_frac": "up"}


class FailureForecast:
    """Online forecast of rollouts left until a failure signal's trend reaches its threshold.

    A regression of the signal (``model="linear"``) or its log (``"loglinear"``, exponential
    decay/growth) on cumulative samples over the last ``window`` records is extrapolated to the
    threshold: ``threshold`` if given, else ``fraction`` x the early level (median of the first
    ``warmup`` records; the default 0.1 matches :class:`EntropyCollapse`). ``interval`` takes the
    slope's ``level`` confidence band through the window's mean point; its upper end is inf when
    the band includes no trend. ``samples_to_failure`` is inf while the trend points away from the
    threshold and 0 once the smoothed signal has crossed it.
    """

    def __init__(self, signal: str = "entropy", *, threshold: float | None = None, fraction: float = 0.1,
                 direction: str | None = None, window: int = 200, min_points: int = 20, warmup: int = 10,
                 model: str = "linear", level: float = 0.9) -> None:
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
        self._ols = SlidingOLS(self.window)
        self._early: list[float] = []
        self.reference = math.nan
        self.samples = 0

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
        v = getattr(record, self.signal)
        if finite(v):
            if len(self._early) < self.warmup:
                self._early.append(float(v))
                self.reference = float(np.median(self._early))
            self._ols.add(float(record.samples), self._y(float(v)))
        return self.samples_to_failure

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
            "signal": self.signal, "threshold": self.fixed_threshold, "fraction": self.fraction,
            "direction": self.direction, "window": self.window, "min_points": self.min_points,
            "warmup": self.warmup, "model": self.model, "level": self.level,
            "ols": self._ols.state_dict(), "early": list(self._early),
            "reference": self.reference if finite(self.reference) else None, "samples": self.samples,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.signal, self.fixed_threshold = state["signal"], state["threshold"]
        self.fraction, self.direction = float(state["fraction"]), state["direction"]
        self.window, self.min_points = int(state["window"]), int(state["min_points"])
        self.warmup, self.model, self.level = int(state["warmup"]), state["model"], float(state["level"])
        self._ols = SlidingOLS(self.window)
        self._ols.load_state_dict(state["ols"])
        self._early = [float(x) for x in state["early"]]
        self.reference = math.nan if state["reference"] is None else float(state["reference"])
        self.samples = int(state["samples"])


class FailureScalingFit:
    """How the failure point scales with batch across a sweep: failure samples ~ B^alpha.

    ``alpha_`` (log-log regression slope) with a ``level`` t-interval ``alpha_interval_``:
    alpha = 0 is a sample clock (the run fails after the same rollouts at any batch), alpha = 1
    a step clock. ``failure_samples_`` pools the runs that failed (geometric mean, with a
    t-interval in log space); runs that never failed are listed in ``censored_``.
    """

    def __init__(self, detectors: Sequence[Detector] | None = None, level: float = 0.95) -> None:
        self.detectors = detectors
        self.level = level

    def fit(self, runs: Sequence[Run], failure_samples: Sequence[float | None] | None = None
            ) -> "FailureScalingFit":
        """``failure_samples`` (one per run, None = no failure) skips re-running the detectors."""
        if failure_samples is None:
            failure_samples = [FailureClock(self.detectors).fit(r).failure_samples_ for r in runs]
        if len(failure_samples) != len(runs):
            raise ValueError("failure_samples must have one entry per run")
        self.table_ = [{"name": r.name, "batch": r.batch, "failure_samples": f,
                        "failure_steps": None if f is None else f / r.batch}
                       for r, f in zip(runs, failure_samples)]
        self.censored_ = [r.name for r, f in zip(runs, failure_samples) if f is None]
        pts = [(r.batch, float(f)) for r, f in zip(runs, failure_samples) if f is not None and f > 0]
        nan = math.nan
        self.alpha_, self.alpha_interval_ = nan, (nan, nan)
        self.failure_samples_, self.failure_samples_interval_ = nan, (nan, nan)
        self._c = nan
        if not pts:
            return self
        lb = np.log([p[0] for p in pts])
        lf = np.log([p[1] for p in pts])
        n = lf.size
        self.failure_samples_ = float(np.exp(lf.mean()))
        if n >= 2:
            t = t_quantile(0.5 + self.level / 2, n - 1)
            h = t * float(lf.std(ddof=1)) / math.sqrt(n)
            self.failure_samples_interval_ = (float(np.exp(lf.mean() - h)), float(np.exp(lf.mean() + h)))
        res = ols(lb, lf)
        if finite(res.slope):
            self.alpha_ = res.slope
            self._c = res.intercept
            self.alpha_interval_ = res.slope_interval(self.level)
        return self

    def predict(self, batch: float) -> float:
        """Failure samples at ``batch`` from the fitted power law (pooled value if alpha unknown)."""
        if finite(self.alpha_):
            return float(math.exp(self._c + self.alpha_ * math.log(batch)))
        return self.failure_samples_
