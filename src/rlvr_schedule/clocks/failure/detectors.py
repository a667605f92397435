"""Detectors, one per signal practitioners watch in GRPO/PPO training.

Failure (onset of collapse; the failure clock reads these): entropy exhausted
(:class:`EntropyCollapse`), reward falling from its best and staying down (:class:`RewardCrash`),
a *sustained* blow-up of the gradient norm or the KL (:class:`GradNormSpike`, :class:`KLBlowup`).
Warnings (reported with their lead, never the failure clock): transient spikes of those two, KL
rising from ~0 as learning starts, a recovered reward dip, entropy surging
(:class:`EntropySurge`), responses surging or pinned at the length cap
(:class:`ResponseLengthSurge`), the PPO clip ratio rising (:class:`ClipRatioRise`), train/rollout
log-prob mismatch (:class:`LogProbMismatch`), zero-variance groups (:class:`ZeroVarianceGroups`).
A reward that falls from the start of a run that never progressed is a *divergence*
(:class:`RewardCrash`), reported apart from both.

Warm-ups and smoothing spans are counted in rollouts (``warmup_samples``, ``span_samples``), with
a small floor in records: a warm-up of N records would cover 16x more training at a 16x larger
batch, so only small batches could alarm within a budget and a sweep's fitted failure exponent
would lean towards a step clock (1) even where failure arrives on a sample clock (0)."""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rlvr_schedule.clocks._stats import finite
from rlvr_schedule.clocks.failure.base import (
    Detector,
    expected_zero_std_fraction,
    finite_or_none,
    float_or,
)
from rlvr_schedule.clocks.failure.forecast import policy_forecast
from rlvr_schedule.records import StepRecord

__all__ = [
    "EntropyCollapse",
    "RewardCrash",
    "RewardFall",
    "GradNormSpike",
    "KLBlowup",
    "ZeroVarianceGroups",
    "EntropySurge",
    "ResponseLengthSurge",
    "ClipRatioRise",
    "LogProbMismatch",
    "ForecastWarning",
    "default_detectors",
]


class _EarlyLevel(Detector):
    """A detector that judges its signal against the signal's early level: the median over the
    first ``warmup_samples`` rollouts (and at least ``warmup`` records), the same stretch of
    training at every batch. ``reference`` is NaN until the warm-up is over."""

    def __init__(
        self, patience: int, patience_samples: float = 0.0, *, warmup: int, warmup_samples: float
    ) -> None:
        super().__init__(patience, patience_samples)
        if not warmup_samples >= 0:
            raise ValueError(f"warmup_samples must be >= 0, got {warmup_samples}")
        self.warmup, self.warmup_samples = max(1, int(warmup)), float(warmup_samples)
        self._early: list[float] = []
        self.reference = math.nan

    def _learn_level(self, value: float, record: StepRecord) -> bool:
        """Whether the early level was known before ``value``; if not, ``value`` joins the warm-up."""
        if finite(self.reference):
            return True
        self._early.append(float(value))
        if len(self._early) >= self.warmup and record.samples >= self.warmup_samples:
            self.reference = float(np.median(self._early))
        return False

    def _extra_state(self) -> dict[str, Any]:
        return {"early": list(self._early), "reference": finite_or_none(self.reference)}

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        self._early = [float(x) for x in state["early"]]
        self.reference = float_or(state["reference"])


class EntropyCollapse(_EarlyLevel):
    """Entropy below ``fraction`` of its early level or below the absolute ``floor``, whichever is
    higher. The early level is the median over the first ``warmup_samples`` rollouts (and at least
    ``warmup`` records): the same stretch of training at every batch. With no entropy left the
    policy stops exploring (Cui et al. 2025), but real healthy runs also end near-deterministic
    (an instruct model on GSM8K: entropy 0.11 -> 0.006 at reward 0.9). ``reward_gate`` (as in
    :func:`default_detectors`): the low-entropy streak counts as a failure only once the reward
    has turned down too (the median of the last ``gate_records`` rewards ``gate_drop`` below its
    best, for ``gate_records`` records in a row, so a dip of a few records does not count) or the
    entropy went below ``deep_fraction`` of its early level during the streak (exhausted, not just
    low); the onset stays where the entropy crossed ``fraction``. Until then it is a warning.
    ``warning_only``: never a failure."""

    name = "entropy_collapse"
    signal = "entropy"

    def __init__(
        self,
        fraction: float | None = 0.1,
        floor: float | None = None,
        warmup: int = 3,
        patience: int = 3,
        warmup_samples: float = 512,
        patience_samples: float = 0.0,
        warning_only: bool = False,
        reward_gate: bool = False,
        gate_records: int = 5,
        gate_drop: float = 0.2,
        deep_fraction: float | None = None,
    ) -> None:
        super().__init__(patience, patience_samples, warmup=warmup, warmup_samples=warmup_samples)
        self.warning_only = bool(warning_only)
        if self.warning_only:
            self.kind = "warning"
        if not 0 < gate_drop < 1 or gate_records < 1:
            raise ValueError(f"need 0 < gate_drop < 1 and gate_records >= 1, got {gate_drop}, {gate_records}")
        self.reward_gate, self.gate_records = bool(reward_gate), int(gate_records)
        self.gate_drop = float(gate_drop)
        self._rw: deque[float] = deque(maxlen=self.gate_records)
        self._med_peak = -math.inf
        self._gate_run = 0
        if deep_fraction is not None and not 0 < deep_fraction < 1:
            raise ValueError(f"deep_fraction must be in (0, 1), got {deep_fraction}")
        self.deep_fraction = deep_fraction
        self._streak_min = math.inf  # lowest entropy of the current streak
        if fraction is None and floor is None:
            raise ValueError("EntropyCollapse needs a fraction or a floor")
        if fraction is not None and not 0 < fraction < 1:
            raise ValueError(f"fraction must be in (0, 1), got {fraction}")
        self.fraction, self.floor = fraction, floor

    @property
    def threshold(self) -> float:
        t = -math.inf
        if self.floor is not None:
            t = self.floor
        if self.fraction is not None and finite(self.reference):
            t = max(t, self.fraction * self.reference)
        return t

    def _gate(self, record: StepRecord) -> None:
        r = record.reward_mean
        if not self.reward_gate or not finite(r):
            return
        self._rw.append(float(r))
        if len(self._rw) < self.gate_records:
            return
        med = float(statistics.median(self._rw))  # a few values: no numpy call per record
        self._med_peak = max(self._med_peak, med)
        down = self._med_peak > 0 and med < (1 - self.gate_drop) * self._med_peak
        self._gate_run = self._gate_run + 1 if down else 0

    def _confirmable(self) -> bool:
        if not self.reward_gate:
            return True
        deep = (
            self.deep_fraction is not None
            and finite(self.reference)
            and self._streak_min < self.deep_fraction * self.reference
        )
        return deep or self._gate_run >= self.gate_records

    def _check(self, record: StepRecord) -> tuple[bool | None, float]:
        self._gate(record)
        h = record.entropy
        if not finite(h):
            return None, math.nan
        self._learn_level(h, record)  # the floor judges the warm-up records too
        hit = h < self.threshold
        self._streak_min = min(self._streak_min, float(h)) if hit else math.inf
        return hit, float(h)

    def _why(self) -> tuple[float, float]:
        return self.reference, self.threshold

    def _describe(self, value: float) -> str:
        return f"entropy {value:.4g} below {self.threshold:.4g} (early level {self.reference:.4g})"

    def _extra_state(self) -> dict[str, Any]:
        return {
            **super()._extra_state(),
            "rw": list(self._rw),
            "med_peak": finite_or_none(self._med_peak),
            "gate_run": self._gate_run,
            "streak_min": finite_or_none(self._streak_min),
        }

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        super()._load_extra(state)
        self._rw = deque((float(x) for x in state.get("rw", [])), maxlen=self.gate_records)
        self._med_peak = float_or(state.get("med_peak"), -math.inf)
        self._gate_run = int(state.get("gate_run", 0))
        self._streak_min = float_or(state.get("streak_min"), math.inf)


