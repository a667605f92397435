"""The base of every batch schedule, in the style of ``torch.optim.lr_scheduler``.

A schedule answers each record (one optimizer update) with the (batch, LR) of the next update.
The answer comes in two halves so that a host can refuse a switch it cannot make:
:meth:`Schedule.propose` folds the record into the schedule's estimates and proposes a
:class:`~rlvr_schedule.records.Decision`; :meth:`Schedule.commit` makes it the stage in effect, or
:meth:`Schedule.hold` keeps the current stage (the proposal comes back while its trigger holds).
:meth:`Schedule.step` does both, for a loop that always applies (``torch``-style; the synthetic
environment). :class:`~rlvr_schedule.driver.ScheduleDriver` runs the halves around the host's
``apply``. Schedules know nothing of plugins or hosts.

The base owns the stages, the current stage, commit and the state codec: ``state_dict()`` is
strict JSON (non-finite floats as the strings ``"NaN"``/``"Infinity"``, :func:`encode_floats`), tagged
with the schedule's ``kind`` so that a state never loads into another kind of schedule.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from rlvr_schedule.errors import ConfigError
from rlvr_schedule.records import Decision, Stage, StepRecord

if TYPE_CHECKING:  # pragma: no cover
    from rlvr_schedule.policy.constraints import BatchConstraints

__all__ = ["Schedule", "decode_floats", "encode_floats"]

_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def encode_floats(x: Any) -> Any:
    """Non-finite floats as the strings "NaN"/"Infinity" (strict JSON for checkpoints; exact round trip)."""
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    if isinstance(x, Mapping):
        return {k: encode_floats(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [encode_floats(v) for v in x]
    return x


def decode_floats(x: Any) -> Any:
    """Inverse of :func:`encode_floats`."""
    if isinstance(x, str) and x in _NONFINITE:
        return _NONFINITE[x]
    if isinstance(x, Mapping):
        return {k: decode_floats(v) for k, v in x.items()}
    if isinstance(x, list):
        return [decode_floats(v) for v in x]
    return x


class Schedule:
    """Stages, the current stage, commit/hold and the state codec; subclasses write :meth:`propose`.

    An online schedule appends a stage per committed switch (the current stage is the last); a
    fixed one (:class:`~rlvr_schedule.policy.StaticSchedule`) overrides :attr:`index`. Subclasses set
    ``kind`` and ``version`` and give their own state through :meth:`_state` / :meth:`_load_state`.
    """

    kind: ClassVar[str] = "schedule"
    version: ClassVar[int] = 1

    def __init__(self, stages: Sequence[Stage]) -> None:
        self._stages: list[Stage] = list(stages)

    # --- stages --------------------------------------------------------------------------------
    @property
    def stages(self) -> Sequence[Stage]:
        return tuple(self._stages)

    @property
    def index(self) -> int:
        """Index of the stage in effect."""
        return len(self._stages) - 1

    @property
    def current(self) -> Stage:
        return self._stages[self.index]

    @property
    def switches(self) -> int:
        return len(self._stages) - 1

    def _decision(
        self,
        record: StepRecord,
        reason: str = "",
        *,
        switched: bool = False,
        stage: Stage | None = None,
        index: int | None = None,
        trigger: str = "",
    ) -> Decision:
        st = stage if stage is not None else self.current
        return Decision(
            step=record.step,
            samples=record.samples,
            batch=st.batch,
            lr=st.lr,
            stage=self.index if index is None else index,
            switched=switched,
            reason=reason,
            trigger=trigger,
        )

    # --- the two halves of a step ----------------------------------------------------------------
    def propose(self, record: StepRecord) -> Decision:
        """Fold ``record`` in; the decision for the next update (not yet in effect)."""
        raise NotImplementedError

    def commit(self, decision: Decision) -> Decision:
        """Make ``decision`` (the last :meth:`propose`) the stage in effect; returns it.

        A switch to stage ``len(stages)`` appends a stage (the previous one ends at its samples); a
        switch within the current stage changes its LR (AdaScale-style re-tuning).
        """
        if decision.switched:
            cur = self._stages[-1]
            if decision.stage == len(self._stages):
                self._stages[-1] = dataclasses.replace(cur, until_samples=decision.samples)
                self._stages.append(
                    Stage(
                        batch=decision.batch,
                        lr=decision.lr,
                        reason=decision.reason,
                        start_samples=decision.samples,
                    )
                )
            else:
                self._stages[-1] = dataclasses.replace(cur, lr=decision.lr)
            self._committed(decision)
        return decision

    def hold(self, decision: Decision, why: str) -> Decision:
        """The host could not apply ``decision``: the current stage stays; its decision, saying why."""
        return Decision(
            step=decision.step,
            samples=decision.samples,
            batch=self.current.batch,
            lr=self.current.lr,
            stage=self.index,
            switched=False,
            reason=f"held: {why}",
            trigger=decision.trigger,
        )

    def step(self, record: StepRecord) -> Decision:
        """:meth:`propose` and :meth:`commit`: the decision for the next update, in effect."""
        return self.commit(self.propose(record))

    def _committed(self, decision: Decision) -> None:
        """Subclass bookkeeping after a switch went into effect."""

    # --- the host's grid -------------------------------------------------------------------------
    def set_host_grid(self, grid: BatchConstraints) -> list[str]:
        """Propose only batches the host can run: merge the host's grid (its runnable batches, published
        at set-up) into the schedule's ``constraints``; returns the set-up warnings (one sentence each).

        Merged into the constraints the schedule was built with (a re-published grid, e.g. a resume
        at another world size, replaces the earlier one). The stage in effect of an online schedule
        (it appends a stage per switch) is snapped onto the grid, its LR moved by the schedule's LR
        rule (``_lr(batch)``, when it has one), and the snap is said in its reason and in the
        warnings; a fixed schedule's stages stay as written (its checkpoint compares them) and the
        driver snaps what the host runs.
        """
        from rlvr_schedule.policy.constraints import BatchConstraints

        own = getattr(self, "_own_constraints", None)
        if own is None:
            own = getattr(self, "constraints", None) or BatchConstraints()
            self._own_constraints = own
        merged, notes = own.with_host_grid(
            grid.multiple, max_batch=grid.max_batch, host=f"the host (grid {grid.multiple})"
        )
        self.constraints = merged
        self.host_grid = grid
        cur = self.current
        if type(self).index is not Schedule.index:  # fixed stages: the driver snaps what the host runs
            notes += [
                f"stage {i} ({st.batch} rollouts) is off the host's grid (multiples of {merged.multiple}): "
                f"the host runs {merged.snap(st.batch)}"
                for i, st in enumerate(self._stages)
                if not merged.is_valid(st.batch)
            ]
        elif not merged.is_valid(cur.batch):
            batch = merged.snap(cur.batch)
            rule = getattr(self, "_lr", None)
            lr = cur.lr * rule(batch) / rule(cur.batch) if callable(rule) else cur.lr
            note = f"snapped to the host's grid (multiples of {merged.multiple}): {cur.batch} -> {batch}"
            self._stages[-1] = dataclasses.replace(
                cur, batch=batch, lr=lr, reason=f"{cur.reason}; {note}" if cur.reason else note
            )
            notes.append(f"the stage in effect ({cur.batch} rollouts, lr {cur.lr:g}) is {note}, lr {lr:g}")
        return notes

    def setup_warnings(self) -> list[str]:
        """What in the schedule's own set-up keeps it from doing its job (one sentence each; none
        by default): the host logs them at set-up (:class:`~rlvr_schedule.driver.ScheduleDriver`)."""
        return []

    # --- state -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return encode_floats({"kind": self.kind, "version": self.version, **self._state()})

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("kind") != self.kind:
            raise ConfigError(f"not a {type(self).__name__} state (kind {state.get('kind')!r})", field="kind")
        self._load_state(decode_floats(dict(state)))

    def _state(self) -> dict[str, Any]:
        return {"stages": [s.to_dict() for s in self._stages]}

    def _load_state(self, state: Mapping[str, Any]) -> None:
        self._stages = self._stages_from(state)

    @staticmethod
    def _stages_from(state: Mapping[str, Any]) -> list[Stage]:
        stages = [Stage(**s) for s in state["stages"]]
        if not stages:
            raise ConfigError("a state needs at least one stage", field="stages")
        return stages
