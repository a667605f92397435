"""The ``trl`` entry point of the ``rlvr_schedule`` plugin group: TRL's metric names.

Imports neither transformers nor TRL (the plugin loader imports it in every process).
"""

from __future__ import annotations

from collections.abc import Mapping

from rlvr_schedule.ingest.aliases import FRAMEWORK_METRICS
from rlvr_schedule.plugins import hookimpl

__all__ = ["TRL_METRIC_ALIASES", "rlvr_schedule_metric_aliases"]

#: TRL 1.16 ``GRPOTrainer`` log keys -> canonical fields (from the core's one framework table).
TRL_METRIC_ALIASES: Mapping[str, str] = {key: field for field, key in FRAMEWORK_METRICS["trl"].items()}


@hookimpl
def rlvr_schedule_metric_aliases() -> Mapping[str, str]:
    """TRL's metric names."""
    return dict(TRL_METRIC_ALIASES)
