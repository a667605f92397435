"""The scheduled Ray actor classes that replace OpenRLHF's ``PPOTrainer`` and ``PolicyModelActor``.

They subclass the plain classes behind OpenRLHF's Ray actors (``__ray_actor_class__``) and live at
module level here so that Ray pickles them by reference: every worker imports this module and gets
the same classes. :func:`rlvr_schedule_adapters.openrlhf.launch.patch_openrlhf` puts them in place.
Importing this module imports OpenRLHF, Ray and torch.
"""

from __future__ import annotations

import logging
from typing import Any

import ray
from openrlhf.trainer import ppo_trainer as _ppo_trainer
from openrlhf.trainer.ray import ppo_actor as _ppo_actor

from rlvr_schedule_adapters.openrlhf.controller import STATE_KEY, make_controller
from rlvr_schedule_adapters.openrlhf.noise import MicroNormProbe
from rlvr_schedule_adapters.openrlhf.worker import WORKER_METHOD, set_worker_batch_and_lr

__all__ = ["RlvrPPOTrainer", "RlvrPolicyModelActor", "ScheduledPPOTrainer", "ScheduledPolicyModelActor"]

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
        try:
            self.rlvr = make_controller(self.args, self._rlvr_apply_workers)
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
        return super().save_logs_and_checkpoints(global_step, logs_dict, client_states)


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


assert RlvrPolicyModelActor.rlvr_set_batch_and_lr.__name__ == WORKER_METHOD

#: The Ray actor classes the CLI module creates once patched in.
ScheduledPPOTrainer = ray.remote(RlvrPPOTrainer)
ScheduledPolicyModelActor = ray.remote(num_gpus=1)(RlvrPolicyModelActor)
