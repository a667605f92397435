"""The trainer side of the OpenRLHF adapter (framework-free): step logs in, records to the driver.

A record is one OpenRLHF global step (one rollout batch); ``batch`` is rollouts per optimizer
update (``args.train.batch_size``) and ``samples`` counts rollouts generated (``rollout/num_samples``
summed). With one update per rollout batch (the GRPO default) the rollout batch of a step equals
``batch``; otherwise the ratio is kept when the batch changes. The driver's ``apply`` reaches the
policy workers first (they may refuse), then the trainer's args (:mod:`.plan`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from rlvr_schedule.driver import ScheduleDriver
from rlvr_schedule_adapters._common import as_number, warn_setup
from rlvr_schedule_adapters.openrlhf.metrics import translate_metrics
from rlvr_schedule_adapters.openrlhf.plan import (
    apply_plan_to_args,
    host_grid,
    plan_for_batch,
    updates_per_rollout,
)

__all__ = ["ARGS_ATTR", "STATE_KEY", "ScheduleController", "make_controller"]

log = logging.getLogger("rlvr_schedule.openrlhf")

#: Attribute of OpenRLHF's args namespace that carries the adapter settings to every Ray actor
#: (the strategy, and with it ``args``, is pickled into each actor).
ARGS_ATTR = "rlvr_schedule"
#: Key of the adapter's state inside OpenRLHF's checkpointed ``client_states``.
STATE_KEY = "rlvr_schedule"


class ScheduleController:
    """Schedule, rollout count and stage of one OpenRLHF run, on a :class:`ScheduleDriver`.

    ``apply_workers(train_batch, lr)`` reaches the policy workers (in the Ray trainer:
    ``actor_model_group.async_run_method`` of the worker method); it raises when a worker failed.
    ``args`` is the trainer's OpenRLHF namespace, mutated for ``SamplesGenerator``.
    ``advisory``: decide and log, never apply. ``save_fn``: the trainer's checkpoint at a raised
    alarm of the collapse watch (``checkpoint_on_alarm``; None: in advisory mode only).
    """

    def __init__(
        self,
        schedule: Any,
        args: Any,
        apply_workers: Callable[[int, float], Any],
        *,
        plugins: Any = None,
        advisory: bool = False,
        save_fn: Any = None,
        checkpoint_on_alarm: bool | None = None,
    ) -> None:
        self.args = args
        self.apply_workers = apply_workers
        self.updates = updates_per_rollout(args)
        lr0 = float(getattr(getattr(args.actor, "adam", None), "lr", math.nan))
        self.driver = ScheduleDriver(
            schedule,
            self._apply,
            plugins,
            advisory=advisory,
            in_effect=(int(args.train.batch_size), lr0),
            save=save_fn,
            checkpoint_on_alarm=checkpoint_on_alarm,
        )

    schedule = property(lambda self: self.driver.schedule)
    samples = property(lambda self: self.driver.samples)
    faults = property(lambda self: self.driver.faults)
    last_decision = property(lambda self: self.driver.last_decision)

    @property
    def batch(self) -> int:
        """Rollouts per optimizer update now (``args.train.batch_size``)."""
        return int(self.args.train.batch_size)

    @property
    def lr(self) -> float:
        return float(self.driver.in_effect[1]) if self.driver.in_effect else math.nan

    # -- applying --------------------------------------------------------------------------------
    def _apply(self, batch: int, lr: float) -> bool:
        """Workers first (they may refuse), then the trainer's args; raises on failure."""
        plan = plan_for_batch(self.args, int(batch), updates=self.updates)
        self.apply_workers(plan.train_batch, float(lr))
        apply_plan_to_args(self.args, plan)
        log.info(
            "rlvr-schedule: %d rollouts per update (%d prompts x %d per step), lr %g",
            plan.train_batch,
            plan.rollout_prompts,
            plan.n_samples_per_prompt,
            lr,
        )
        return True

    def publish_grid(self) -> list[str]:
        """Publish the run's grid of runnable batches (micro-batch x data-parallel size, whole prompts)
        to the schedule; what conflicts, or a restored stage off the grid (a resume at another
        world size), is a set-up warning, and snapped."""
        notes = self.driver.set_host_grid(host_grid(self.args, updates=self.updates))
        warn_setup(notes, framework="OpenRLHF")
        return notes

    def begin(self) -> bool:
        """Publish the grid and apply the stage to run first at the start of ``fit`` (fresh or resumed run)."""
        try:
            self.publish_grid()
        except Exception as exc:
            self.fault("grid", exc)
        return self.driver.start()

    # -- one step ---------------------------------------------------------------------------------
    def on_step(self, global_step: int, logs_dict: Mapping[str, Any]) -> Any:
        """Record the finished step and run the driver's loop once; returns the decision."""
        from rlvr_schedule.ingest import canonicalize

        n = as_number(logs_dict.get("rollout/num_samples"))
        step_samples = int(n) if n is not None and n > 0 else self.batch * self.updates
        samples = self.driver.consume(step_samples)
        lr = as_number(logs_dict.get("actor_lr"))
        record = canonicalize(
            translate_metrics(logs_dict),
            step=int(global_step),
            samples=samples,
            batch=self.batch,
            lr=lr if lr is not None else self.lr,
        )
        record.extra.setdefault("rollouts_step", float(step_samples))
        return self.driver.observe(record)

    def step_logs(self, global_step: int, logs_dict: dict[str, Any]) -> None:
        """:meth:`on_step` with faults logged; adds ``rlvr/samples`` (cumulative rollouts),
        ``rlvr/batch`` (this update's rollouts) and ``rlvr/stage`` (the next update's stage) to the
        logs OpenRLHF writes (TensorBoard: ``train/rlvr/*``, read back through the plugin's aliases)."""
        batch = self.batch
        try:
            decision = self.on_step(global_step, logs_dict)
        except Exception as exc:  # a bad log: the run goes on at the current stage
            self.fault("step", exc)
            return
        logs_dict["rlvr/samples"] = float(self.samples)
        logs_dict["rlvr/batch"] = float(batch)
        logs_dict["rlvr/stage"] = float(decision.stage)

    def fault(self, where: str, exc: BaseException) -> None:
        log.error(
            "rlvr-schedule: %s failed; training continues at %d rollouts per update",
            where,
            self.batch,
            exc_info=exc,
        )
        self.faults.append(("openrlhf", where, exc))

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {**self.driver.state_dict(), "updates_per_rollout": int(self.updates)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.driver.load_state_dict(state)
        self.updates = int(state.get("updates_per_rollout", self.updates))

    def restore(self, checkpoint_states: Mapping[str, Any] | None) -> None:
        """Load the state saved beside OpenRLHF's ``client_states`` (no-op for a fresh run)."""
        state = (checkpoint_states or {}).get(STATE_KEY)
        if state:
            try:
                self.load_state_dict(state)
            except Exception as exc:
                self.fault("restore", exc)


def make_controller(
    args: Any, apply_workers: Callable[[int, float], Any], *, save_fn: Any = None
) -> ScheduleController | None:
    """A controller from ``args.rlvr_schedule`` (set by the launcher), or None when it is absent; the
    schedule's ``watch`` group may turn the checkpoint at an alarm (``save_fn``) on or off."""
    settings = getattr(args, ARGS_ATTR, None)
    if not settings:
        return None
    from rlvr_schedule.plugins import get_plugin_host
    from rlvr_schedule_adapters._common import build_schedule, split_watch

    host = get_plugin_host()
    body, watch = split_watch(settings["schedule"])
    schedule = build_schedule(body, plugins=host)
    return ScheduleController(
        schedule,
        args,
        apply_workers,
        plugins=host,
        advisory=bool(settings.get("advisory", False)),
        save_fn=save_fn,
        checkpoint_on_alarm=watch.get("checkpoint_on_alarm"),
    )
