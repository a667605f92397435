"""The scheduled Ray actor classes that replace OpenRLHF's ``PPOTrainer`` and ``PolicyModelActor``.

They subclass the plain classes behind OpenRLHF's Ray actors (``__ray_actor_class__``) and live at
module level here so that Ray pickles them by reference: every worker imports this module and gets
the same classes. :func:`rlvr_schedule_adapters.openrlhf.launch.patch_openrlhf` puts them in place.
Importing this module imports OpenRLHF, Ray and torch.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import ray
from openrlhf.trainer import ppo_trainer as _ppo_trainer
from openrlhf.trainer.ray import ppo_actor as _ppo_actor

from rlvr_schedule_adapters._common import ALARM_PREFIX
from rlvr_schedule_adapters.openrlhf.controller import STATE_KEY, make_controller
from rlvr_schedule_adapters.openrlhf.noise import MicroNormProbe
from rlvr_schedule_adapters.openrlhf.worker import WORKER_METHOD, set_worker_batch_and_lr

__all__ = ["RlvrPPOTrainer", "RlvrPolicyModelActor", "ScheduledPPOTrainer", "ScheduledPolicyModelActor"]

#: The policy workers' method that saves the checkpoint at an alarm (OpenRLHF's own DeepSpeed save).
ALARM_SAVE_METHOD = "rlvr_save_alarm_checkpoint"

log = logging.getLogger("rlvr_schedule.openrlhf")


def _plain(cls: Any) -> type:
    """The class behind a Ray actor class (the class itself if it is not one)."""
    return getattr(cls, "__ray_actor_class__", cls)


class RlvrPPOTrainer(_plain(_ppo_trainer.PPOTrainer)):  # type: ignore[misc]
    """OpenRLHF's sync ``PPOTrainer`` plus the schedule controller.

    ``init_checkpoint_states`` (called once at the top of ``fit``) restores the schedule saved in
    ``client_states`` and applies its current stage; ``save_logs_and_checkpoints`` (after every
    step) steps the schedule, applies a switch and stores the schedule state in ``client_states``
    before OpenRLHF checkpoints them. Adapter faults are logged; training goes on.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rlvr_setup()

    def _rlvr_setup(self) -> None:
        """Build the controller from ``args.rlvr_schedule``; a failure leaves the run unscheduled."""
        self.rlvr = None
        self._rlvr_alarm: tuple[int, str, dict[str, Any]] | None = None  # step, folder, what it holds
        try:
            self.rlvr = make_controller(self.args, self._rlvr_apply_workers, save_fn=self._rlvr_save_at_alarm)
        except Exception:
            log.exception("rlvr-schedule: could not build the schedule; training runs without it")

    def _rlvr_apply_workers(self, train_batch: int, lr: float) -> None:
        refs = self.actor_model_group.async_run_method(
            method_name=WORKER_METHOD, train_batch=train_batch, lr=lr
        )
        results = ray.get(refs)
        bad = [r for r in results if not (isinstance(r, dict) and r.get("ok"))]
        if bad:
            raise RuntimeError(
                f"{len(bad)} of {len(results)} policy worker(s) refused batch {train_batch}, "
                f"lr {lr:g}: {bad[0]}"
            )

    def init_checkpoint_states(self) -> dict:
        states = super().init_checkpoint_states()
        if self.rlvr is not None:
            self.rlvr.restore(states)
            self.rlvr.begin()
        return states

    def save_logs_and_checkpoints(
        self, global_step: int, logs_dict: Any = None, client_states: Any = None
    ) -> None:
        logs_dict = logs_dict if logs_dict is not None else {}
        client_states = client_states if client_states is not None else {}
        if self.rlvr is not None:
            self.rlvr.step_logs(global_step, logs_dict)
            try:
                client_states[STATE_KEY] = self.rlvr.state_dict()
            except Exception:
                log.exception("rlvr-schedule: could not save the schedule state")
        out = super().save_logs_and_checkpoints(global_step, logs_dict, client_states)
        alarm, self._rlvr_alarm = self._rlvr_alarm, None
        if alarm is not None and alarm[0] == global_step:
            try:
                self._rlvr_save_alarm(alarm[1], global_step, dict(client_states), alarm[2])
            except Exception as exc:
                if self.rlvr is not None:
                    self.rlvr.fault("save at an alarm", exc)
        return out

    def _rlvr_save_at_alarm(self, alarms: list[Any], record: Any) -> str:
        """The driver's ``save`` at a raised alarm: the save itself comes after the step's logs
        (:meth:`save_logs_and_checkpoints`), with the step's state in ``client_states``."""
        step = int(record.step)
        folder = os.path.join(str(self.args.ckpt.path), f"{ALARM_PREFIX}global_step{step}")
        info = {
            "step": step,
            "samples": int(record.samples),
            "batch": int(record.batch),
            "alarms": [a.to_dict() for a in alarms],
        }
        self._rlvr_alarm = (step, folder, info)
        return folder

    def _rlvr_save_alarm(self, folder: str, step: int, client_states: dict, info: dict) -> None:
        """OpenRLHF's own checkpoint on every policy rank (:data:`ALARM_SAVE_METHOD`), into
        ``<ckpt.path>/alarm-global_step<N>/_actor``: apart from ``<ckpt.path>/_actor``, whose
        rotation (``ckpt.max_num``) deletes any directory in it; resume with that folder as
        ``--ckpt.path``."""
        refs = self.actor_model_group.async_run_method(
            method_name=ALARM_SAVE_METHOD,
            folder=folder,
            tag=f"global_step{step}",
            client_states=client_states,
        )
        bad = [r for r in ray.get(refs) if not (isinstance(r, dict) and r.get("ok"))]
        if bad:
            raise RuntimeError(f"{len(bad)} policy worker(s) could not save the alarm checkpoint: {bad[0]}")
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, ".alarm.json.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(info, fh, indent=1)
        os.replace(tmp, os.path.join(folder, "alarm.json"))


