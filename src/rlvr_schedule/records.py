"""Canonical data that flows through rlvr-schedule.

Every framework logs under its own names; ingestion maps them onto :class:`StepRecord`
(one optimizer update), groups records into a :class:`Run`, and schedulers answer each
record with a :class:`Decision` (the rollout batch and LR for the next update).
All sample counts are *rollouts* (prompts x group size), the unit both clocks run in.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "METRIC_FIELDS",
    "StepRecord",
    "Run",
    "Stage",
    "Decision",
    "BatchSchedule",
    "WatchAlarm",
]

#: Optional float metrics of a record (NaN when the host did not log them).
METRIC_FIELDS: tuple[str, ...] = (
    "reward_mean",
    "reward_std",
    "entropy",
    "kl",
    "grad_norm",
    "clip_frac",
    "response_length",
    "frac_zero_std",
    "grad_norm_micro",
)


@dataclass(slots=True)
class StepRecord:
    """One optimizer update.

    ``samples`` is cumulative rollouts consumed *including* this update; ``batch`` is rollouts
    per optimizer update (prompts x group size). ``grad_norm`` is the full-batch gradient norm
    (before clipping); ``grad_norm_micro`` the norm of one micro-batch of ``micro_batch``
    rollouts at the same parameters: together they feed the two-batch gradient-noise estimate.
    ``extra`` keeps unknown metrics so nothing logged is lost.
    """

    step: int
    samples: int
    batch: int
    lr: float
    reward_mean: float = math.nan
    reward_std: float = math.nan
    entropy: float = math.nan
    kl: float = math.nan
    grad_norm: float = math.nan
    clip_frac: float = math.nan
    response_length: float = math.nan
    frac_zero_std: float = math.nan
    grad_norm_micro: float = math.nan
    micro_batch: int | None = None
    extra: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; NaN metrics are dropped (absent means not logged)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "extra":
                out.update({k: x for k, x in v.items() if k not in out})
            elif v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            else:
                out[f.name] = v
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StepRecord:
        """Inverse of :meth:`to_dict` for canonical names; unknown keys go to ``extra``."""
        known = {f.name for f in fields(cls)} - {"extra"}
        kw: dict[str, Any] = {k: d[k] for k in known if k in d and d[k] is not None}
        extra = {k: float(v) for k, v in d.items() if k not in known and _is_number(v)}
        for k in ("step", "samples", "batch"):
            if k in kw:
                kw[k] = int(kw[k])
        if kw.get("micro_batch") is not None:
            kw["micro_batch"] = int(kw["micro_batch"])
        for k in METRIC_FIELDS + ("lr",):
            if k in kw:
                kw[k] = float(kw[k])
        return cls(**kw, extra=extra)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclass
class Run:
    """The records of one training run, in step order.

    ``batch`` and ``lr`` are the run's *first* values (its starting stage); a run that switched
    batch mid-way exposes its per-step values through :meth:`array`. ``meta`` holds what a reader
    learnt beside the records (where the batch came from, the printed config, the format).
    """

    records: list[StepRecord]
    name: str = "run"
    source: str | None = None  # file the run was read from, for error messages
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.records:
            raise ValueError(f"run {self.name!r} has no records")

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[StepRecord]:
        return iter(self.records)

    @property
    def batch(self) -> int:
        return self.records[0].batch

    @property
    def lr(self) -> float:
        return self.records[0].lr

    @property
    def constant_batch(self) -> bool:
        """A constant-batch sweep point: the batch never changed, and the run is not a schedule's
        (``meta["schedule"]``) that happened to make no switch: counting that as a sweep point
        would count its seed twice beside the constant run it reproduces."""
        return not self.meta.get("schedule", False) and all(r.batch == self.batch for r in self.records)

    def array(self, name: str) -> np.ndarray:
        """A per-step column as a float array (NaN where missing; ``extra`` keys allowed)."""
        if name in ("step", "samples", "batch", "lr", "micro_batch") or name in METRIC_FIELDS:
            vals = [getattr(r, name) for r in self.records]
            return np.array([math.nan if v is None else v for v in vals], dtype=float)
        return np.array([r.extra.get(name, math.nan) for r in self.records], dtype=float)

    @property
    def samples(self) -> np.ndarray:
        return self.array("samples")


@dataclass(frozen=True, slots=True)
class Stage:
    """One stage of a schedule: train at ``batch`` rollouts per update with ``lr``.

    ``start_samples`` is where the stage began; ``until_samples`` where a static schedule
    ends it (None: open-ended, or decided online). ``reason`` says why it was entered.
    """

    batch: int
    lr: float
    reason: str = "initial"
    start_samples: int = 0
    until_samples: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Decision:
    """A scheduler's answer to a record: what the *next* optimizer update should use.

    ``switched`` is True exactly when batch or lr differ from the previous decision; hosts
    apply a decision only then, at a boundary where the framework stays consistent. ``trigger``
    is the kind of the trigger the decision answers (the two-clock policy's
    :data:`~rlvr_schedule.policy.triggers.KINDS`; "" where none fired): what code decides by.
    ``reason`` is free text for people; no code reads it.
    """

    step: int
    samples: int
    batch: int
    lr: float
    stage: int
    switched: bool = False
    reason: str = ""
    trigger: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class BatchSchedule(Protocol):
    """What the synthetic environment and the testing helpers drive: in the style of
    ``torch.optim.lr_scheduler``.

    ``step(record)`` consumes the record of the update just done and returns the decision for
    the next one; the same records give the same decisions, also after ``load_state_dict``. The
    built-in schedules (:class:`rlvr_schedule.policy.base.Schedule`) also split ``step`` into
    ``propose`` and ``commit``/``hold``, which :class:`rlvr_schedule.driver.ScheduleDriver` runs
    around a host's ``apply``; a driver is itself a ``BatchSchedule``.
    """

    @property
    def current(self) -> Stage: ...

    @property
    def stages(self) -> Sequence[Stage]: ...

    def step(self, record: StepRecord) -> Decision: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


@dataclass(frozen=True)
class WatchAlarm:
    """One raised alarm: ``kind`` "failure" (collapse begun) or "warning" (a precursor, or the
    failure clock at its lower bound); ``name`` the detector (or ``failure_clock``); ``step`` and
    ``samples`` where it was raised (the record that confirmed it: what a host acts on), ``onset_step``
    / ``onset_samples`` where its condition began; ``message`` says why; ``checkpoint`` the host's
    checkpoint kept for it (the newest saved before the onset, where the host said which it saved).

    ``to_dict`` names both ends plainly (``onset_step``/``onset_rollouts``,
    ``raised_step``/``raised_rollouts``): the failure clock reads the onset, a host can only act at
    the raise, and their distance is the watch's latency."""

    kind: str
    name: str
    step: int
    samples: int
    onset_step: int
    onset_samples: int
    message: str
    checkpoint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "onset_rollouts": self.onset_samples,
            "raised_step": self.step,
            "raised_rollouts": self.samples,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> WatchAlarm:
        """Inverse of :meth:`to_dict` (its derived keys dropped)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def line(self) -> str:
        """One console line: what, where it was raised and, where it began earlier, since when."""
        since = (
            f" (began at step {self.onset_step}, {self.onset_samples:,} rollouts)"
            if self.onset_step != self.step
            else ""
        )
        kept = f"; kept checkpoint {self.checkpoint}" if self.checkpoint else ""
        msg = self.message
        if msg.lower().startswith(f"{self.kind}: "):  # say the kind once
            msg = msg[len(self.kind) + 2 :]
        return (
            f"rlvr-schedule {self.kind} at step {self.step} ({self.samples:,} rollouts){since}: {msg}{kept}"
        )