class RewardCrash(Detector):
    """The reward fell from its best and stayed down (a failure), or fell from the start of a run
    that never progressed (a divergence).

    Smoothed rewards are EMAs whose span is counted in rollouts (at least ``span`` records, so a
    small-batch run, whose per-record reward is noisy, is smoothed over as many rollouts as a
    large-batch one); every condition must clear ``noise_z`` standard deviations of its EMA
    (noise from first differences of the reward, so a noisy run does not alarm on its wiggles):

    * **fall from the best** (slow EMA, ~``span_samples`` rollouts): below its running best by more
      than ``drop`` x (best - initial) and at least ``min_drop``, while the fast EMA is that low too
      (the slow one lags a dip already recovered from); armed once the best rose ``min_drop``
      above the initial level (the slow EMA where it settled, within ``settle_samples``).
    * **deep fall** (fast EMA, ~``floor_span_samples`` rollouts): below the slow best by more than
      ``deep_drop`` x (best - initial).
    * **fall from the peak**: a fast EMA that starts as a running mean falls below
      ``peak_fraction`` x its peak (the peak less two of the EMA's own standard deviations, so an
      early mean of a few records is not taken for a level), from the ``warmup``-th record on,
      progress or not: a pretrained policy that starts high and collapses (reward 0.9 -> 0) never
      "progressed", and is caught within a record or two.
    * **fall below the start**: the fast EMA below ``floor_fraction`` x the mean reward of the
      first ``floor_span_samples`` rollouts (None: off).

    A condition counts once it held ``patience`` records over ``patience_samples`` rollouts, or
    ``shallow_patience_samples`` when the reward fell by less than half (the reward *stays* down;
    a dip of a few records leaves a warning only); its onset is backdated to
    the first of the raw rewards below the threshold that lead up to it. When the run never
    progressed the alarm is a ``"divergence"`` if the run left its start level sooner than it
    then took to fall (the reward declined from the start, as at a batch above 2B*) and a
    ``"failure"`` if it held its level and then fell, or fell off a cliff (from its level to the
    threshold within 2 records).
    """

    name = "reward_crash"
    signal = "reward_mean"

    def __init__(
        self,
        drop: float = 0.3,
        min_drop: float = 0.05,
        span: int = 3,
        warmup: int = 3,
        patience: int = 5,
        noise_z: float = 6.0,
        span_samples: float = 4000.0,
        floor_fraction: float | None = 0.5,
        floor_span_samples: float = 512.0,
        deep_drop: float | None = 0.4,
        patience_samples: float = 256.0,
        settle_samples: float = 512.0,
        peak_fraction: float | None = 0.65,
        shallow_patience_samples: float = 512.0,
        peak_warmup_samples: float = 100.0,
    ) -> None:
        super().__init__(patience, patience_samples)
        if not 0 < drop <= 1:
            raise ValueError(f"drop must be in (0, 1], got {drop}")
        if deep_drop is not None and not 0 < deep_drop <= 1:
            raise ValueError(f"deep_drop must be in (0, 1], got {deep_drop}")
        if floor_fraction is not None and not 0 < floor_fraction < 1:
            raise ValueError(f"floor_fraction must be in (0, 1), got {floor_fraction}")
        if not floor_span_samples > 0:
            raise ValueError(f"floor_span_samples must be > 0, got {floor_span_samples}")
        self.drop, self.min_drop, self.span, self.warmup = (
            drop,
            min_drop,
            max(1, int(span)),
            max(1, int(warmup)),
        )
        self.deep_drop = deep_drop
        self.settle_samples = float(settle_samples)
        self.shallow_patience_samples = float(shallow_patience_samples)
        self.peak_warmup_samples = float(peak_warmup_samples)
        self._now = (0, 1)  # samples and batch of the last record with a reward
        self._value = math.nan  # the smoothed reward the last condition judged
        if peak_fraction is not None and not 0 < peak_fraction < 1:
            raise ValueError(f"peak_fraction must be in (0, 1), got {peak_fraction}")
        self.peak_fraction = peak_fraction
        self.noise_z, self.span_samples = float(noise_z), float(span_samples)
        self.floor_fraction, self.floor_span_samples = floor_fraction, float(floor_span_samples)
        self._alpha = 2.0 / (self.span + 1)
        self._alpha_fast = self._alpha
        self.ema = math.nan  # slow
        self.ema_fast = math.nan
        self.initial = math.nan  # slow EMA where it settled
        self.start = math.nan  # mean reward over the first floor_span_samples rollouts
        self.best = -math.inf
        self.peak = -math.inf  # best fast EMA from the warmup-th record on
        self.level = math.nan  # mean reward of the first ``warmup`` records: where the run started
        self._last = math.nan
        self._absdiff = math.nan  # slow EMA of |r_t - r_{t-1}|
        self._n = 0
        self._sum = 0.0  # rollout-weighted reward sum over the start window
        self._w = 0.0
        self._floor_armed = False
        self._armed_at = math.nan  # rollouts when ``level`` was fixed
        self._level_until = math.nan  # last rollouts with the fast EMA still at ``level``
        self._near_until = math.nan  # last rollouts with the reward still near its peak
        self._above_until = math.nan  # last rollouts with a raw reward at or above ``level``
        self._lsum = 0.0
        # n, sum x, sum y, sum xx, sum xy of (rollouts, reward) while the run held near its peak
        self._reg = [0.0, 0.0, 0.0, 0.0, 0.0]
        self._why_now: tuple[float, float, str] = (math.nan, math.nan, "")
        self._recent: deque[tuple[int, int, float]] = deque(maxlen=64)  # (step, samples, raw reward)
        self.ema_peak = math.nan  # fast EMA that starts as a running mean (no first-record weight)
        self._diffs: deque[float] = deque(maxlen=64)  # |r_t - r_(t-1)|, for a robust noise level
        self._sd_rec = 0.0

    def _sd(self, alpha: float) -> float:
        if not finite(self._absdiff):
            return 0.0
        sd = self._absdiff * math.sqrt(math.pi) / 2  # E|diff| = 2 sd / sqrt(pi) for Gaussian noise
        return sd * math.sqrt(alpha / (2 - alpha))

    @property
    def ema_sd(self) -> float:
        """Standard deviation of the slow EMA from reward noise alone."""
        return self._sd(self._alpha)

    @property
    def progressed(self) -> bool:
        """Whether the reward ever rose clearly above where it started."""
        if self.best - self.initial >= self.min_drop:
            return True
        noise = self.noise_z * self._sd(self._alpha_fast)
        return finite(self.level) and self.peak - self.level >= max(self.min_drop, noise)

    def _check(self, record: StepRecord) -> tuple[bool | None, float]:
        r = record.reward_mean
        if not finite(r):
            return None, math.nan
        r = float(r)
        self._n += 1
        # the rollouts behind this record's mean: its batch when every update is logged, the
        # samples since the last record when a console logs every k-th update (TRL logging_steps)
        prev_samples = self._now[0]
        batch = max(int(record.samples) - prev_samples, 1) if self._n > 1 else max(int(record.batch), 1)
        self._now = (int(record.samples), batch)
        self._alpha = 2.0 / (max(self.span, self.span_samples / batch) + 1)
        self._alpha_fast = 2.0 / (max(self.span, self.floor_span_samples / batch) + 1)
        if finite(self._last):  # running mean of |diff| for the first 100 records, then an EMA
            d = abs(r - self._last)
            self._diffs.append(d)
            a = max(0.01, 1.0 / (self._n - 1))
            self._absdiff = d if not finite(self._absdiff) else self._absdiff + a * (d - self._absdiff)
        self._last = r
        self._recent.append((int(record.step), int(record.samples), r))
        self.ema = r if not finite(self.ema) else self.ema + self._alpha * (r - self.ema)
        self.ema_fast = (
            r if not finite(self.ema_fast) else self.ema_fast + self._alpha_fast * (r - self.ema_fast)
        )
        sd_fast = self._sd(self._alpha_fast)
        a_peak = max(self._alpha_fast, 1.0 / self._n)
        self.ema_peak = r if not finite(self.ema_peak) else self.ema_peak + a_peak * (r - self.ema_peak)
        # noise of that EMA now, from the median |diff| (a collapse's one big jump does not inflate it)
        if self._diffs and (self._n % 8 == 0 or len(self._diffs) < 16):  # refreshed every 8 records
            self._sd_rec = float(np.median(self._diffs)) / 0.954
        sd_rec = self._sd_rec
        sd_peak = sd_rec * math.sqrt(a_peak / (2 - a_peak)) if a_peak < 1 else sd_rec

        if not self._floor_armed:
            self._sum += r * batch
            self._w += batch
            self.start = self._sum / self._w
            self._floor_armed = self._n >= self.warmup and record.samples >= self.floor_span_samples
        if not finite(self.level):  # the start level: mean over the fast EMA's span (>= warmup records)
            self._lsum += r
            if self._n >= max(self.warmup, 1.0 / self._alpha_fast):
                self.level = self._lsum / self._n
                self._level_until = float(record.samples)
                above = [x for _, x, y in self._recent if y >= self.level]  # the window's last one
                self._above_until = float(above[-1]) if above else math.nan
        elif r >= self.level:
            self._above_until = float(record.samples)
        if self._n == self.warmup:
            self._armed_at = self._near_until = float(record.samples)
        if self._n >= self.warmup:
            # peak of the EMA less 2 of its own standard deviations, once it averages at least
            # peak_warmup_samples rollouts: an early mean of a few noisy records is no level
            if record.samples >= self.peak_warmup_samples:
                self.peak = max(self.peak, self.ema_peak - 2 * sd_peak)
            # holding its level: in the upper half of the way from the peak down to the threshold
            band = 1 - (1 - (self.peak_fraction if self.peak_fraction is not None else 0.6)) / 2
            if finite(self.level) and self.ema_fast >= self.level - max(self.min_drop / 2, 2 * sd_fast):
                self._level_until = float(record.samples)
            if self.ema_peak >= band * self.peak:
                self._near_until = float(record.samples)
                # the trend while it held (a fall that comes after is not in it)
                x = float(record.samples)
                reg = self._reg
                reg[0] += 1
                reg[1] += x
                reg[2] += r
                reg[3] += x * x
                reg[4] += x * r

        settled = self._n > max(self.warmup, min(2.0 / self._alpha, self.settle_samples / batch))
        if not settled:  # let the slow EMA settle first
            self.initial = self.ema
        else:
            self.best = max(self.best, self.ema)
        gain = self.best - self.initial
        if settled and gain >= self.min_drop:
            margin = max(self.min_drop, self.drop * gain, self.noise_z * self.ema_sd)
            # the slow EMA lags a recovered dip by many records: the reward must be down *now* too
            if self.ema < self.best - margin and self.ema_fast < self.best - margin:
                self._why_now = (self.best, self.best - margin, "slow")
                self._value = self.ema_fast
                return True, self.ema
            if self.deep_drop is not None:
                deep = max(self.min_drop, self.deep_drop * gain, self.noise_z * sd_fast)
                if self.ema_fast < self.best - deep:
                    self._why_now = (self.best, self.best - deep, "deep")
                    self._value = self.ema_fast
                    return True, self.ema_fast
        if (
            self.peak_fraction is not None
            and self.peak > 0
            and self.ema_peak < self.peak_fraction * self.peak
            and self.peak - self.ema_peak > max(self.min_drop, self.noise_z * sd_peak)
        ):
            self._why_now = (self.peak, self.peak_fraction * self.peak, "peak")
            self._value = self.ema_peak
            return True, self.ema_peak
        if (
            self.floor_fraction is not None
            and self._floor_armed
            and self.start > 0
            and self.ema_fast < self.floor_fraction * self.start
            and self.start - self.ema_fast > max(self.min_drop, self.noise_z * sd_fast)
        ):
            self._why_now = (self.start, self.floor_fraction * self.start, "floor")
            self._value = self.ema_fast
            return True, self.ema_fast
        self._why_now = (self.best if gain >= self.min_drop else self.start, math.nan, "")
        return False, self.ema

    def _why(self) -> tuple[float, float]:
        return self._why_now[0], self._why_now[1]

    def _confirmable(self) -> bool:
        """A fall to below half of what it fell from counts after ``patience_samples``; a shallower
        one must stay down ``shallow_patience_samples`` (a small batch's progress wanders: the
        reward can dip by 40% for a few hundred rollouts and come back)."""
        if self._onset is None:
            return True
        span = self._now[0] - self._onset[1] + self._now[1]
        deep = finite(self._value) and self._value < 0.5 * self._why_now[0]
        return deep or span >= self.shallow_patience_samples

    def _backdate(self, record: StepRecord) -> tuple[int, int, float] | None:
        """The EMA crosses the threshold a few records after the raw reward did: the onset is the
        first of the consecutive raw rewards below the threshold that end at this record, within
        the fast EMA's span."""
        thr = self._why_now[1]
        if not finite(thr):
            return None
        per_record = self._now[1]  # rollouts a record covers (see _check)
        span = max(self.span, self.floor_span_samples / per_record)
        onset = None
        for step, samples, r in reversed(self._recent):
            if r >= thr or record.samples - samples >= span * per_record:
                break
            onset = (step, samples, r)
        return onset

    def _alarm_kind(self) -> str:
        if self._why_now[2] not in ("floor", "peak") or self.progressed:
            return "failure"
        # never progressed. A cliff (from near its peak to the threshold within 2 records) is a
        # collapse; otherwise a divergence when the run left its start level sooner than it then
        # took to fall, or when the trend of the rewards while it still held near its peak, carried
        # over the whole stretch, accounts for at least half of the fall (the reward was declining
        # from the start); a collapse when it held flat and then fell
        onset = self._onset[1] if self._onset is not None else math.nan
        batch = self._recent[-1][1] - self._recent[-2][1] if len(self._recent) > 1 else 1
        # (before the start level is known, "near its peak" stands in for it)
        if onset - (self._level_until if finite(self.level) else self._near_until) <= 2 * batch:
            return "failure"
        if self._left_level_early(onset):
            return "divergence"  # it left its start level sooner than it then took to fall
        return "failure"

    def _left_level_early(self, onset: float) -> bool:
        """It held its start level, past the records that fixed it, for less time than it then
        took to fall to the threshold."""
        return self._level_until - self._armed_at < onset - self._level_until

    def _fell_from_start(self) -> bool:
        """A live failure that a sweep's fit reads as a divergence: never progressed, and fell from
        its start level fast enough to be a cliff live (above 2B* the reward can halve every update
        from the first ones): no raw reward at or above its start level after the records that
        armed the detector (the first ``warmup``), or it held that level for less time than it then
        took to fall. A pretrained policy that held its level a few records and then fell off a
        cliff (reward 0.9 -> 0) collapsed: it is still a failure."""
        if self._why_now[2] not in ("floor", "peak") or self.progressed or not finite(self.level):
            return False
        onset = self._onset[1] if self._onset is not None else math.nan
        if not finite(onset):
            return False
        return self._above_until < self._armed_at or self._left_level_early(onset)

    def _describe(self, value: float) -> str:
        base, thr, how = self._why_now
        if how == "floor":
            return (
                f"smoothed reward {value:.4g} fell below {self.floor_fraction:g} x its initial "
                f"{self.start:.4g}" + ("" if self.progressed else " (no progress before)")
            )
        if how == "peak":
            return f"smoothed reward {value:.4g} fell below {self.peak_fraction:g} x its peak {base:.4g}" + (
                "" if self.progressed else " (no progress before)"
            )
        if how == "deep":
            return f"smoothed reward {value:.4g} collapsed from best {base:.4g} below {thr:.4g}"
        return f"smoothed reward {value:.4g} fell from best {base:.4g} below {thr:.4g}"

    def _extra_state(self) -> dict[str, Any]:
        f = finite_or_none
        return {
            "ema": f(self.ema),
            "ema_fast": f(self.ema_fast),
            "initial": f(self.initial),
            "start": f(self.start),
            "best": f(self.best),
            "peak": f(self.peak),
            "last": f(self._last),
            "absdiff": f(self._absdiff),
            "n": self._n,
            "alpha": self._alpha,
            "alpha_fast": self._alpha_fast,
            "sum": self._sum,
            "w": self._w,
            "floor_armed": self._floor_armed,
            "armed_at": f(self._armed_at),
            "level_until": f(self._level_until),
            "near_until": f(self._near_until),
            "above_until": f(self._above_until),
            "level": f(self.level),
            "lsum": self._lsum,
            "ema_peak": f(self.ema_peak),
            "diffs": list(self._diffs),
            "reg": list(self._reg),
            "sd_rec": self._sd_rec,
            "now": list(self._now),
            "value": f(self._value),
            "why": [f(self._why_now[0]), f(self._why_now[1]), self._why_now[2]],
            "recent": [list(x) for x in self._recent],
        }

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        g = float_or
        self.ema, self.initial = g(state["ema"]), g(state["initial"])
        self.best = float_or(state["best"], -math.inf)
        self.peak = float_or(state.get("peak"), -math.inf)
        self._last, self._absdiff = g(state["last"]), g(state["absdiff"])
        self._n, self._alpha = int(state["n"]), float(state["alpha"])
        # states saved before the fall-below-the-start condition existed have no fast EMA: it starts now
        self.ema_fast, self.start = g(state.get("ema_fast")), g(state.get("start"))
        self._alpha_fast = float(state.get("alpha_fast", self._alpha))
        self._sum, self._w = float(state.get("sum", 0.0)), float(state.get("w", 0.0))
        self._floor_armed = bool(state.get("floor_armed", False))
        self._armed_at, self._level_until = g(state.get("armed_at")), g(state.get("level_until"))
        self._near_until = g(state.get("near_until"))
        self._above_until = g(state.get("above_until"))
        self.level, self._lsum = g(state.get("level")), float(state.get("lsum", 0.0))
        self.ema_peak = g(state.get("ema_peak"))
        self._diffs = deque((float(x) for x in state.get("diffs", [])), maxlen=64)
        self._reg = [float(x) for x in state.get("reg", [0.0] * 5)]
        self._sd_rec = float(state.get("sd_rec", 0.0))
        self._now = tuple(int(x) for x in state.get("now", (0, 1)))  # type: ignore[assignment]
        self._value = g(state.get("value"))
        why = state.get("why") or [None, None, ""]
        self._why_now = (g(why[0]), g(why[1]), str(why[2]))
        self._recent = deque(((int(a), int(b), float(c)) for a, b, c in state.get("recent", [])), maxlen=64)