class RlvrPolicyModelActor(_plain(_ppo_actor.PolicyModelActor)):  # type: ignore[misc]
    """OpenRLHF's ``PolicyModelActor`` plus the worker method :data:`WORKER_METHOD` and the
    micro-batch gradient norm in the status ``fit`` returns (``grad_norm_micro``, ``micro_batch``:
    :mod:`rlvr_schedule_adapters.openrlhf.noise`)."""

    rlvr_probe: MicroNormProbe | None = None

    def init_model_from_pretrained(self, *args: Any, **kwargs: Any) -> Any:
        out = super().init_model_from_pretrained(*args, **kwargs)
        self.rlvr_attach_probe()
        return out

    def rlvr_attach_probe(self) -> None:
        """Hook the policy trainer's micro-batches; a failure only leaves the records without it."""
        try:
            self.rlvr_probe = MicroNormProbe(self.trainer)
        except Exception:
            log.exception("rlvr-schedule: no micro-batch gradient norm on this worker")

    def fit(self, kl_ctl: float = 0) -> dict:
        status = super().fit(kl_ctl)
        if self.rlvr_probe is not None:
            try:
                status.update(self.rlvr_probe.metrics())
            except Exception:
                log.exception("rlvr-schedule: could not read the micro-batch gradient norm")
        return status

    def rlvr_set_batch_and_lr(self, train_batch: int | None = None, lr: float | None = None) -> dict:
        """Set samples per update and base LR on this rank; ``{"ok": False, "error": ...}`` on failure."""
        try:
            out = set_worker_batch_and_lr(
                self.strategy,
                self.actor.model,
                self.actor_optim,
                self.actor_scheduler,
                train_batch=train_batch,
                lr=lr,
            )
        except Exception as exc:
            log.exception("rlvr-schedule: worker could not set batch %s, lr %s", train_batch, lr)
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"ok": True, **out}

    def rlvr_save_alarm_checkpoint(self, folder: str, tag: str, client_states: dict | None = None) -> dict:
        """OpenRLHF's DeepSpeed checkpoint of this rank's policy into ``folder/_actor`` (the layout
        of ``ckpt.path``, so a run resumes from ``folder``); ``{"ok": False, ...}`` on failure."""
        try:
            args = self.strategy.args
            self.strategy.save_ckpt(
                self.actor.model,
                os.path.join(folder, "_actor"),
                tag,
                1,
                args.ckpt.max_mem,
                client_states or {},
            )
        except Exception as exc:
            log.exception("rlvr-schedule: worker could not save the alarm checkpoint in %s", folder)
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"ok": True}


assert RlvrPolicyModelActor.rlvr_set_batch_and_lr.__name__ == WORKER_METHOD
assert RlvrPolicyModelActor.rlvr_save_alarm_checkpoint.__name__ == ALARM_SAVE_METHOD

#: The Ray actor classes the CLI module creates once patched in.
ScheduledPPOTrainer = ray.remote(RlvrPPOTrainer)
ScheduledPolicyModelActor = ray.remote(num_gpus=1)(RlvrPolicyModelActor)
