"""The framework-free half of the verl adapter: step metrics in, applied (batch, LR) out.

verl logs one metrics dict per trainer step (``Tracking.log``) and never logs how many
rollouts it consumed, so :class:`ScheduleController` counts them (prompts x ``rollout.n`` of
the stage in effect), builds a :class:`~rlvr_schedule.records.StepRecord` with
:func:`rlvr_schedule.ingest.canonicalize`, asks the schedule for the next stage and hands
a changed (batch, lr) to ``apply_fn``. Nothing here imports verl, so it is tested without it.

Fault isolation: an exception anywhere (bad metric, a raising schedule or plugin, a failed
apply) is logged, counted in :attr:`ScheduleController.faults`, and the run goes on with the
stage already in effect; a decision that could not be applied is retried on the next step.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any, Callable, Mapping

from rlvr_schedule.plugins import hookimpl
from rlvr_schedule.records import Decision, StepRecord

if TYPE_CHECKING:  # pragma: no cover
    from rlvr_schedule.plugins import PluginHost
    from rlvr_schedule.records import BatchSchedule

__all__ = ["ScheduleController", "is_training_metrics", "STEP_KEY", "LR_KEY"]

log = logging.getLogger("rlvr_schedule.adapters.verl")

#: verl's per-step key (``PPOTrainer._compute_metrics``); validation-only logs lack it.
STEP_KEY = "training/global_step"
#: The LR the actor's scheduler returned after this step's update.
LR_KEY = "actor/lr"
_STATE_VERSION = 1

ApplyFn = Callable[[int, float], None]


def is_training_metrics(metrics: Mapping[str, Any]) -> bool:
    """True for the dict of a training step (not the initial/periodic validation-only log)."""
    return STEP_KEY in metrics


class ScheduleController:
    """Drives a :class:`~rlvr_schedule.records.BatchSchedule` from verl's step metrics.

    ``apply_fn(batch, lr)`` makes ``batch`` rollouts per step and ``lr`` the actor's peak LR
    for the next step, and raises when it cannot (it must leave the old stage in effect then).
    ``running`` is the (batch, lr) in effect; ``samples`` the rollouts consumed so far.

    When the schedule was built with the same :class:`PluginHost` (``TwoClockScheduler``) it
    calls the observer hooks and ``rlvr_schedule_apply_decision`` itself; the controller is
    registered on that host and applies through the hook. Otherwise (``StaticSchedule``) the
    controller calls the observer hooks and applies a changed decision directly.
    """

    def __init__(self, schedule: "BatchSchedule", *, group_size: int, running: tuple[int, float],
                 apply_fn: ApplyFn, plugins: "PluginHost | None" = None,
                 aliases: Mapping[str, str] | None = None) -> None:
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        self.schedule = schedule
        self.group_size = int(group_size)
        self.running: tuple[int, float] = (int(running[0]), float(running[1]))
        self.apply_fn = apply_fn
        self.plugins = plugins
        self.aliases = aliases
        self.samples = 0
        self.last_step: int | None = None
        self.last_record: StepRecord | None = None
        self.last_decision: Decision | None = None
        self.faults: list[tuple[str, BaseException]] = []
        self._resume_target: tuple[int, float] | None = None
        if plugins is not None:
            plugins.register(self, name=f"verl-controller-{id(self)}")

    # --- hooks -----------------------------------------------------------------------------
    @property
    def schedule_calls_hooks(self) -> bool:
        """Whether the schedule itself calls the plugin hooks (it shares our host)."""
        return self.plugins is not None and getattr(self.schedule, "plugins", None) is self.plugins

    @hookimpl
    def rlvr_schedule_apply_decision(self, decision: Decision) -> bool:
        """pluggy hook (registered per instance): apply a switched decision; raises on failure."""
        self.apply(decision.batch, decision.lr)
        return True

    # --- the loop --------------------------------------------------------------------------
    def apply(self, batch: int, lr: float) -> None:
        """Make (batch, lr) the running stage through ``apply_fn``; raises if it fails."""
        batch, lr = int(batch), float(lr)
        if batch % self.group_size:
            raise ValueError(f"rollout batch {batch} is not a multiple of the group size "
                             f"(actor_rollout_ref.rollout.n={self.group_size})")
        self.apply_fn(batch, lr)
        prev, self.running = self.running, (batch, lr)
        if prev != self.running:
            log.info("rlvr-schedule: now %d rollouts per step (%d prompts x %d), lr %.4g (was %d, %.4g)",
                     batch, batch // self.group_size, self.group_size, lr, prev[0], prev[1])

    def start(self) -> bool:
        """Apply the stage to run first; False (logged) on failure, the run then goes on as launched.

        That is the schedule's current stage, or after :meth:`load_state_dict` the stage that was
        running when the state was saved (verl restores the optimizer's LR with its checkpoint,
        but the per-step batch lives in the launch config, so it is always re-applied).
        """
        resumed = self._resume_target is not None
        if resumed:
            target = self._resume_target
        else:
            cur = self.schedule.current
            target = (int(cur.batch), float(cur.lr))
        if target == self.running and not resumed:
            return True
        ok = self._apply_safely(*target)
        if ok:
            self._resume_target = None
        return ok

    def observe(self, metrics: Mapping[str, Any], step: int) -> Decision | None:
        """Feed one ``Tracking.log`` call; returns the decision (None for non-training logs
        and when something failed: the running stage then stays)."""
        if not is_training_metrics(metrics):
            return None
        batch, running_lr = self.running
        self.samples += batch  # counted first: a failure below must not lose rollouts
        self.last_step = int(step)
        try:
            from rlvr_schedule.ingest import canonicalize

            lr = None if _finite(metrics.get(LR_KEY)) else running_lr
            record = canonicalize(metrics, step=int(step), samples=self.samples, batch=batch, lr=lr,
                                  aliases=self.aliases)
            self.last_record = record
            own_hooks = self.plugins is not None and not self.schedule_calls_hooks
            if own_hooks:
                self.plugins.call("rlvr_schedule_on_record", record=record)
            decision = self.schedule.step(record)
            self.last_decision = decision
            if own_hooks:
                self.plugins.call("rlvr_schedule_on_decision", decision=decision, record=record)
        except Exception as exc:
            self._fault("observe", exc)
            return None
        if (decision.batch, decision.lr) != self.running:
            self._apply_safely(decision.batch, decision.lr)
        return decision

    def _apply_safely(self, batch: int, lr: float) -> bool:
        try:
            self.apply(batch, lr)
        except Exception as exc:
            self._fault("apply", exc)
            return False
        return True

    def _fault(self, where: str, exc: BaseException) -> None:
        log.exception("rlvr-schedule verl adapter: %s failed; keeping %d rollouts per step, lr %.4g",
                      where, self.running[0], self.running[1])
        self.faults.append((where, exc))

    # --- state -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """JSON-able state: the schedule's plus the rollouts counted and the running stage."""
        return {
            "version": _STATE_VERSION,
            "schedule": self.schedule.state_dict(),
            "samples": self.samples,
            "step": self.last_step,
            "running": [self.running[0], self.running[1]],
            "last_decision": None if self.last_decision is None else self.last_decision.to_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; :meth:`start` then re-applies the stage that was running."""
        version = state.get("version")
        if version != _STATE_VERSION:
            raise ValueError(f"unsupported verl adapter state version {version!r}")
        self.schedule.load_state_dict(state["schedule"])
        self.samples = int(state["samples"])
        self.last_step = None if state.get("step") is None else int(state["step"])
        batch, lr = state["running"]
        self._resume_target = (int(batch), float(lr))
        d = state.get("last_decision")
        self.last_decision = None if d is None else Decision(**d)


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False
