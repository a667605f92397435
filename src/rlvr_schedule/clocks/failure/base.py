"""Alarms and the detector base class: a detector watches one signal in a record stream and
raises an :class:`Alarm` once its condition held for ``patience`` records and ``patience_samples``
rollouts; the alarm carries the *onset* (first record of the streak) so the failure point is not
delayed by the confirmation, its kind (failure, divergence, warning) and why."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from rlvr_schedule.clocks._stats import finite
from rlvr_schedule.records import StepRecord

__all__ = ["Alarm", "Detector", "expected_group_variance", "expected_zero_std_fraction"]


def finite_or_none(x: float | None) -> float | None:
    """A float for a detector's state: None stands for NaN and +-inf (strict JSON); the loader
    gives each field its own stand-in back (:func:`float_or`)."""
    return x if finite(x) else None


def float_or(x: Any, default: float = math.nan) -> float:
    """Inverse of :func:`finite_or_none`: ``default`` (NaN unless the field starts at +-inf) for None."""
    return default if x is None else float(x)


@dataclass(frozen=True, slots=True)
class Alarm:
    """A condition a detector saw, and why: the ``signal`` (record field), its ``value`` at the
    onset, the ``baseline`` it was judged against and the ``threshold`` it crossed, at ``step`` /
    ``samples`` (rollouts) of the onset (first record of the streak); ``confirmed_step`` /
    ``confirmed_samples`` where the streak was long enough to count.

    ``kind``: ``"failure"`` (onset of collapse: the failure clock reads it), ``"divergence"`` (a
    run that never progressed and fell from its start: reported, never a failure-clock reading)
    or ``"warning"`` (a transient or early sign: reported with its lead, never the failure clock).
    """

    name: str
    step: int
    samples: int
    value: float
    message: str
    confirmed_step: int = -1
    confirmed_samples: int = -1
    kind: str = "failure"
    signal: str = ""
    baseline: float = math.nan
    threshold: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN written as None), with both ends named plainly: ``onset_step`` /
        ``onset_rollouts`` (the failure clock's reading) and ``raised_step`` / ``raised_rollouts``
        (where it was confirmed: the record a live host would have acted on)."""
        d = {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()
        }
        d["onset_step"], d["onset_rollouts"] = self.step, self.samples
        d["raised_step"], d["raised_rollouts"] = self.confirmed_step, self.confirmed_samples
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Alarm:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        for k in ("value", "baseline", "threshold"):
            if kw.get(k, 0.0) is None:
                kw[k] = math.nan
        return cls(**kw)


def expected_group_variance(p: float, g: int) -> float:
    """Expected within-group (sample) variance of binary rewards with success rate p, group size g:
    p(1-p)(g-1)/g. GRPO's advantage signal scales with it."""
    return p * (1 - p) * (g - 1) / g


def expected_zero_std_fraction(p: float, g: int) -> float:
    """Fraction of groups of g binary rewards that are all equal (zero std) at success rate p."""
    return p**g + (1 - p) ** g