def _median(xs: Iterable[float]) -> float:
    """The median of a few floats (``statistics.median`` without its type checks: per-record cost)."""
    s = sorted(xs)
    m = len(s) // 2
    return float(s[m]) if len(s) % 2 else (s[m - 1] + s[m]) / 2.0


class RewardFall(Detector):
    """The reward fell far below its level, judged by a CUSUM on the run's own noise: a failure as
    soon as the evidence says so, not after a fixed streak.

    Each record's shortfall ``z = (level - reward) / sigma`` is summed, less an allowance ``k`` per
    record, into ``S = max(0, S + z - k)`` (Page's CUSUM); ``level`` is the median of the last
    ``window`` rewards not below ``depth`` x the level (a fall's own records stay out), ``sigma`` the larger of
    the run's own per-record noise (median |first difference| / 0.954, robust to the fall's own jump)
    and the Bernoulli noise of a mean over the record's rollouts, ``sqrt(level (1 - level) / n)``.
    The failure counts once ``S >= h`` while the reward is below ``depth`` x the level: a fall far
    outside the noise (z >= h + k) counts at that record, a smaller one after as many records as it
    takes, a gradual slide once its evidence and its depth are both there. ``z`` per record is
    capped at ``z_cap`` (one absurd record is not a collapse by itself unless it is that far out).
    A slide shows itself before it falls below ``depth``: a second CUSUM with a small allowance,
    ``drift = (k_slow, h_slow)``, sums the shortfalls of the records still above it, and a record
    below ``depth`` x the level after ``h_slow`` noise units of such decline counts at once (a
    healthy dip drops from its level; a slide declines first). Off by default (``drift=None``):
    ``(1, 6)``, chosen on the calibration half, raised a healthy real run on the held-out half (a
    slow decline, then two low records, then back: docs/RESULTS.md section 5a).
    The onset is the first record of the stretch below ``depth`` x the level (the collapse point as
    the labels read it). Needs ``min_records`` rewards first. Live, any such fall is a failure (a run
    losing its reward is worth stopping); whether a run that never progressed *diverged* (declined
    from the start) is :class:`RewardCrash`'s to tell, and the failure clock reads it so."""

    name = "reward_fall"
    signal = "reward_mean"
    warn_on_streak = False

    def __init__(
        self,
        k: float = 3.0,
        h: float = 40.0,
        depth: float = 0.5,
        window: int = 8,
        min_records: int = 3,
        z_cap: float = 12.0,
        min_drop: float = 0.1,
        sigma_floor: float = 0.01,
        memory: int = 1,
        tiers: Sequence[tuple[float, float]] = ((0.08, 6.0), (0.25, 20.0)),
        freeze: bool = True,
        drift: tuple[float, float] | None = None,
    ) -> None:
        super().__init__(patience=1)
        self.freeze = bool(freeze)
        self.drift = None if drift is None else (float(drift[0]), float(drift[1]))
        self._slow = 0.0
        self.memory = max(1, int(memory))
        self.tiers = tuple((float(f), float(x)) for f, x in tiers)
        if not (k >= 0 and h > 0 and 0 < depth < 1 and window >= 1 and min_records >= 2):
            raise ValueError("need k >= 0, h > 0, 0 < depth < 1, window >= 1, min_records >= 2")
        self.k, self.h, self.depth, self.window = float(k), float(h), float(depth), int(window)
        self.min_records, self.z_cap = int(min_records), float(z_cap)
        self.min_drop, self.sigma_floor = float(min_drop), float(sigma_floor)
        self._hist: deque[float] = deque(maxlen=self.window)
        self._levels: deque[float] = deque(maxlen=self.memory)  # the level after each admitted record
        self._diffs: deque[float] = deque(maxlen=32)
        self._prev = math.nan  # last reward that entered the level
        self._n = 0
        self._prev_samples = 0
        self.level = math.nan
        self.sigma = math.nan
        self.cusum = 0.0
        self._below: tuple[int, int, float] | None = None  # first record of the stretch below depth
        self._pending = 0  # records since the evidence was last 0
        self._need = self.h  # the evidence the last record needed (deeper falls need less)
        self._spread = 0.0  # the run's per-record noise from first differences

    def _check(self, record: StepRecord) -> tuple[bool | None, float]:
        r = record.reward_mean
        if not finite(r):
            return None, math.nan
        r = float(r)
        n = max(int(record.samples) - self._prev_samples, 1) if self._n else max(int(record.batch), 1)
        self._prev_samples = int(record.samples)
        self._n += 1
        if len(self._hist) < self.min_records:
            self._admit(r)
            return False, r
        level = max(self._levels)  # the highest recent level: a slide does not drag it down with it
        if self._diffs and (r < level or self.cusum > 0.0 or self._slow > 0.0):
            # needed only where the evidence can move (a reward at or above its level adds none)
            self._spread = _median(self._diffs) / 0.954
        spread = self._spread
        bern = math.sqrt(max(level * (1 - level), 0.0) / n)
        sigma = max(spread, bern, self.sigma_floor)
        self.level, self.sigma = level, sigma
        z = min((level - r) / sigma, self.z_cap)
        self.cusum = max(0.0, self.cusum + z - self.k)
        low = r < self.depth * level and level - r >= self.min_drop
        need = self.h
        for frac, h in self.tiers:  # a deeper fall needs less evidence
            if r < frac * level:
                need = min(need, h)
        self._pending = 0 if self.cusum == 0.0 else self._pending + 1
        slid = False
        if self.drift is not None:
            # a decline built on records above the fall's depth, before it: a slide, not a dip
            slid = self._slow >= self.drift[1]
            if not low:
                self._slow = max(0.0, self._slow + z - self.drift[0])
        if self.cusum == 0.0:
            self._below = None
        elif low and self._below is None:
            self._below = (int(record.step), int(record.samples), r)
        # the noise follows every record; the level every record but those far below it, and none
        # while evidence builds (evidence that did not count within ``window`` records no longer
        # freezes it)
        far = low and z >= self.k
        thawed = not self.freeze or self._pending == 0 or self._pending > self.window
        self._admit(r, level_too=not far and thawed)
        if not low:
            return False, r
        self._need = need
        if slid and self._below is None:
            self._below = (int(record.step), int(record.samples), r)
        return self.cusum >= need or slid, r

    def _admit(self, r: float, level_too: bool = True) -> None:
        if finite(self._prev):
            self._diffs.append(abs(r - self._prev))
        self._prev = r
        if not level_too:
            return
        self._hist.append(r)
        if len(self._hist) >= self.min_records:
            lv = _median(self._hist)
            self._levels.append(lv)

    def _backdate(self, record: StepRecord) -> tuple[int, int, float] | None:
        return self._below

    def _why(self) -> tuple[float, float]:
        return self.level, self.depth * self.level

    def _describe(self, value: float) -> str:
        return (
            f"reward {value:.4g} fell below {self.depth:g} x its level {self.level:.4g} "
            f"(evidence {self.cusum:.3g} >= {self._need:g} noise units, noise {self.sigma:.3g} a record)"
        )

    def _extra_state(self) -> dict[str, Any]:
        f = finite_or_none
        return {
            "hist": list(self._hist),
            "levels": list(self._levels),
            "diffs": list(self._diffs),
            "prev": f(self._prev),
            "n": self._n,
            "prev_samples": self._prev_samples,
            "level": f(self.level),
            "sigma": f(self.sigma),
            "cusum": self.cusum,
            "pending": self._pending,
            "spread": self._spread,
            "slow": self._slow,
            "below": None if self._below is None else list(self._below),
        }

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        g = float_or
        self._hist = deque((float(x) for x in state.get("hist", [])), maxlen=self.window)
        self._diffs = deque((float(x) for x in state.get("diffs", [])), maxlen=32)
        self._levels = deque((float(x) for x in state.get("levels", [])), maxlen=self.memory)
        self._prev, self._n = g(state.get("prev")), int(state.get("n", 0))
        self._prev_samples = int(state.get("prev_samples", 0))
        self.level, self.sigma = g(state.get("level")), g(state.get("sigma"))
        self.cusum = float(state.get("cusum", 0.0))
        self._pending = int(state.get("pending", 0))
        self._spread = float(state.get("spread", 0.0))
        self._slow = float(state.get("slow", 0.0))
        b = state.get("below")
        self._below = None if b is None else (int(b[0]), int(b[1]), float(b[2]))


