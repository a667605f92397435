"""The ``verl`` entry point of the ``rlvr_schedule`` plugin group: verl's metric names.

Imports neither verl nor torch (the plugin loader imports it in every process).
"""

from __future__ import annotations

from collections.abc import Mapping

from rlvr_schedule.ingest.aliases import FRAMEWORK_METRICS
from rlvr_schedule.plugins import hookimpl

__all__ = ["VERL_ALIASES", "rlvr_schedule_metric_aliases"]

#: What verl 0.9.1 logs per step (``Tracking.log``), by canonical field: the core's framework table,
#: plus the PPO ratio's KL, which verl logs beside ``actor/kl_loss`` (the table prefers the latter),
#: and what the adapter's actor worker adds (:mod:`rlvr_schedule_adapters.verl.noise`).
VERL_ALIASES: Mapping[str, str] = {
    **{key: field for field, key in FRAMEWORK_METRICS["verl"].items()},
    "actor/ppo_kl": "kl",
    "actor/grad_norm_micro": "grad_norm_micro",
    "actor/micro_batch": "micro_batch",
}


@hookimpl
def rlvr_schedule_metric_aliases() -> Mapping[str, str]:
    """verl's metric names."""
    return dict(VERL_ALIASES)
