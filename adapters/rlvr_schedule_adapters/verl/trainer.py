"""The verl 0.9.1 classes: a sync trainer that follows a batch schedule, its worker, its runner.

Importing this module imports verl (and registers the trainer); the entry-point module
:mod:`rlvr_schedule_adapters.verl` imports it only on use.

- :class:`RlvrSchedulePPOTrainer` subclasses ``PPOTrainerSync``. ``register_trainer`` refuses
  to re-register ``"sync"`` and verl's code tests ``trainer_mode == "sync"`` in several places,
  so the class is registered as ``"rlvr_sync"`` and resets ``trainer.v1.trainer_mode`` to
  ``"sync"`` before the base constructor runs: everything downstream sees a plain sync run.
- :data:`RlvrScheduleTaskRunner` is verl's ``TaskRunnerV1`` Ray actor with the mode set to
  ``"rlvr_sync"``; the actor process imports this module (classes pickle by reference), which
  registers the trainer there. Launch with ``run_ppo(config, task_runner_class=RlvrScheduleTaskRunner)``
  (what :mod:`rlvr_schedule_adapters.verl.launch` does).
- :class:`ScheduleActorRolloutRefWorker` is verl's ``ActorRolloutRefWorker`` plus
  :meth:`LRControlMixin.rlvr_set_lr`, a ``Dispatch.ONE_TO_ALL`` method that sets the peak LR
  of the actor's optimizer and LambdaLR on every rank, and whose actor is a
  :class:`ScheduleTrainingWorker`: its update metrics carry the micro-batch gradient norm
  (``actor/grad_norm_micro``, ``actor/micro_batch``; :mod:`rlvr_schedule_adapters.verl.noise`).

Settings come from the ``rlvr_schedule`` section of the verl config (see :data:`SETTINGS_KEY`).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable
from typing import Any

import ray
from omegaconf import DictConfig, open_dict
from verl.single_controller.base.decorator import Dispatch, register
from verl.trainer.main_ppo import TaskRunnerV1
from verl.trainer.ppo.utils import Role
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils import tensordict_utils as tu
from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker

from rlvr_schedule_adapters._common import (
    ALARM_PREFIX,
    ScheduleSetupWarning,
    build_schedule,
    keep_alarm_checkpoint,
    scale_base_lr,
    split_watch,
    warn_setup,
)
from rlvr_schedule_adapters.verl.batch import (
    MINI_BATCH_MODES,
    apply_rollout_batch,
    check_setup,
    host_grid,
    pin_gen_batch_size,
    read_layout,
)
from rlvr_schedule_adapters.verl.controller import ScheduleController
from rlvr_schedule_adapters.verl.noise import EngineProbe
from rlvr_schedule_adapters.verl.state import STATE_FILE, checkpoint_folder, load_state, save_state
from rlvr_schedule_adapters.verl.tracking import ScheduleMetricsBackend, attach_backend

__all__ = [
    "TRAINER_NAME",
    "SETTINGS_KEY",
    "LRControlMixin",
    "ScheduleActorRolloutRefWorker",
    "ScheduleTrainingWorker",
    "RlvrSchedulePPOTrainer",
    "RlvrScheduleTaskRunner",
    "build_controller",
]

log = logging.getLogger("rlvr_schedule.adapters.verl")

#: The name the trainer is registered under in verl's TRAINER_REGISTRY.
TRAINER_NAME = "rlvr_sync"
#: Config section read by the trainer: ``schedule`` (path, required), ``mini_batch_mode``
#: ("per_step" | "fixed"), ``jsonl`` (optional path: records and decisions), ``state_file``,
#: ``advisory`` (true: decide and log, change nothing).
SETTINGS_KEY = "rlvr_schedule"


class LRControlMixin:
    """Adds :meth:`rlvr_set_lr` to a verl worker holding ``self.actor.engine.{optimizer, lr_scheduler}``."""

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def rlvr_set_lr(self, lr: float) -> list[float] | None:
        """Set the actor's peak LR (base_lrs and param groups together) on this rank; returns
        the group LRs now in effect (None on a worker without a trainable actor)."""
        actor = getattr(self, "actor", None)
        if actor is None:
            return None
        engine = getattr(actor, "engine", actor)
        optimizer = getattr(engine, "optimizer", None)
        if optimizer is None:
            return None
        return scale_base_lr(optimizer, getattr(engine, "lr_scheduler", None), lr)


class ScheduleTrainingWorker(TrainingWorker):
    """verl's actor ``TrainingWorker`` whose update metrics carry ``grad_norm_micro`` and
    ``micro_batch`` (the first micro-batch's gradient norm and sequences; squared norms averaged
    over the data-parallel group). Only for a step of one optimizer update (one PPO mini-batch,
    one epoch): several updates per step log their mean ``grad_norm`` over mini-batches smaller
    than the record's batch, which the two-batch estimate cannot pair."""

    rlvr_probe: EngineProbe | None = None
    _rlvr_probe_failed = False
    _rlvr_updates = 0
    _rlvr_single = False

    def _rlvr_ensure_probe(self) -> EngineProbe | None:
        """The probe, built at the first update (the engine's module exists only after ``reset``)."""
        if self.rlvr_probe is None and not self._rlvr_probe_failed:
            config = getattr(self.loss_fn, "keywords", {}).get("config")
            try:
                self.rlvr_probe = EngineProbe(self.engine, getattr(config, "loss_agg_mode", None))
            except Exception:
                log.exception("rlvr-schedule: no micro-batch gradient norm on this worker")
                self._rlvr_probe_failed = True
        return self.rlvr_probe

    def train_mini_batch(self, data: Any) -> Any:
        self._rlvr_updates = 0
        return super().train_mini_batch(data)

    def train_batch(self, data: Any) -> Any:
        probe = self._rlvr_ensure_probe()
        self._rlvr_updates += 1
        self._rlvr_single = self._rlvr_updates == 1 and bool(
            tu.get(data, key="update_lr_scheduler", default=False)
        )
        if probe is not None:
            probe.begin()
        return super().train_batch(data)

    def _postprocess_output(self, output: Any, **kwargs: Any) -> Any:
        probe = self.rlvr_probe
        if probe is not None and not kwargs.get("forward_only", True):
            metrics = probe.metrics(self.engine.get_data_parallel_group())  # every dp rank calls it
            if self._rlvr_single:  # one-element lists, like the loss's per-micro-batch metrics
                output["metrics"].update({k: [v] for k, v in metrics.items()})
        return super()._postprocess_output(output, **kwargs)