_EXTRA_CAP = ("response_length_cap", "max_response_length", "max_completion_length")
_EXTRA_CLIPPED = ("response_clip_ratio", "response_length/clip_ratio", "completions/clipped_ratio")


def _field(record: StepRecord, names: Sequence[str]) -> float:
    """The first finite value among record fields / ``extra`` keys ``names`` (NaN if none)."""
    for n in names:
        v = getattr(record, n, None) if not n.count("/") and n != "extra" else None
        if v is None:
            v = record.extra.get(n)
        if v is not None and finite(v):
            return float(v)
    return math.nan


class _RobustSpike(Detector):
    """A signal far above its recent level: robust z-score of log(value) against the median/MAD of
    the last ``window`` values (refreshed every ``refresh`` values: a slow baseline, O(1) a record).

    Scoring starts after ``warmup_samples`` rollouts and ``warmup`` values (early training moves KL
    and gradient norm fast without anything failing). Values at or below 0 are skipped (consoles
    round small values to 0, and some steps log no gradient); values below ``floor`` count as
    ``floor`` (a KL of 0.001 rising from 0.000 is learning starting, not a 10x blow-up).

    * a **spike** (robust z > ``z`` and ``min_ratio`` x the baseline median) is a warning;
    * a **blow-up** (``blowup_ratio`` x the baseline and at least ``min_value``, or above
      ``max_value``) held ``patience`` records over ``patience_samples`` rollouts is a failure.
      Blow-up values are kept out of the baseline so a sustained blow-up keeps counting; spikes
      enter it, so a signal that drifts up slowly (KL growing as the policy moves) is absorbed.

    Warning-kind subclasses count a streak of spikes instead (no blow-up level).
    """

    field = "grad_norm"
    fields: tuple[str, ...] = ()
    warn_on_streak = False  # spikes warn by themselves

    def __init__(
        self,
        z: float = 6.0,
        window: int = 200,
        warmup: int = 8,
        patience: int = 5,
        max_value: float | None = None,
        refresh: int = 10,
        warmup_samples: float = 1024,
        min_ratio: float = 2.0,
        blowup_ratio: float = 10.0,
        min_value: float | None = None,
        floor: float = 0.0,
        patience_samples: float = 2048.0,
    ) -> None:
        super().__init__(patience, patience_samples)
        if not min_ratio >= 1:
            raise ValueError(f"min_ratio must be >= 1, got {min_ratio}")
        if not blowup_ratio >= min_ratio:
            raise ValueError(f"blowup_ratio must be >= min_ratio, got {blowup_ratio}")
        self.min_ratio, self.blowup_ratio = float(min_ratio), float(blowup_ratio)
        if not warmup_samples >= 0:
            raise ValueError(f"warmup_samples must be >= 0, got {warmup_samples}")
        self.warmup_samples = float(warmup_samples)
        if window < warmup or warmup < 3:
            raise ValueError(f"need 3 <= warmup <= window, got warmup={warmup}, window={window}")
        if refresh < 1:
            raise ValueError(f"refresh must be >= 1, got {refresh}")
        self.z, self.window, self.warmup, self.max_value = float(z), int(window), int(warmup), max_value
        self.min_value, self.floor = min_value, float(floor)
        self.refresh = int(refresh)
        self._hist: deque[float] = deque(maxlen=self.window)
        self._stale = 0
        self._med = math.nan
        self._mad = math.nan
        self.last_z = math.nan
        self._spiking = False

    @property
    def signal(self) -> str:  # type: ignore[override]
        return self.field

    def _value(self, record: StepRecord) -> float:
        return _field(record, self.fields or (self.field,))

    def _baseline(self) -> tuple[float, float]:
        if self._stale > 0 or not finite(self._med):
            if self._stale >= self.refresh or not finite(self._med):
                h = np.fromiter(self._hist, float, len(self._hist))
                self._med = float(np.median(h))
                # floor: a flat history must not turn tiny wiggles into spikes
                self._mad = max(float(np.median(np.abs(h - self._med))) * 1.4826, 1e-3)
                self._stale = 0
        return self._med, self._mad

    def _why(self) -> tuple[float, float]:
        if not finite(self._med):
            return math.nan, math.nan
        base = math.exp(self._med)
        if self.kind == "warning":
            return base, max(self.min_ratio * base, math.exp(self._med + self.z * self._mad))
        thr = self.blowup_ratio * base
        if self.min_value is not None:
            thr = max(thr, self.min_value)
        return base, thr

    def _check(self, record: StepRecord) -> tuple[bool | None, float]:
        v = self._value(record)
        if not finite(v) or v <= 0:
            return None, math.nan
        if self.max_value is not None and v > self.max_value:
            self.last_z = math.inf
            return True, v
        lv = math.log(max(v, self.floor, 1e-12))
        spike = blowup = False
        if len(self._hist) >= self.warmup and record.samples >= self.warmup_samples:
            med, mad = self._baseline()
            self.last_z = (lv - med) / mad
            spike = self.last_z > self.z and lv - med > math.log(self.min_ratio)
            blowup = lv - med > math.log(self.blowup_ratio) and (
                self.min_value is None or v >= self.min_value
            )
        if self.kind == "warning":
            self._hist.append(lv)
            self._stale += 1
            return spike, v
        if spike and not self._spiking:
            base = math.exp(self._med)
            self._warn(
                record,
                v,
                f"{self.field} {v:.4g} spiked to {math.exp(lv - self._med):.3g} x its "
                f"baseline {base:.4g} (robust z {self.last_z:.3g} > {self.z:g})",
                base,
                max(self.min_ratio * base, math.exp(self._med + self.z * self._mad)),
            )
        self._spiking = spike
        if not blowup:
            self._hist.append(lv)
            self._stale += 1
        return blowup, v

    def _describe(self, value: float) -> str:
        base, thr = self._why()
        if self.max_value is not None and value > self.max_value:
            return f"{self.field} {value:.4g} above max_value {self.max_value:g}"
        what = "spiked" if self.kind == "warning" else "blew up"
        return f"{self.field} {value:.4g} {what} (baseline {base:.4g}, threshold {thr:.4g})"

    def _extra_state(self) -> dict[str, Any]:
        f = finite_or_none
        return {
            "hist": list(self._hist),
            "last_z": f(self.last_z),
            "stale": self._stale,
            "med": f(self._med),
            "mad": f(self._mad),
            "spiking": self._spiking,
        }

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        g = float_or
        self._hist = deque((float(x) for x in state["hist"]), maxlen=self.window)
        self.last_z, self._med, self._mad = g(state["last_z"]), g(state["med"]), g(state["mad"])
        self._stale = int(state["stale"])
        self._spiking = bool(state.get("spiking", False))


