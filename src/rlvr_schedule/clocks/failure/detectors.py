"""Failure detectors, one per way GRPO-style training fails: entropy collapse, reward crash,
grad-norm spike, KL blow-up, zero-variance groups.

Warm-ups and smoothing spans are counted in rollouts (``warmup_samples``, ``span_samples``), with
a small floor in records: a warm-up of N records would cover 16x more training at a 16x larger
batch, so only small batches could alarm within a budget and a sweep's fitted failure exponent
would lean towards a step clock (1) even where failure arrives on a sample clock (0)."""

from __future__ import annotations

import math
from collections import deque
from typing import Any, Mapping

import numpy as np

from rlvr_schedule.clocks._stats import finite
from rlvr_schedule.clocks.failure.base import Detector, expected_zero_std_fraction
from rlvr_schedule.records import StepRecord

__all__ = ["EntropyCollapse", "RewardCrash", "GradNormSpike", "KLBlowup", "ZeroVarianceGroups",
           "default_detectors"]

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
