"""The OpenRLHF 0.11.2 adapter, split by job.

plugin      the entry point (metric names); imports neither OpenRLHF nor Ray nor torch
metrics     OpenRLHF's step logs as numbers
plan        what a rollout batch means in OpenRLHF's args (the trainer side of ``apply``); set-up check
worker      the policy-worker side of ``apply`` (DeepSpeed train batch and base LR on each rank)
controller  framework-free: step logs -> records -> :class:`~rlvr_schedule.driver.ScheduleDriver`
actors      the scheduled Ray actor classes (imports OpenRLHF, Ray and torch)
launch      the command line (``python -m rlvr_schedule_adapters.openrlhf --schedule FILE [--advisory] ...``)

Only ``actors`` and ``launch`` (when run) import OpenRLHF; the names below resolve lazily. What
OpenRLHF does with each knob mid-run is in ``docs/adapters_openrlhf.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

from rlvr_schedule_adapters.openrlhf.plugin import OPENRLHF_ALIASES, rlvr_schedule_metric_aliases

_LAZY = {
    "OPENRLHF_METRICS": "metrics",
    "translate_metrics": "metrics",
    "RolloutPlan": "plan",
    "apply_plan_to_args": "plan",
    "check_setup": "plan",
    "plan_for_batch": "plan",
    "updates_per_rollout": "plan",
    "WORKER_METHOD": "worker",
    "set_worker_batch_and_lr": "worker",
    "ARGS_ATTR": "controller",
    "STATE_KEY": "controller",
    "ScheduleController": "controller",
    "make_controller": "controller",
    "CLI_MODULE": "launch",
    "main": "launch",
    "openrlhf_cli_args": "launch",
    "patch_openrlhf": "launch",
}

__all__ = ["OPENRLHF_ALIASES", "rlvr_schedule_metric_aliases", *_LAZY]


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{mod}"), name)