class GradNormSpike(_RobustSpike):
    """Gradient norm far above its recent level. A spike is a warning; a failure only when it
    stays ``blowup_ratio`` x the baseline for ``patience`` records and ``patience_samples``
    rollouts (exact zeros, logged when a step was skipped or rounded, are ignored)."""

    name = "grad_norm_spike"
    field = "grad_norm"


class KLBlowup(_RobustSpike):
    """KL to the reference (or PPO KL) far above its recent level. A spike, or KL rising from ~0
    as learning starts (values below ``floor`` = 0.001 count as 0.001), is a warning; a failure
    is a sustained blow-up: ``blowup_ratio`` x the baseline and at least ``min_value`` (1.0 nat:
    healthy runs in verl/TRL logs stay well below), or above ``max_value``."""

    name = "kl_blowup"
    field = "kl"

    def __init__(
        self,
        z: float = 6.0,
        window: int = 200,
        warmup: int = 8,
        patience: int = 5,
        max_value: float | None = None,
        refresh: int = 10,
        warmup_samples: float = 1024,
        min_ratio: float = 2.0,
        blowup_ratio: float = 10.0,
        min_value: float | None = 1.0,
        floor: float = 1e-3,
        patience_samples: float = 2048.0,
    ) -> None:
        super().__init__(
            z,
            window,
            warmup,
            patience,
            max_value,
            refresh,
            warmup_samples,
            min_ratio,
            blowup_ratio,
            min_value,
            floor,
            patience_samples,
        )


