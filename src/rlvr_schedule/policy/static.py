"""A fixed multi-step schedule: batch and LR change at given sample counts.

What the planner produces from a sweep and what a user writes by hand in YAML; the host
drives it like the online scheduler (``step(record) -> Decision``), so switching to the
two-clock policy later changes one line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rlvr_schedule.errors import ConfigError
from rlvr_schedule.policy.base import Schedule
from rlvr_schedule.policy.constraints import BatchConstraints
from rlvr_schedule.records import Decision, Stage, StepRecord

__all__ = ["StaticSchedule"]

_STATE_KIND = "static"


def _as_stage(s: Stage | Mapping[str, Any], i: int) -> Stage:
    if isinstance(s, Stage):
        return s
    if isinstance(s, Mapping):
        unknown = set(s) - {"batch", "lr", "until_samples", "reason", "start_samples"}
        if unknown:
            raise ConfigError(f"unknown key(s) {sorted(unknown)}", field=f"stages[{i}]")
        for k in ("batch", "lr"):
            if k not in s:
                raise ConfigError("is required", field=f"stages[{i}].{k}")
        return Stage(
            batch=s["batch"], lr=s["lr"], reason=s.get("reason", ""), until_samples=s.get("until_samples")
        )
    raise ConfigError(f"must be a Stage or a mapping, got {type(s).__name__}", field=f"stages[{i}]")


def validate_stages(
    stages: Sequence[Stage], constraints: BatchConstraints | None = None, *, source: str | None = None
) -> None:
    """ConfigError naming the stage field for anything a host could not run."""
    if not stages:
        raise ConfigError("needs at least one stage", source=source, field="stages")
    prev_until = 0
    for i, st in enumerate(stages):
        f = f"stages[{i}]"
        if isinstance(st.batch, bool) or not isinstance(st.batch, int) or st.batch < 1:
            raise ConfigError(
                f"must be a positive integer, got {st.batch!r}", source=source, field=f + ".batch"
            )
        if constraints is not None and not constraints.is_valid(st.batch):
            raise ConfigError(
                f"batch {st.batch} is not runnable: it must be a multiple of {constraints.multiple} "
                f"(group_size {constraints.group_size}"
                + (f", divisor {constraints.divisor}" if constraints.divisor else "")
                + f") within [{constraints.lowest}, {constraints.highest}]",
                source=source,
                field=f + ".batch",
            )
        if (
            isinstance(st.lr, bool)
            or not isinstance(st.lr, (int, float))
            or not math.isfinite(st.lr)
            or st.lr < 0
        ):
            raise ConfigError(
                f"must be a finite non-negative number, got {st.lr!r}", source=source, field=f + ".lr"
            )
        u = st.until_samples
        if u is None:
            if i != len(stages) - 1:
                raise ConfigError(
                    "only the last stage may be open-ended (until_samples null)",
                    source=source,
                    field=f + ".until_samples",
                )
            continue
        if isinstance(u, bool) or not isinstance(u, int) or u < 1:
            raise ConfigError(
                f"must be a positive integer or null, got {u!r}", source=source, field=f + ".until_samples"
            )
        if u <= prev_until:
            raise ConfigError(
                f"until_samples must increase: {u} after {prev_until}",
                source=source,
                field=f + ".until_samples",
            )
        prev_until = u


class StaticSchedule(Schedule):
    """Stages run in order; stage ``i`` ends once ``record.samples >= stages[i].until_samples``.

    ``step(record)`` returns the decision for the next update; ``switched`` is True exactly
    when batch or lr differ from the previous decision (two equal consecutive stages do not
    count as a switch). Stages' ``start_samples`` are filled in from the previous ``until``.
    A switch the host could not apply (:meth:`hold`) is proposed again at the next record.
    """

    kind = _STATE_KIND

    def __init__(
        self,
        stages: Iterable[Stage | Mapping[str, Any]],
        constraints: BatchConstraints | None = None,
        *,
        source: str | None = None,
    ) -> None:
        raw = [_as_stage(s, i) for i, s in enumerate(stages)]
        validate_stages(raw, constraints, source=source)
        filled, start = [], 0
        for i, st in enumerate(raw):
            reason = (
                st.reason
                if st.reason and st.reason != "initial"
                else ("initial" if i == 0 else f"until_samples {raw[i - 1].until_samples} reached")
            )
            filled.append(
                Stage(
                    batch=st.batch,
                    lr=float(st.lr),
                    reason=reason,
                    start_samples=start,
                    until_samples=st.until_samples,
                )
            )
            start = st.until_samples if st.until_samples is not None else start
        super().__init__(filled)
        self.constraints = constraints
        self._index = 0
        self._last = (filled[0].batch, filled[0].lr)

    @property
    def index(self) -> int:
        return self._index

    def stage_at(self, samples: int) -> int:
        """Index of the stage that runs after ``samples`` rollouts."""
        for i, st in enumerate(self._stages):
            if st.until_samples is None or samples < st.until_samples:
                return i
        return len(self._stages) - 1

    def propose(self, record: StepRecord) -> Decision:
        i = self._index
        stages = self._stages
        last = len(stages) - 1
        # stages only move forward; one record may pass several boundaries
        while i < last and (until := stages[i].until_samples) is not None and record.samples >= until:
            i += 1
        st = stages[i]
        switched = (st.batch, st.lr) != self._last
        reason = st.reason if i != self._index else ""
        return self._decision(record, reason, switched=switched, stage=st, index=i)

    def commit(self, decision: Decision) -> Decision:
        self._index = decision.stage
        self._last = (decision.batch, decision.lr)
        return decision

    def _state(self) -> dict[str, Any]:
        return {
            "index": self._index,
            "last_batch": self._last[0],
            "last_lr": self._last[1],
            "stages": [s.to_dict() for s in self._stages],
        }

    def _load_state(self, state: Mapping[str, Any]) -> None:
        saved = state.get("stages")
        if saved is not None and [(s["batch"], s["until_samples"]) for s in saved] != [
            (s.batch, s.until_samples) for s in self._stages
        ]:
            raise ConfigError(
                "the saved state belongs to a different schedule (stages differ)", field="stages"
            )
        idx = int(state["index"])
        if not 0 <= idx < len(self._stages):
            raise ConfigError(f"stage index {idx} out of range", field="index")
        self._index = idx
        self._last = (int(state["last_batch"]), float(state["last_lr"]))

    def to_dict(self) -> dict[str, Any]:
        """The config form (``load_schedule`` reads it back)."""
        out: dict[str, Any] = {
            "type": "static",
            "stages": [
                {"batch": s.batch, "lr": s.lr, "until_samples": s.until_samples} for s in self._stages
            ],
        }
        if self.constraints is not None:
            out["constraints"] = self.constraints.to_dict()
        return out

    def __repr__(self) -> str:
        body = ", ".join(f"{s.batch}@{s.lr:g}->{s.until_samples}" for s in self._stages)
        return f"StaticSchedule([{body}])"
