"""The TRL 1.16 adapter: a ``TrainerCallback`` that runs a schedule inside ``GRPOTrainer``.

plugin    the entry point (metric names); imports neither transformers nor TRL
callback  :class:`RlvrScheduleCallback`: TRL events -> records -> :class:`~rlvr_schedule.driver.ScheduleDriver`,
          and the host's ``apply`` (gradient accumulation and base LR at an aligned update boundary)
checks    the set-up check: can the Trainer's data plan hold the schedule
epochs    the HF Trainer's arithmetic of rollouts, accumulation and epochs
checkpoints  the last complete checkpoint of a killed run
data_order   which prompts a resumed run takes next (the sampler's shuffle state and the true skip)
noise     the micro-batch gradient norm for the gradient-noise estimate

Importing this package imports neither transformers nor TRL; ``RlvrScheduleCallback`` (an ordinary
``TrainerCallback`` subclass in ``callback``) is imported on first access. What TRL does with each
knob mid-run is in ``docs/adapters_trl.md``.
"""

from __future__ import annotations

from typing import Any

from rlvr_schedule_adapters._common import ScheduleSetupWarning
from rlvr_schedule_adapters.trl.checkpoints import last_complete_checkpoint
from rlvr_schedule_adapters.trl.plugin import TRL_METRIC_ALIASES, rlvr_schedule_metric_aliases

__all__ = [
    "TRL_METRIC_ALIASES",
    "RlvrScheduleCallback",  # noqa: F822 (built lazily by the module __getattr__)
    "ScheduleSetupWarning",
    "find_callback",
    "last_complete_checkpoint",
    "rlvr_schedule_metric_aliases",
]


def __getattr__(name: str) -> Any:
    if name in ("RlvrScheduleCallback", "find_callback"):
        from rlvr_schedule_adapters._common import missing_framework

        said = missing_framework("trl")
        if said is not None:
            raise ModuleNotFoundError(said[1], name=said[0])
        from rlvr_schedule_adapters.trl import callback

        return getattr(callback, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