class _WarningSpike(_RobustSpike):
    """A :class:`_RobustSpike` that only warns (no blow-up failure); subclasses set ``field``
    and ``default_floor`` (the smallest level that counts, in the signal's units)."""

    kind = "warning"
    default_floor = 0.0

    def __init__(
        self,
        z: float = 6.0,
        window: int = 200,
        warmup: int = 8,
        patience: int = 3,
        refresh: int = 10,
        warmup_samples: float = 1024,
        min_ratio: float = 3.0,
        floor: float | None = None,
        patience_samples: float = 0.0,
    ) -> None:
        super().__init__(
            z=z,
            window=window,
            warmup=warmup,
            patience=patience,
            refresh=refresh,
            warmup_samples=warmup_samples,
            min_ratio=min_ratio,
            blowup_ratio=min_ratio,
            floor=self.default_floor if floor is None else floor,
            patience_samples=patience_samples,
        )


class ClipRatioRise(_WarningSpike):
    """Warning: the PPO clip fraction rose far above its recent level (updates pushing against
    the trust region; precedes many collapses)."""

    name = "clip_ratio_rise"
    field = "clip_frac"
    default_floor = 1e-3


class LogProbMismatch(_WarningSpike):
    """Warning: the gap between the trainer's and the rollout engine's log-probs of the same tokens
    rose far above its recent level (verl ``training/rollout_probs_diff_mean``, a ``mismatch_kl``
    or ``rollout_corr/log_ppl_abs_diff``, whichever the log has): off-policy drift that breaks
    the importance ratio."""

    name = "logprob_mismatch"
    field = "logprob_mismatch"
    fields = (
        "logprob_mismatch",
        "training/rollout_probs_diff_mean",
        "rollout_probs_diff_mean",
        "mismatch_kl",
        "mismatch_kl/mean",
        "rollout_corr/log_ppl_abs_diff",
    )
    default_floor = 1e-6