class Detector:
    """Base class: subclasses implement ``_check(record) -> (triggered | None, value)``
    (None: the record does not carry the signal, the streak is left as it is) and may override
    ``_why() -> (baseline, threshold)`` so every alarm says what the value was judged against.

    A streak of triggered records counts once it holds ``patience`` records *and* covers
    ``patience_samples`` rollouts (a sustained condition, not a blip, at any batch); it is then an
    alarm of the detector's ``kind``. ``update`` returns failure and divergence alarms only (what
    a policy may act on); warnings go to ``warnings`` (the first ``max_warnings``, all counted in
    ``n_warnings``). A failure-kind detector also warns at the first record of every streak, so a
    failure comes with an earlier warning and a blip that recovers leaves only the warning.
    """

    name = "detector"
    signal = ""
    kind = "failure"
    warn_on_streak = True  # a failure-kind streak warns at its first record
    max_warnings = 50

    def __init__(self, patience: int = 3, patience_samples: float = 0.0) -> None:
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}")
        if not patience_samples >= 0:
            raise ValueError(f"patience_samples must be >= 0, got {patience_samples}")
        self.patience = int(patience)
        self.patience_samples = float(patience_samples)
        self._streak = 0
        self._fired = False
        # onset of the current streak: step, samples, value, baseline, threshold
        self._onset: tuple[int, int, float, float, float] | None = None
        self.first_alarm: Alarm | None = None
        # whether the first alarm, a failure live, fell from the start of a run that never progressed
        # (what a sweep's fit reads as a divergence: see :meth:`_fell_from_start`)
        self.first_from_start = False
        self.n_alarms = 0
        self.warnings: list[Alarm] = []
        self.n_warnings = 0

    def _check(self, record: StepRecord) -> tuple[bool | None, float]:  # pragma: no cover
        raise NotImplementedError

    def _why(self) -> tuple[float, float]:
        """(baseline, threshold) the last checked value was judged against."""
        return math.nan, math.nan

    def _alarm_kind(self) -> str:
        return self.kind

    def _fell_from_start(self) -> bool:
        """Whether the failure alarm being confirmed is a fall from the start of a run that never
        progressed. The live alarm stays a failure (a run losing its reward is worth stopping), but
        a sweep's fit reads it as a divergence, not a failure-clock reading."""
        return False

    def _confirmable(self) -> bool:
        """Whether a streak that is long enough may count now (a subclass can ask for more)."""
        return True

    def _backdate(self, record: StepRecord) -> tuple[int, int, float] | None:
        """An earlier onset (step, samples, value) for a streak starting at ``record``, from records
        already seen (a smoothed signal crosses after the raw one did); None: ``record`` itself."""
        return None

    def _describe(self, value: float) -> str:
        return f"{self.name}: value {value:.4g}"

    def _warn(
        self,
        record: StepRecord,
        value: float,
        text: str,
        baseline: float = math.nan,
        threshold: float = math.nan,
    ) -> Alarm:
        """Record a warning at ``record`` (kept in ``warnings``; never returned by ``update``)."""
        w = Alarm(
            self.name,
            int(record.step),
            int(record.samples),
            float(value),
            text,
            int(record.step),
            int(record.samples),
            "warning",
            self.signal,
            float(baseline),
            float(threshold),
        )
        self.n_warnings += 1
        if len(self.warnings) < self.max_warnings:
            self.warnings.append(w)
        return w

    def update(self, record: StepRecord) -> Alarm | None:
        """Consume one record; a failure (or divergence) :class:`Alarm` exactly when a streak
        first counts as sustained, else None."""
        hit, value = self._check(record)
        if hit is None:
            return None
        if not hit:
            self._streak = 0
            self._onset = None
            self._fired = False
            return None
        self._streak += 1
        if self._streak == 1:
            base, thr = self._why()
            self._onset = (int(record.step), int(record.samples), float(value), float(base), float(thr))
            back = self._backdate(record)
            if back is not None:
                self._onset = (back[0], back[1], back[2], float(base), float(thr))
            if (
                self.kind != "warning"
                and self.warn_on_streak
                and not (self.patience == 1 and self.patience_samples <= record.batch)
            ):
                self._warn(record, value, f"{self._describe(value)} (not yet sustained)", base, thr)
        if self._fired:
            return None
        step, samples, v0, base, thr = self._onset  # type: ignore[misc]
        if self._streak < self.patience or record.samples - samples + record.batch < self.patience_samples:
            return None
        if not self._confirmable():
            return None
        self._fired = True
        kind = self._alarm_kind()
        alarm = Alarm(
            self.name,
            step,
            samples,
            v0,
            self._describe(v0) + (f"; held {self._streak} records" if self._streak > 1 else ""),
            int(record.step),
            int(record.samples),
            kind,
            self.signal,
            base,
            thr,
        )
        if kind == "warning":
            self.n_warnings += 1
            if len(self.warnings) < self.max_warnings:
                self.warnings.append(alarm)
            return None
        self.n_alarms += 1
        if self.first_alarm is None:
            self.first_alarm = alarm
            self.first_from_start = kind == "failure" and self._fell_from_start()
        return alarm

    # state: base fields + subclass `_extra_state`
    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra(self, state: Mapping[str, Any]) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        onset = (
            None
            if self._onset is None
            else [self._onset[0], self._onset[1]] + [finite_or_none(x) for x in self._onset[2:]]
        )
        return {
            "name": self.name,
            "patience": self.patience,
            "patience_samples": self.patience_samples,
            "streak": self._streak,
            "fired": self._fired,
            "onset": onset,
            "first_alarm": None if self.first_alarm is None else self.first_alarm.to_dict(),
            "first_from_start": self.first_from_start,
            "n_alarms": self.n_alarms,
            "warnings": [w.to_dict() for w in self.warnings],
            "n_warnings": self.n_warnings,
            **self._extra_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("name", self.name) != self.name:
            raise ValueError(f"state of {state.get('name')!r} loaded into {self.name!r}")
        self.patience = int(state["patience"])
        self.patience_samples = float(state.get("patience_samples", 0.0))
        self._streak = int(state["streak"])
        o = state["onset"]
        if o is None:
            self._onset = None
        else:  # states saved before alarms said why have (step, samples, value)
            o = list(o) + [None] * (5 - len(o))
            self._onset = (int(o[0]), int(o[1]), float_or(o[2]), float_or(o[3]), float_or(o[4]))
        # a streak saved before the sustained-in-rollouts rule had fired once it reached patience
        self._fired = bool(state.get("fired", self._streak >= self.patience))
        fa = state["first_alarm"]
        self.first_alarm = None if fa is None else Alarm.from_dict(fa)
        self.first_from_start = bool(state.get("first_from_start", False))
        self.n_alarms = int(state["n_alarms"])
        self.warnings = [Alarm.from_dict(w) for w in state.get("warnings", [])]
        self.n_warnings = int(state.get("n_warnings", len(self.warnings)))
        self._load_extra(state)
