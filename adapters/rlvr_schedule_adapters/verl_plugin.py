"""rlvr-schedule for verl 0.9.1: the entry-point module (group ``rlvr_schedule``, name ``verl``).

Loading it (as :class:`~rlvr_schedule.plugins.PluginHost` does for every installed plugin)
imports neither verl nor torch: it holds the metric-alias hook and lazy re-exports of the
adapter in :mod:`rlvr_schedule_adapters.verl`. Run a schedule with::

    python -m rlvr_schedule_adapters.verl_plugin --schedule schedule.yaml <verl Hydra overrides>

or from Python: ``launch(build_config(overrides, "schedule.yaml"))``. Public names:

- ``RlvrSchedulePPOTrainer`` (registered as trainer ``"rlvr_sync"``), ``RlvrScheduleTaskRunner``,
  ``ScheduleActorRolloutRefWorker`` / ``LRControlMixin`` (worker method ``rlvr_set_lr``): verl classes.
- ``ScheduleController``, ``ScheduleMetricsBackend``, ``attach_backend``: metrics -> schedule -> stage.
- ``apply_rollout_batch``, ``pin_gen_batch_size``, ``check_setup``, ``VerlSetupWarning``: the config side.
- ``rescale_lr`` (an alias of :func:`rlvr_schedule_adapters._common.scale_base_lr`, the LR change
  shared by all adapters); ``save_state`` / ``load_state`` / ``STATE_FILE``; ``build_config`` /
  ``launch`` / ``main``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Mapping

from rlvr_schedule.plugins import hookimpl

if TYPE_CHECKING:  # pragma: no cover  (the names resolve lazily through __getattr__)
    from rlvr_schedule_adapters.verl.batch import (
        VerlSetupWarning,
        apply_rollout_batch,
        check_setup,
        pin_gen_batch_size,
        read_layout,
    )
    from rlvr_schedule_adapters.verl.controller import ScheduleController
    from rlvr_schedule_adapters.verl.launch import build_config, launch
    from rlvr_schedule_adapters._common import scale_base_lr as rescale_lr
    from rlvr_schedule_adapters.verl.state import STATE_FILE, load_state, save_state
    from rlvr_schedule_adapters.verl.tracking import ScheduleMetricsBackend, attach_backend
    from rlvr_schedule_adapters.verl.trainer import (
        SETTINGS_KEY,
        TRAINER_NAME,
        LRControlMixin,
        RlvrSchedulePPOTrainer,
        RlvrScheduleTaskRunner,
        ScheduleActorRolloutRefWorker,
    )

__all__ = [
    "VERL_ALIASES",
    "rlvr_schedule_metric_aliases",
    "RlvrSchedulePPOTrainer",
    "RlvrScheduleTaskRunner",
    "ScheduleActorRolloutRefWorker",
    "LRControlMixin",
    "TRAINER_NAME",
    "SETTINGS_KEY",
    "ScheduleController",
    "ScheduleMetricsBackend",
    "attach_backend",
    "apply_rollout_batch",
    "pin_gen_batch_size",
    "check_setup",
    "read_layout",
    "VerlSetupWarning",
    "rescale_lr",
    "save_state",
    "load_state",
    "STATE_FILE",
    "build_config",
    "launch",
    "main",
]

#: What verl 0.9.1 logs per step (``Tracking.log``), by canonical field. The core tables hold
#: the same names; listing them here keeps the adapter's reading of verl explicit.
VERL_ALIASES: Mapping[str, str] = {
    "training/global_step": "step",
    "actor/lr": "lr",
    "critic/score/mean": "reward_mean",
    "critic/score/std": "reward_std",
    "actor/entropy": "entropy",
    "actor/kl_loss": "kl",
    "actor/ppo_kl": "kl",
    "actor/grad_norm": "grad_norm",
    "actor/pg_clipfrac": "clip_frac",
    "response_length/mean": "response_length",
}


@hookimpl
def rlvr_schedule_metric_aliases() -> Mapping[str, str]:
    return dict(VERL_ALIASES)


_LAZY = {
    "RlvrSchedulePPOTrainer": "trainer",
    "RlvrScheduleTaskRunner": "trainer",
    "ScheduleActorRolloutRefWorker": "trainer",
    "LRControlMixin": "trainer",
    "TRAINER_NAME": "trainer",
    "SETTINGS_KEY": "trainer",
    "ScheduleController": "controller",
    "ScheduleMetricsBackend": "tracking",
    "attach_backend": "tracking",
    "apply_rollout_batch": "batch",
    "pin_gen_batch_size": "batch",
    "check_setup": "batch",
    "read_layout": "batch",
    "VerlSetupWarning": "batch",
    "rescale_lr": "rlvr_schedule_adapters._common:scale_base_lr",
    "save_state": "state",
    "load_state": "state",
    "STATE_FILE": "state",
    "build_config": "launch",
    "launch": "launch",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if ":" in mod:  # a name kept under another module (``module:attribute``)
        mod, attr = mod.split(":")
        return getattr(importlib.import_module(mod), attr)
    return getattr(importlib.import_module(f"rlvr_schedule_adapters.verl.{mod}"), name)


def main(argv: list[str] | None = None) -> int:
    """``python -m rlvr_schedule_adapters.verl_plugin --schedule FILE <Hydra overrides>``."""
    from rlvr_schedule_adapters.verl.launch import main as _main

    return _main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
