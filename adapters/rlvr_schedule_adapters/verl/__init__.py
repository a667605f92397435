"""The verl 0.9.1 adapter, split by job.

plugin      the entry point (metric names); imports neither verl nor torch
controller  framework-free: metrics -> records -> :class:`~rlvr_schedule.driver.ScheduleDriver`
batch       rollouts per step via the per-step config reads (the host's ``apply``); start-up checks
state       the driver's state beside checkpoints (atomic JSON)
tracking    the ``Tracking`` backend that feeds the controller
trainer     the verl classes (imports verl): trainer, worker (``rlvr_set_lr``), Ray task runner
launch      the command line (``python -m rlvr_schedule_adapters.verl --schedule FILE [--advisory] ...``)

The LR change (base_lrs and param groups together) is the adapters' shared
:func:`rlvr_schedule_adapters._common.scale_base_lr`. Only ``trainer`` and ``launch`` import verl,
and only when used; the names below resolve lazily. What verl does with each knob mid-run is in
``docs/adapters_verl.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

from rlvr_schedule_adapters.verl.plugin import VERL_ALIASES, rlvr_schedule_metric_aliases

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
    "save_state",
    "load_state",
    "STATE_FILE",
    "build_config",
    "launch",
    "main",
]

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
    "save_state": "state",
    "load_state": "state",
    "STATE_FILE": "state",
    "build_config": "launch",
    "launch": "launch",
    "main": "launch",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{mod}"), name)