class EntropySurge(_EarlyLevel):
    """Warning: entropy ``ratio`` x above its early level (median of the first ``warmup_samples``
    rollouts) for ``patience`` records: the policy is coming apart (collapsing runs often
    show entropy blowing up while responses run to the length cap)."""

    name = "entropy_surge"
    signal = "entropy"
    kind = "warning"

    def __init__(
        self,
        ratio: float = 2.0,
        warmup: int = 3,
        patience: int = 3,
        warmup_samples: float = 512,
        warmup_ratio: float | None = 3.0,
    ) -> None:
        super().__init__(patience, warmup=warmup, warmup_samples=warmup_samples)
        if not ratio > 1 or (warmup_ratio is not None and not warmup_ratio > 1):
            raise ValueError(f"ratio and warmup_ratio must be > 1, got {ratio}, {warmup_ratio}")
        self.ratio = float(ratio)
        self.warmup_ratio = warmup_ratio
        self._prior = False  # the last check was the warm-up's prior

    def _start(self) -> float:
        """Median of the first three entropies: what the warm-up's prior judges against."""
        return float(statistics.median(self._early[:3]))

    def _check(self, record: StepRecord) -> tuple[bool | None, float]:
        h = record.entropy
        if not finite(h):
            return None, math.nan
        self._prior = False
        if not finite(self.reference) and self.warmup_ratio is not None and len(self._early) >= 3:
            # inside the warm-up its own median would absorb a surge: judged against the first
            # records by an absolute ratio (healthy calibration warm-ups rose at most 2.5x)
            if h > self.warmup_ratio * self._start():
                self._prior = True
                return True, float(h)
        if not self._learn_level(h, record):
            return False, float(h)
        return h > self.ratio * self.reference, float(h)

    def _why(self) -> tuple[float, float]:
        if self._prior and self.warmup_ratio is not None:
            return self._start(), self.warmup_ratio * self._start()
        return self.reference, self.ratio * self.reference

    def _describe(self, value: float) -> str:
        if self._prior:
            return (
                f"entropy {value:.4g} above {self.warmup_ratio:g} x its first records' {self._start():.4g} "
                "(inside the warm-up)"
            )
        return f"entropy {value:.4g} above {self.ratio:g} x its early level {self.reference:.4g}"

    def _extra_state(self) -> dict[str, Any]:
        return {**super()._extra_state(), "prior": self._prior}

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        super()._load_extra(state)
        self._prior = bool(state.get("prior", False))