class ScheduleActorRolloutRefWorker(LRControlMixin, ActorRolloutRefWorker):
    """verl's ActorRolloutRefWorker with :meth:`LRControlMixin.rlvr_set_lr` and the metered actor
    :class:`ScheduleTrainingWorker`."""

    actor_worker_cls = ScheduleTrainingWorker


def _settings(config: Any) -> dict[str, Any]:
    section = config.get(SETTINGS_KEY, None)
    if section is None or not section.get("schedule"):
        raise ValueError(
            f"the verl config has no '{SETTINGS_KEY}.schedule' (a schedule YAML/JSON file); "
            "launch with `python -m rlvr_schedule_adapters.verl --schedule FILE ...`"
        )
    mode = section.get("mini_batch_mode", "per_step") or "per_step"
    if mode not in MINI_BATCH_MODES:
        raise ValueError(f"{SETTINGS_KEY}.mini_batch_mode must be one of {MINI_BATCH_MODES}, got {mode!r}")
    return {
        "schedule": str(section.schedule),
        "mini_batch_mode": mode,
        "jsonl": section.get("jsonl", None),
        "state_file": section.get("state_file", None) or STATE_FILE,
        "advisory": bool(section.get("advisory", False)),
    }


def build_controller(
    config: Any,
    apply_fn: Callable[[int, float], None],
    *,
    schedule: Any = None,
    plugins: Any = None,
    save_fn: Any = None,
) -> ScheduleController:
    """A controller for ``config`` (its ``rlvr_schedule`` section names the schedule file, whose
    ``watch`` group may turn the checkpoint at an alarm on or off)."""
    from rlvr_schedule.ingest import collect_aliases
    from rlvr_schedule.plugins import PluginHost

    settings = _settings(config) if schedule is None else {"jsonl": None, "advisory": False}
    if plugins is None:
        plugins = PluginHost()
    if settings.get("jsonl"):
        from rlvr_schedule.plugins.sinks import JsonlSink

        plugins.register(JsonlSink(settings["jsonl"]), name="rlvr-verl-jsonl")
    watch: dict[str, Any] = {}
    if schedule is None:
        body, watch = split_watch(settings["schedule"])
        schedule = build_schedule(body, plugins=plugins)
    layout = read_layout(config)
    lr0 = float(config.actor_rollout_ref.actor.optim.lr)
    return ScheduleController(
        schedule,
        group_size=layout.group_size,
        running=(layout.rollouts, lr0),
        apply_fn=apply_fn,
        plugins=plugins,
        aliases=collect_aliases(plugins),
        advisory=settings["advisory"],
        save_fn=save_fn,
        checkpoint_on_alarm=watch.get("checkpoint_on_alarm"),
    )


