"""The one loop every host runs: record -> observers -> schedule -> apply -> commit or hold -> observers.

A host (the TRL callback, the verl and OpenRLHF controllers, the reference trainer, a plain torch
loop) builds a :class:`ScheduleDriver` from a schedule, its own ``apply(batch, lr)`` and optionally a
:class:`~rlvr_schedule.plugins.PluginHost`, and hands it one
:class:`~rlvr_schedule.records.StepRecord` per optimizer update. The driver does the rest the same way
for every host:

1. ``rlvr_schedule_on_record`` observers (sinks) see the record;
2. the schedule proposes the (batch, LR) of the next update (:meth:`Schedule.propose`);
3. a stage that differs from the one in effect goes to ``apply``; applied, the schedule commits it,
   refused (``apply`` returned False or raised), the schedule holds its stage and proposes again while
   the trigger lasts;
4. ``rlvr_schedule_on_decision`` observers see the decision.

Only batches the host can run reach ``apply``: at set-up the host publishes its grid of runnable
batches (:meth:`ScheduleDriver.set_host_grid`), which goes to the schedule (its proposals then lie
on the grid) and stays here as the last gate: a proposal off the grid (a schedule that ignores
constraints, a fixed stage written for another host) is snapped onto it, and its reason says so.

Faults are isolated: a raising observer, plugin detector, schedule or ``apply`` is logged and kept in
:attr:`ScheduleDriver.faults`, and the run goes on at the stage in effect (``strict=True`` re-raises,
for tests). In advisory mode (``advisory=True``) nothing is applied: the schedule decides as if its
decisions were applied, and every switch is logged with its reason, so a practitioner can watch what
it would do before trusting it with a run.

The driver also runs the collapse watch (:class:`~rlvr_schedule.clocks.failure.alarms.CollapseWatch`):
a raised alarm (a failure, a raised warning, the failure clock at its lower bound) is one console
line, goes to the ``rlvr_schedule_on_alarm`` hook and, with ``checkpoint_on_alarm`` (on by default
in advisory mode), to the host's ``save(alarms, record)``: a checkpoint before the fall, kept apart
from the host's rotation; :attr:`ScheduleDriver.alarm_checkpoints` says which rollouts each holds.
A switch is one console line too, with its reason (``announce``; default the
``rlvr_schedule.console`` logger, which prints at INFO).

The driver owns what every host used to keep: the rollout count, the stage in effect, the fault log
and one ``state_dict()`` (schedule state included) for checkpoints. It also keeps the live progress
rate (:class:`~rlvr_schedule.clocks.OnlineProgress`: reward per rollout at the batch in effect, and
the measured effect of each switch) and feeds the plugins' progress estimators
(``rlvr_schedule_progress_estimators``), whatever the schedule.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from rlvr_schedule._format import plain_reason
from rlvr_schedule.clocks import OnlineProgress
from rlvr_schedule.records import Decision, StepRecord

if TYPE_CHECKING:  # pragma: no cover
    from rlvr_schedule.clocks.failure.alarms import CollapseWatch, WatchAlarm
    from rlvr_schedule.plugins import PluginHost
    from rlvr_schedule.policy.base import Schedule
    from rlvr_schedule.policy.constraints import BatchConstraints

__all__ = ["ApplyFn", "SaveFn", "ScheduleDriver"]

log = logging.getLogger("rlvr_schedule.driver")


class _Console(logging.StreamHandler):
    """Prints to stderr unless the application configured logging (a root handler prints it then)."""

    def emit(self, record: logging.LogRecord) -> None:
        if not logging.getLogger().handlers:
            super().emit(record)


#: Switches and alarms, one line each: printed by default (INFO, stderr), as a host prints its own
#: progress; ``logging.getLogger("rlvr_schedule.console").setLevel(logging.WARNING)`` silences it.
console = logging.getLogger("rlvr_schedule.console")
if not any(isinstance(h, _Console) for h in console.handlers):
    console.addHandler(_Console())
    console.setLevel(logging.INFO)

#: The host's checkpoint at an alarm: ``save(alarms, record)`` saves now (or at the next moment the
#: host can) and returns where (None: not saved).
SaveFn = Callable[[list["WatchAlarm"], StepRecord], "str | os.PathLike[str] | None"]

#: The host's side: put ``batch`` rollouts per update and base LR ``lr`` in effect for the next update.
#: Return False (or raise) when it cannot; the old stage must then stay in effect.
ApplyFn = Callable[[int, float], "bool | None"]

_STATE_VERSION = 1
#: host checkpoints the driver remembers (rolling checkpoints cover the watch's confirmation delay)
_KEEP_NOTED = 64


class ScheduleDriver:
    """Runs a schedule inside a host: ``observe(record) -> Decision`` once per optimizer update.

    ``schedule``: a :class:`~rlvr_schedule.policy.base.Schedule` (``propose``/``commit``/``hold``);
    ``apply``: the host's ``apply(batch, lr) -> bool`` (None counts as applied); ``plugins``: the
    :class:`~rlvr_schedule.plugins.PluginHost` whose observer hooks see every record and decision
    (None: no observers). ``in_effect``: the (batch, lr) the host runs now (None: unknown, the first
    decision is applied). ``advisory``: decide and log, apply nothing. ``save``: the host's
    checkpoint at an alarm (:data:`SaveFn`); ``checkpoint_on_alarm``: call it (None: in advisory
    mode only). ``watch``: the collapse watch (None: the default one, on the schedule's failure
    clock where it has one; False: none). ``announce``: one console line (switches, alarms).
    """

    def __init__(
        self,
        schedule: Schedule,
        apply: ApplyFn | None = None,
        plugins: PluginHost | None = None,
        *,
        in_effect: tuple[int, float] | None = None,
        advisory: bool = False,
        strict: bool | None = None,
        save: SaveFn | None = None,
        checkpoint_on_alarm: bool | None = None,
        watch: CollapseWatch | bool | None = None,
        announce: Callable[[str], Any] | None = None,
    ) -> None:
        if apply is None and not advisory:
            raise TypeError("ScheduleDriver needs the host's apply(batch, lr), or advisory=True")
        self.schedule = schedule if callable(getattr(schedule, "propose", None)) else _StepOnly(schedule)
        self.apply_fn = apply
        self.plugins = plugins
        self.advisory = bool(advisory)
        self.strict = bool(plugins.strict if strict is None and plugins is not None else strict)
        self.faults: list[tuple[str, str, BaseException]] = plugins.faults if plugins is not None else []
        self._traced: set[tuple[str, str]] = set()  # (who, where) whose traceback was logged
        self.in_effect: tuple[int, float] | None = _pair(in_effect)
        self.samples = 0  # rollouts consumed, the last observed update included
        self.last_step: int | None = None
        self.last_decision: Decision | None = None
        self.resume_target: tuple[int, float] | None = None
        self.grid: BatchConstraints | None = None  # the runnable batches (set_host_grid)
        self.progress = OnlineProgress()  # the live progress rate, whatever the schedule
        self.estimators: list[Any] = plugins.progress_estimators() if plugins is not None else []
        self.save_fn = save
        self.checkpoint_on_alarm = self.advisory if checkpoint_on_alarm is None else bool(checkpoint_on_alarm)
        if watch is None or watch is True:
            from rlvr_schedule.clocks.failure.alarms import CollapseWatch

            watch = CollapseWatch(clock=getattr(self.schedule, "clock", None))
        self.watch: CollapseWatch | None = watch or None
        self.announce: Callable[[str], Any] = announce or console.info
        self.alarm_checkpoints: list[dict[str, Any]] = []  # step, samples, alarms, path of each
        # the host's own recent checkpoints (note_checkpoint): a raised failure names the newest saved
        # before its onset, the last state from before the collapse
        self.checkpoints: list[tuple[int, str]] = []
        self.alarms: list[WatchAlarm] = []  # every raised alarm, as the hook saw it
        self._gap_said = False  # the set-up warning of a record every k updates, said once
        own = getattr(schedule, "setup_warnings", None)
        self.setup_warnings: list[str] = list(own()) if callable(own) else []
        for note in self.setup_warnings:
            log.warning("rlvr-schedule: %s", note)

    # --- the loop ------------------------------------------------------------------------------
    def consume(self, rollouts: int) -> int:
        """Count ``rollouts`` more (the update just done); the cumulative count for its record."""
        self.samples += int(rollouts)
        return self.samples

    def observe(self, record: StepRecord) -> Decision:
        """Run the loop once for ``record``; the decision for the next update (never raises, unless strict)."""
        if self.last_step is not None and not self._gap_said and self.watch is not None:
            gap = int(record.step) - self.last_step
            if gap > 1:  # the host logs every k-th update: say what that costs the watch, once
                from rlvr_schedule.clocks.failure.alarms import logging_gap_note

                self._gap_said = True
                note = f"the host hands the driver {logging_gap_note(gap)}"
                self.setup_warnings.append(note)
                log.warning("rlvr-schedule: %s", note)
        self.samples = max(self.samples, int(record.samples))
        self.last_step = int(record.step)
        self._notify("rlvr_schedule_on_record", record=record)
        self._estimate(record)
        try:
            proposal = self.schedule.propose(record)
        except Exception as exc:
            self._fault("<schedule>", "propose", exc)
            decision = self._held(record, f"the schedule raised ({type(exc).__name__}: {exc})")
        else:
            decision = self._settle(proposal)
        self.last_decision = decision
        if decision.switched and not decision.reason.startswith("held"):
            self._say(self._switch_line(decision))
        self._notify("rlvr_schedule_on_decision", decision=decision, record=record)
        self._alarms(record)
        return decision

    def _switch_line(self, d: Decision) -> str:
        mode = " (advisory, not applied)" if self.advisory else ""
        return (
            f"rlvr-schedule{mode}: step {d.step} ({d.samples:,} rollouts): now {d.batch} rollouts/update, "
            f"lr {d.lr:.3g}: {plain_reason(d.reason)}"
        )

    def _say(self, line: str) -> None:
        try:
            self.announce(line)
        except Exception as exc:
            self._fault("<host>", "announce", exc)

    def note_checkpoint(self, path: str | os.PathLike[str], step: int) -> None:
        """The host saved a checkpoint of the state after update ``step`` at ``path`` (its rolling
        checkpoints): a failure raised later names the newest one saved before the failure's onset
        (``WatchAlarm.checkpoint``), the state to go back to; the host keeps that one."""
        self.checkpoints.append((int(step), os.fspath(path)))
        del self.checkpoints[:-_KEEP_NOTED]

    def checkpoint_before(self, step: int) -> str | None:
        """The newest noted checkpoint saved before update ``step`` (None: none noted)."""
        before = [c for c in self.checkpoints if c[0] < step]
        return max(before)[1] if before else None

    def _alarms(self, record: StepRecord) -> list[WatchAlarm]:
        """The collapse watch on ``record``: each raised alarm is a console line and an
        ``rlvr_schedule_on_alarm`` call; then one checkpoint for them (``checkpoint_on_alarm``)."""
        if self.watch is None:
            return []
        try:
            alarms = self.watch.update(record)
        except Exception as exc:
            self._fault("<watch>", "update", exc)
            return []
        alarms = [
            dataclasses.replace(a, checkpoint=self.checkpoint_before(a.onset_step))
            if a.kind == "failure" and self.checkpoints
            else a
            for a in alarms
        ]
        self.alarms += alarms
        for a in alarms:
            self._say(a.line())
            self._notify("rlvr_schedule_on_alarm", alarm=a, record=record)
        if alarms and self.checkpoint_on_alarm and self.save_fn is not None:
            # listed before the save (a checkpoint written now holds it, with no path yet)
            entry: dict[str, Any] = {
                "step": int(record.step),
                "samples": int(record.samples),
                "alarms": [f"{a.kind}:{a.name}" for a in alarms],
                "path": None,
            }
            self.alarm_checkpoints.append(entry)
            try:
                where = self.save_fn(list(alarms), record)
            except Exception as exc:
                self.alarm_checkpoints.remove(entry)
                self._fault("<host>", "save", exc)
                return alarms
            if where is None:
                self.alarm_checkpoints.remove(entry)
                return alarms
            entry["path"] = os.fspath(where)
            self._say(
                f"rlvr-schedule: checkpoint at the alarm: {entry['path']} "
                f"(step {record.step}, {record.samples:,} rollouts)"
            )
        return alarms

    def _estimate(self, record: StepRecord) -> None:
        try:
            self.progress.update(record)
        except Exception as exc:
            self._fault("<progress>", "update", exc)
        for est in self.estimators:
            est.update(record)  # fault-isolated by the plugin host

    # --- the host's grid ------------------------------------------------------------------------
    def set_host_grid(self, grid: BatchConstraints) -> list[str]:
        """Publish the host's grid of runnable batches (at set-up, and again when it changes: a
        resume at another world size). Returns the set-up warnings, one sentence each (also logged).

        The schedule merges the grid into its constraints (:meth:`Schedule.set_host_grid
        <rlvr_schedule.policy.base.Schedule.set_host_grid>`: a conflicting user divisor is one
        warning, its stage in effect snapped another); the merged constraints are the driver's gate
        for every later proposal. A stage in effect or to re-apply after a resume that is off the
        grid is snapped onto it too.
        """
        notes: list[str] = []
        publish = getattr(self.schedule, "set_host_grid", None)
        if callable(publish):
            notes += list(publish(grid))
            merged = getattr(self.schedule, "constraints", None)
            self.grid = merged if merged is not None else grid
        else:
            self.grid = grid
        for name in ("in_effect", "resume_target"):
            pair = getattr(self, name)
            if pair is not None and not self.grid.is_valid(pair[0]):
                batch = self.grid.snap(pair[0])
                notes.append(
                    f"the stage {'in effect' if name == 'in_effect' else 'saved in the checkpoint'} "
                    f"({pair[0]} rollouts) is off the host's grid (multiples of {self.grid.multiple}): "
                    f"snapped to {batch}"
                )
                setattr(self, name, (batch, pair[1]))
        for note in notes:
            log.warning("rlvr-schedule: %s", note)
        return notes

    def snap(self, batch: int) -> int:
        """``batch`` on the host's grid (as is before a grid is published)."""
        if self.grid is None or self.grid.is_valid(int(batch)):
            return int(batch)
        return self.grid.snap(batch)

    def _on_grid(self, proposal: Decision) -> Decision:
        """The proposal with its batch on the grid; the reason says so when it moved."""
        batch = self.snap(proposal.batch)
        if batch == proposal.batch:
            return proposal
        assert self.grid is not None
        note = f"snapped to the host's grid (multiples of {self.grid.multiple}): {proposal.batch} -> {batch}"
        return dataclasses.replace(
            proposal, batch=batch, reason=f"{proposal.reason}; {note}" if proposal.reason else note
        )

    def _settle(self, proposal: Decision) -> Decision:
        # the schedule commits (or holds) in its own terms; the host runs the batch on the grid
        on_grid = self._on_grid(proposal)
        decision = self._settle_target(proposal, (int(on_grid.batch), float(on_grid.lr)))
        if decision is proposal:
            return on_grid
        batch = self.snap(decision.batch)
        return decision if batch == decision.batch else dataclasses.replace(decision, batch=batch)

    def _settle_target(self, proposal: Decision, target: tuple[int, float]) -> Decision:
        if self.advisory:
            if proposal.switched:
                log.debug(
                    "rlvr-schedule (advisory): progress %.3g reward per rollout at the batch in effect",
                    self.progress.rate,
                )
            return self.schedule.commit(proposal)
        if target == self.in_effect:
            return self.schedule.commit(proposal)
        why = self._apply(*target)
        if why is None:
            return self.schedule.commit(proposal)
        return self.schedule.hold(proposal, why)

    def _apply(self, batch: int, lr: float) -> str | None:
        """Apply through the host; None when applied, else why not (logged, in the fault log)."""
        assert self.apply_fn is not None
        try:
            ok = self.apply_fn(batch, lr)
        except Exception as exc:
            self._fault("<host>", "apply", exc)
            return f"the host could not apply it ({type(exc).__name__}: {exc})"
        if ok is False:
            log.warning(
                "rlvr-schedule: the host refused %s rollouts/update, lr %g; keeping the stage in effect",
                batch,
                lr,
            )
            return "the host refused it"
        prev, self.in_effect = self.in_effect, (batch, lr)
        if prev != self.in_effect:
            log.info("rlvr-schedule: now %s rollouts/update, lr %g (was %s)", batch, lr, prev)
        return None

    def start(self) -> bool:
        """Apply the stage to run first: the schedule's current one, or after :meth:`load_state_dict`
        the one in effect when the state was saved (hosts do not save their batch). False when the
        host refused it (logged); the run then goes on as launched."""
        target = self.resume_target or (
            self.snap(int(self.schedule.current.batch)),
            float(self.schedule.current.lr),
        )
        if self.advisory:
            return True
        if self.resume_target is None and target == self.in_effect:
            return True
        ok = self._apply(*target) is None
        if ok:
            self.resume_target = None
        return ok

    def _held(self, record: StepRecord, why: str) -> Decision:
        cur = self.schedule.current
        batch, lr = self.in_effect or (int(cur.batch), float(cur.lr))
        return Decision(
            step=record.step,
            samples=record.samples,
            batch=batch,
            lr=lr,
            stage=int(getattr(self.schedule, "index", 0)),
            switched=False,
            reason=f"held: {why}",
        )

    def _notify(self, hook: str, **kwargs: Any) -> None:
        if self.plugins is None:
            return
        try:
            getattr(self.plugins.hook, hook)(**kwargs)  # each implementation is fault-isolated
        except (Exception, SystemExit) as exc:  # a hook wrapper that raised or called sys.exit
            self._fault("<hook>", hook, exc)

    def _fault(self, who: str, where: str, exc: BaseException) -> None:
        """One ERROR line per fault; its traceback once per (who, where), at DEBUG after that."""
        if self.strict:
            raise exc
        first = (who, where) not in self._traced
        self._traced.add((who, where))
        log.error(
            "rlvr-schedule: %s raised in %s (%s: %s); training continues at the stage in effect%s",
            who,
            where,
            type(exc).__name__,
            exc,
            "" if first else " (traceback at DEBUG)",
            exc_info=exc if first else None,
        )
        if not first:
            log.debug("rlvr-schedule: %s in %s", who, where, exc_info=exc)
        self.faults.append((who, where, exc))

    # --- the user's dashboard --------------------------------------------------------------------
    def scalars(self) -> dict[str, float]:
        """The schedule's state as dashboard scalars (finite values only): the stage's ``batch``,
        ``lr`` and ``stage``, ``samples``, the ``critical_batch`` estimate and the ``noise_scale``
        (B_simple) it rests on, the failure clock's lower bound ``failure_clock_spent`` (part) and
        ``failure_clock_left`` (rollouts at the stage), and the alarms raised so far (``warnings``,
        ``failures``). Hosts write them under ``rlvr/`` next to their own metrics."""
        sched = self.schedule
        d = self.last_decision
        cur = sched.current
        batch, lr = (d.batch, d.lr) if d is not None else (int(cur.batch), float(cur.lr))
        out: dict[str, float] = {
            "batch": float(batch),
            "lr": float(lr),
            "stage": float(d.stage if d is not None else getattr(sched, "index", 0)),
            "samples": float(self.samples),
        }
        estimate = getattr(sched, "critical_estimate", None)
        if callable(estimate):
            out["critical_batch"] = float(estimate())
        noise = getattr(sched, "noise", None)
        if noise is not None:
            out["noise_scale"] = float(getattr(noise, "b_simple", math.nan))
        clock = getattr(sched, "clock", None)
        if clock is not None:
            out["failure_clock_spent"] = float(clock.used_)
            out["failure_clock_left"] = float(clock.left(batch, lr))
        if self.watch is not None:
            raised = self.watch.alarms_
            out["warnings"] = float(sum(a.kind == "warning" for a in raised))
            out["failures"] = float(sum(a.kind == "failure" for a in raised))
        return {k: v for k, v in out.items() if math.isfinite(v)}

    # --- state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """JSON-able: the schedule's state, the rollouts counted and the stage in effect."""
        from rlvr_schedule.policy.base import encode_floats

        estimators = {
            f"{i}:{e.name}": e.state_dict() for i, e in enumerate(self.estimators) if hasattr(e, "state_dict")
        }
        return {
            "version": _STATE_VERSION,
            "schedule": self.schedule.state_dict(),
            "samples": self.samples,
            "step": self.last_step,
            "in_effect": None if self.in_effect is None else list(self.in_effect),
            "last_decision": None if self.last_decision is None else self.last_decision.to_dict(),
            "progress": encode_floats(self.progress.state_dict()),
            "estimators": encode_floats(estimators),
            "watch": None if self.watch is None else encode_floats(self.watch.state_dict()),
            "alarm_checkpoints": list(self.alarm_checkpoints),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; :meth:`start` then re-applies the stage that was in effect."""
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"unsupported schedule driver state version {state.get('version')!r}")
        self.schedule.load_state_dict(state["schedule"])
        self.samples = int(state["samples"])
        self.last_step = None if state.get("step") is None else int(state["step"])
        # the stage in effect when saved: :meth:`start` re-applies it (the host runs as launched until
        # then; one that re-applies its stage itself, like the TRL callback, reads ``resume_target``)
        self.resume_target = _pair(state.get("in_effect"))
        d = state.get("last_decision")
        self.last_decision = None if d is None else Decision(**d)
        from rlvr_schedule.policy.base import decode_floats

        if state.get("progress") is not None:
            self.progress.load_state_dict(decode_floats(state["progress"]))
        if self.watch is not None and state.get("watch") is not None:
            self.watch.load_state_dict(decode_floats(state["watch"]))
        self.alarm_checkpoints = [dict(c) for c in state.get("alarm_checkpoints") or []]
        saved = decode_floats(state.get("estimators") or {})
        for i, e in enumerate(self.estimators):
            key = f"{i}:{e.name}"
            if key in saved and hasattr(e, "load_state_dict"):
                e.load_state_dict(saved[key])

    # --- a driver is a BatchSchedule too (the synthetic environment and testing helpers drive it) ----
    def step(self, record: StepRecord) -> Decision:
        """:meth:`observe` (``BatchSchedule`` protocol)."""
        return self.observe(record)

    @property
    def current(self) -> Any:
        return self.schedule.current

    @property
    def stages(self) -> Any:
        return self.schedule.stages

    def __repr__(self) -> str:
        mode = ", advisory" if self.advisory else ""
        return f"ScheduleDriver({self.schedule!r}, in_effect={self.in_effect}, samples={self.samples}{mode})"


class _StepOnly:
    """A schedule with ``step`` only (a user's ``BatchSchedule``): it commits as it decides, so a
    switch the host refuses cannot be held; the driver logs the refusal and retries the stage."""

    def __init__(self, schedule: Any) -> None:
        self.inner = schedule

    def propose(self, record: StepRecord) -> Decision:
        return self.inner.step(record)

    def commit(self, decision: Decision) -> Decision:
        return decision

    def hold(self, decision: Decision, why: str) -> Decision:
        return Decision(
            step=decision.step,
            samples=decision.samples,
            batch=decision.batch,
            lr=decision.lr,
            stage=decision.stage,
            switched=False,
            reason=f"held: {why}",
            trigger=decision.trigger,
        )

    def __getattr__(self, attr: str) -> Any:
        if attr == "inner":
            raise AttributeError(attr)
        return getattr(self.inner, attr)


def _pair(v: Any) -> tuple[int, float] | None:
    return None if v is None else (int(v[0]), float(v[1]))