class ResponseLengthSurge(_EarlyLevel):
    """Warning: responses surging (mean length ``surge_ratio`` x its early level) or pinned at the
    length cap (mean length at ``pin_fraction`` of ``cap``, or a clipped/truncated fraction of
    ``clipped`` or more). ``cap`` defaults to the record's ``extra['response_length_cap']`` (or
    ``max_completion_length``); the clipped fraction is read from verl's
    ``response_length/clip_ratio`` or TRL's ``completions/clipped_ratio`` where logged."""

    name = "response_length"
    signal = "response_length"
    kind = "warning"

    def __init__(
        self,
        surge_ratio: float = 1.5,
        pin_fraction: float = 0.9,
        clipped: float = 0.5,
        cap: float | None = None,
        warmup: int = 3,
        patience: int = 3,
        warmup_samples: float = 512,
    ) -> None:
        super().__init__(patience, warmup=warmup, warmup_samples=warmup_samples)
        if not surge_ratio > 1:
            raise ValueError(f"surge_ratio must be > 1, got {surge_ratio}")
        if not 0 < pin_fraction <= 1 or not 0 < clipped <= 1:
            raise ValueError("pin_fraction and clipped must be in (0, 1]")
        self.surge_ratio, self.pin_fraction, self.clipped, self.cap = surge_ratio, pin_fraction, clipped, cap
        self._what = ""
        self._thr = math.nan

    def _check(self, record: StepRecord) -> tuple[bool | None, float]:
        n = record.response_length
        clip = _field(record, _EXTRA_CLIPPED)
        if not finite(n) and not finite(clip):
            return None, math.nan
        cap = self.cap if self.cap is not None else _field(record, _EXTRA_CAP)
        if finite(clip) and clip >= self.clipped:
            self._what, self._thr = f"{clip:.3g} of responses clipped at the length cap", self.clipped
            return True, float(n) if finite(n) else clip
        if finite(n) and finite(cap) and cap > 0 and n >= self.pin_fraction * cap:
            self._what = f"mean response length at {n / cap:.3g} of the cap {cap:g}"
            self._thr = self.pin_fraction * cap
            return True, float(n)
        if not finite(n):
            return False, clip
        if not self._learn_level(n, record):
            return False, float(n)
        if n > self.surge_ratio * self.reference:
            self._what = f"surged above {self.surge_ratio:g} x its early level"
            self._thr = self.surge_ratio * self.reference
            return True, float(n)
        return False, float(n)

    def _why(self) -> tuple[float, float]:
        return self.reference, self._thr

    def _describe(self, value: float) -> str:
        return f"response length {value:.4g}: {self._what}"

    def _extra_state(self) -> dict[str, Any]:
        return {
            **super()._extra_state(),
            "what": self._what,
            "thr": finite_or_none(self._thr),
        }

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        super()._load_extra(state)
        self._what = str(state.get("what", ""))
        self._thr = float_or(state.get("thr"))


class ZeroVarianceGroups(Detector):
    """Fraction of groups whose rewards are all equal above ``threshold``: those groups give GRPO
    no advantage signal. With ``group_size`` and ``excess`` it also alarms when the fraction
    exceeds the binomial expectation p^g + (1-p)^g at the current reward by ``excess``.
    ``warning_only`` (as in :func:`default_detectors`): a warning, not a failure (easy problems
    legitimately saturate)."""

    name = "zero_variance_groups"
    signal = "frac_zero_std"

    def __init__(
        self,
        threshold: float = 0.8,
        patience: int = 3,
        group_size: int | None = None,
        excess: float | None = None,
        warning_only: bool = False,
    ) -> None:
        super().__init__(patience)
        if not 0 < threshold <= 1:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        if excess is not None and not group_size:
            raise ValueError("excess needs group_size")
        self.threshold, self.group_size, self.excess = threshold, group_size, excess
        self.warning_only = bool(warning_only)
        if self.warning_only:
            self.kind = "warning"
        self._expected = math.nan

    def _check(self, record: StepRecord) -> tuple[bool | None, float]:
        f = record.frac_zero_std
        if not finite(f):
            return None, math.nan
        hit = f > self.threshold
        self._expected = math.nan
        if self.excess is not None and self.group_size and finite(record.reward_mean):
            p = min(max(record.reward_mean, 0.0), 1.0)
            self._expected = expected_zero_std_fraction(p, int(self.group_size))
            hit = hit or f - self._expected > self.excess
        return hit, float(f)

    def _why(self) -> tuple[float, float]:
        thr = self.threshold
        if finite(self._expected) and self.excess is not None:
            thr = min(thr, self._expected + float(self.excess))
        return self._expected, thr

    def _describe(self, value: float) -> str:
        return f"fraction of zero-std groups {value:.3g}"


class ForecastWarning(Detector):
    """The live failure forecast as a warning kind: the entropy's trend (as the two-clock policy
    configures it, :func:`~rlvr_schedule.clocks.failure.forecast.policy_forecast`) points at a
    collapse *still ahead*, with less than a quarter of the way to it left.

    It says nothing before it has skill: before 2048 rollouts of evidence and a confident slope
    (the forecast's own ``warns``), and never "collapse now": a trend already past its threshold
    is a low entropy plateau as often as a collapse (healthy runs end at a few percent of their
    early entropy), which the entropy detector judges (its warning is a diagnostic)."""

    name = "failure_forecast"
    signal = "entropy"
    kind = "warning"

    def __init__(self) -> None:
        super().__init__(patience=1)
        self.forecast = policy_forecast("entropy")

    def _check(self, record: StepRecord) -> tuple[bool | None, float]:
        stf = self.forecast.update(record)
        return bool(stf > 0 and math.isfinite(stf) and self.forecast.warns()), stf

    def _why(self) -> tuple[float, float]:
        return self.forecast.reference, self.forecast.threshold

    def _describe(self, value: float) -> str:
        fc = self.forecast
        return (
            f"failure forecast: the entropy's trend reaches {fc.fraction:g} x its early level in "
            f"{value:.4g} rollouts (on {fc.samples - fc.start_samples} rollouts of evidence)"
        )

    def _extra_state(self) -> dict[str, Any]:
        return {"forecast": self.forecast.state_dict()}

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        if state.get("forecast") is not None:
            self.forecast.load_state_dict(state["forecast"])


def default_detectors(forecast: bool = False) -> list[Detector]:
    """The one detector set of every entry point (``fit``, ``report``, ``watch``, the driver and so
    every adapter, the collapse watch): whatever a detector may say is computed everywhere, and
    which warning kinds are *raised* to a host is one rule, the watch's ``RAISED_WARNINGS``.

    The live failure forecast (:class:`ForecastWarning`) is out of it everywhere (``forecast=True``
    puts it in): it precedes none of the recorded collapses (real or trainer), fires on healthy real
    runs, and costs as much per record as a detector (docs/RESULTS.md section 5a); the policy keeps
    it as an advisory note and ``watch`` prints its forecast in the status line.

    Failure detectors (entropy exhausted once the reward turned down or the entropy fell below
    4% of its early level, reward crash, sustained grad-norm and KL blow-ups) and warning detectors
    (entropy surge, response length, clip ratio, log-prob mismatch, zero-variance groups). Warm-ups
    are counted in rollouts where a sweep compares batches: the spike detectors score from 1024
    rollouts (at least 8 values), the entropy's early level and the reward's start level are taken
    over the first 512, and the reward is smoothed over 512 rollouts (deep fall, fall from the
    peak, fall below half the start) and 4000 (fall from the best), staying down 5 records and 256
    rollouts to count. Thresholds were set on the calibration half of tests/data/real/runs."""
    return [
        EntropyCollapse(reward_gate=True, deep_fraction=0.04),
        RewardCrash(),
        RewardFall(),
        GradNormSpike(),
        KLBlowup(),
        EntropySurge(),
        ResponseLengthSurge(),
        ClipRatioRise(),
        LogProbMismatch(),
        ZeroVarianceGroups(warning_only=True),
        *([ForecastWarning()] if forecast else []),
    ]