@register_trainer(TRAINER_NAME)
class RlvrSchedulePPOTrainer(PPOTrainerSync):
    """``PPOTrainerSync`` whose rollouts per step and actor LR follow a batch schedule.

    Start-up: pins ``data.gen_batch_size`` and warns about planned
    stages the set-up cannot hold (:class:`ScheduleSetupWarning`). Each step: the metrics reach the schedule through a
    ``Tracking`` backend; a new stage is written into the per-step config and sent to the
    workers' optimizers. Checkpoints get the scheduler state beside them; a resume restores it.
    """

    def __init__(self, config: DictConfig) -> None:
        v1 = config.trainer.v1
        if v1.trainer_mode == TRAINER_NAME:
            with open_dict(v1):
                v1.trainer_mode = "sync"  # the base classes branch on "sync"
        if v1.trainer_mode != "sync":
            raise ValueError(
                f"{type(self).__name__} runs the sync trainer, got trainer_mode={v1.trainer_mode!r}"
            )
        self.rlvr_settings = _settings(config)
        self._rlvr_alarm: tuple[int, str, dict[str, Any]] | None = None  # step, folder, what it holds
        self.rlvr_controller = build_controller(config, self._rlvr_apply, save_fn=self._rlvr_save_at_alarm)
        schedule = self.rlvr_controller.schedule
        pin_gen_batch_size(config, schedule)
        self._rlvr_mini_batches = read_layout(config).mini_batches or 1
        self.rlvr_setup_warnings = self._rlvr_publish_grid(config)
        self.rlvr_setup_warnings += check_setup(
            config, schedule, mini_batch_mode=self.rlvr_settings["mini_batch_mode"]
        )
        self._rlvr_pending_state: tuple[int, str] | None = None
        super().__init__(config)

    def _rlvr_publish_grid(self, config: Any) -> list[str]:
        """Publish verl's grid of runnable batches (group size, gen_batch_size, mini-batches, data-parallel
        ranks) to the schedule; what conflicts is a set-up warning."""
        grid = host_grid(
            config,
            mini_batch_mode=self.rlvr_settings["mini_batch_mode"],
            mini_batches=self._rlvr_mini_batches,
        )
        notes = self.rlvr_controller.driver.set_host_grid(grid)
        warn_setup(notes, framework="verl")
        return notes

    # --- workers ------------------------------------------------------------------------------
    def _init_resource_pool_mgr(self) -> None:
        super()._init_resource_pool_mgr()
        for role in (Role.ActorRolloutRef, Role.ActorRollout, Role.Actor):
            if role in self.role_worker_mapping:
                self.role_worker_mapping[role] = ray.remote(ScheduleActorRolloutRefWorker)
                break

    # --- applying a stage ---------------------------------------------------------------------
    def _rlvr_apply(self, batch: int, lr: float) -> None:
        """Write ``batch`` rollouts per step into the config and ``lr`` into every rank's
        optimizer; on failure the config is restored and the error re-raised."""
        cfg = self.config
        before = (cfg.data.train_batch_size, cfg.actor_rollout_ref.actor.ppo_mini_batch_size)
        critic_before = cfg.critic.get("ppo_mini_batch_size") if cfg.get("critic") is not None else None
        use_critic = bool(getattr(self, "use_critic", False))
        try:
            layout = apply_rollout_batch(
                cfg,
                batch,
                mini_batch_mode=self.rlvr_settings["mini_batch_mode"],
                mini_batches=self._rlvr_mini_batches,
                use_critic=use_critic,
            )
            self.actor_rollout_wg.rlvr_set_lr(lr=float(lr))
        except Exception:
            with open_dict(cfg):
                cfg.data.train_batch_size, cfg.actor_rollout_ref.actor.ppo_mini_batch_size = before
                if use_critic and critic_before is not None:
                    cfg.critic.ppo_mini_batch_size = critic_before
            raise
        rb = getattr(self, "replay_buffer", None)
        if rb is not None and getattr(rb, "train_batch_size", None) is not None:
            rb.train_batch_size = layout.train_batch_size  # Sync DAPO's in-flight bound

    # --- loop hooks ---------------------------------------------------------------------------
    def on_train_begin(self) -> None:
        super().on_train_begin()
        try:
            attach_backend(self.logger, ScheduleMetricsBackend(self.rlvr_controller, self._rlvr_after_log))
        except Exception as exc:  # the schedule will not run
            self.rlvr_controller.fault("attach", exc)
            return
        try:  # again: a resumed state may hold a stage off this launch's grid (another world size)
            self._rlvr_publish_grid(self.config)
        except Exception as exc:
            self.rlvr_controller.fault("grid", exc)
        self.rlvr_controller.start()

    # --- checkpoints --------------------------------------------------------------------------
    def _rlvr_state(self, *, complete: bool) -> dict[str, Any]:
        state = self.rlvr_controller.state_dict()
        state["complete"] = complete
        state["global_step"] = int(self.global_steps)
        state["pending_rollouts"] = 0 if complete else self.rlvr_controller.running[0]
        return state

    def _save_checkpoint(self) -> None:
        super()._save_checkpoint()
        folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}")
        try:
            save_state(folder, self._rlvr_state(complete=False), name=self.rlvr_settings["state_file"])
            self._rlvr_pending_state = (int(self.global_steps), folder)
        except Exception as exc:
            self.rlvr_controller.fault("save_state", exc)

    def _rlvr_after_log(self, step: int) -> None:
        pending = self._rlvr_pending_state
        if pending is not None and pending[0] == step:
            self._rlvr_pending_state = None
            save_state(pending[1], self._rlvr_state(complete=True), name=self.rlvr_settings["state_file"])
        alarm, self._rlvr_alarm = self._rlvr_alarm, None
        if alarm is not None and alarm[0] == step:
            keep_alarm_checkpoint(alarm[1], alarm[2])

    def _rlvr_save_at_alarm(self, alarms: list[Any], record: Any) -> str:
        """The driver's ``save`` at a raised alarm: verl's own ``_save_checkpoint`` (unless this
        step saved already), kept apart from ``max_actor_ckpt_to_keep`` as
        ``alarm-global_step_<N>`` once the step's scheduler state is complete (after the log)."""
        step = int(self.global_steps)
        folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{step}")
        if self._rlvr_pending_state is None or self._rlvr_pending_state[0] != step:
            self._save_checkpoint()
        info = {
            "step": step,
            "samples": int(record.samples),
            "batch": int(record.batch),
            "alarms": [a.to_dict() for a in alarms],
        }
        self._rlvr_alarm = (step, folder, info)
        return os.path.join(self.config.trainer.default_local_dir, f"{ALARM_PREFIX}global_step_{step}")

    def _load_checkpoint(self) -> None:
        super()._load_checkpoint()
        try:
            self._rlvr_restore()
        except Exception as exc:  # the schedule starts afresh
            self.rlvr_controller.fault("load_state", exc)

    def _rlvr_restore(self) -> None:
        folder = checkpoint_folder(self.config, int(self.global_steps))
        if folder is None:
            return
        state = load_state(folder, name=self.rlvr_settings["state_file"])
        if state is None:
            warnings.warn(
                f"rlvr-schedule: no scheduler state in {folder}; the schedule restarts from its "
                "first stage and counts rollouts from zero",
                ScheduleSetupWarning,
                stacklevel=2,
            )
            return
        if not state.get("complete", True):
            # saved before step N's record reached the schedule: count its rollouts at least
            state = dict(state)
            state["samples"] = int(state["samples"]) + int(state.get("pending_rollouts", 0))
            state["step"] = state.get("global_step", state.get("step"))
            log.warning(
                "rlvr-schedule: the state in %s predates step %s's record; its rollouts are "
                "counted, the record itself is lost",
                folder,
                state.get("global_step"),
            )
        self.rlvr_controller.load_state_dict(state)


class _RunnerWithSchedule(TaskRunnerV1.__ray_actor_class__):  # type: ignore[name-defined,misc]
    """verl's TaskRunnerV1 that runs :class:`RlvrSchedulePPOTrainer` (via trainer_mode ``rlvr_sync``)."""

    def run(self, config: DictConfig) -> None:
        with open_dict(config.trainer.v1):
            config.trainer.v1.trainer_mode = TRAINER_NAME
        return super().run(config)


#: Pass to ``verl.trainer.main_ppo.run_ppo(config, task_runner_class=...)``.
RlvrScheduleTaskRunner = ray.remote(_RunnerWithSchedule)
