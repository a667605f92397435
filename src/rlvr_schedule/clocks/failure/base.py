"""Alarms and the detector base class: a detector watches one signal in a record stream and
raises an :class:`Alarm` once its condition held for ``patience`` consecutive records; the alarm
carries the *onset* (first record of the streak) so the failure point is not delayed by the
confirmation."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from rlvr_schedule.records import StepRecord

__all__ = ["Alarm", "Detector", "expected_group_variance", "expected_zero_std_fraction"]

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
