"""The framework-free half of the verl adapter: step metrics in, records to the driver.

verl logs one metrics dict per trainer step (``Tracking.log``) and never logs how many
rollouts it consumed, so :class:`ScheduleController` counts them (prompts x ``rollout.n`` of
the stage in effect), builds a :class:`~rlvr_schedule.records.StepRecord` with
:func:`rlvr_schedule.ingest.canonicalize` and hands it to a
:class:`~rlvr_schedule.driver.ScheduleDriver`, whose ``apply`` checks the batch is whole groups
and calls ``apply_fn`` (the trainer's: per-step config plus the workers' LR). Nothing here
imports verl, so it is tested without it.

Fault isolation: an exception anywhere (bad metric, a raising schedule or plugin, a failed
apply) is logged, kept in :attr:`ScheduleController.faults` (the driver's fault log), and the run
goes on with the stage already in effect; a stage that could not be applied is proposed again.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from rlvr_schedule.driver import SaveFn, ScheduleDriver
from rlvr_schedule.records import Decision, StepRecord
from rlvr_schedule_adapters._common import as_number

if TYPE_CHECKING:  # pragma: no cover
    from rlvr_schedule.plugins import PluginHost
    from rlvr_schedule.records import BatchSchedule

__all__ = ["ScheduleController", "is_training_metrics", "STEP_KEY", "LR_KEY"]

log = logging.getLogger("rlvr_schedule.adapters.verl")

#: verl's per-step key (``PPOTrainer._compute_metrics``); validation-only logs lack it.
STEP_KEY = "training/global_step"
#: The LR the actor's scheduler returned after this step's update.
LR_KEY = "actor/lr"

ApplyFn = Callable[[int, float], None]


def is_training_metrics(metrics: Mapping[str, Any]) -> bool:
    """True for the dict of a training step (not the initial/periodic validation-only log)."""
    return STEP_KEY in metrics


class ScheduleController:
    """Drives a schedule from verl's step metrics through a :class:`ScheduleDriver`.

    ``apply_fn(batch, lr)`` makes ``batch`` rollouts per step and ``lr`` the actor's peak LR
    for the next step, and raises when it cannot (it must leave the old stage in effect then).
    ``running`` is the (batch, lr) in effect; ``samples`` the rollouts consumed so far.
    ``advisory``: decide and log, never call ``apply_fn``. ``save_fn``: the trainer's checkpoint at
    a raised alarm of the collapse watch (``checkpoint_on_alarm``; None: in advisory mode only).
    """

    def __init__(
        self,
        schedule: BatchSchedule,
        *,
        group_size: int,
        running: tuple[int, float],
        apply_fn: ApplyFn,
        plugins: PluginHost | None = None,
        aliases: Mapping[str, str] | None = None,
        advisory: bool = False,
        save_fn: SaveFn | None = None,
        checkpoint_on_alarm: bool | None = None,
    ) -> None:
        if group_size < 1:
            raise ValueError(f"group_size must be >= 1, got {group_size}")
        self.group_size = int(group_size)
        self.apply_fn = apply_fn
        self.aliases = aliases
        self.driver = ScheduleDriver(
            schedule,
            self._apply,
            plugins,
            advisory=advisory,
            in_effect=(int(running[0]), float(running[1])),
            save=save_fn,
            checkpoint_on_alarm=checkpoint_on_alarm,
        )
        self._launched = (int(running[0]), float(running[1]))
        self.last_record: StepRecord | None = None

    schedule = property(lambda self: self.driver.schedule)
    samples = property(lambda self: self.driver.samples)
    faults = property(lambda self: self.driver.faults)
    last_decision = property(lambda self: self.driver.last_decision)
    last_step = property(lambda self: self.driver.last_step)

    @property
    def running(self) -> tuple[int, float]:
        """The (batch, lr) verl runs now (advisory: as launched)."""
        return self.driver.in_effect or self._launched

    def fault(self, where: str, exc: BaseException) -> None:
        """Log and keep a fault of the adapter itself (``where``: what failed)."""
        log.exception(
            "rlvr-schedule verl adapter: %s failed; keeping %d rollouts per step, lr %.4g",
            where,
            *self.running,
            exc_info=exc,
        )
        self.faults.append(("verl", where, exc))

    # --- the host's side ---------------------------------------------------------------------
    def _apply(self, batch: int, lr: float) -> bool:
        if batch % self.group_size:
            raise ValueError(
                f"rollout batch {batch} is not a multiple of the group size "
                f"(actor_rollout_ref.rollout.n={self.group_size})"
            )
        self.apply_fn(batch, lr)
        return True

    def start(self) -> bool:
        """Apply the stage to run first (the schedule's, or the one running when the state was saved:
        verl restores the optimizer's LR with its checkpoint, but the per-step batch lives in the
        launch config); False (logged) on failure, the run then goes on as launched."""
        return self.driver.start()

    def observe(self, metrics: Mapping[str, Any], step: int) -> Decision | None:
        """Feed one ``Tracking.log`` call; returns the decision (None for non-training logs and
        when the metrics could not be read: the running stage then stays)."""
        if not is_training_metrics(metrics):
            return None
        batch, running_lr = self.running
        samples = self.driver.consume(batch)  # counted first: a failure below must not lose rollouts
        try:
            from rlvr_schedule.ingest import canonicalize

            logged = as_number(metrics.get(LR_KEY))
            lr = None if logged is not None and math.isfinite(logged) else running_lr
            record = canonicalize(
                metrics, step=int(step), samples=samples, batch=batch, lr=lr, aliases=self.aliases
            )
        except Exception as exc:
            self.driver.last_step = int(step)
            self.fault("observe", exc)
            return None
        self.last_record = record
        return self.driver.observe(record)

    # --- state -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """JSON-able: the driver's (schedule state, rollouts counted, stage running)."""
        return self.driver.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; :meth:`start` then re-applies the stage that was running."""
        self.driver.load_state_dict(state)
