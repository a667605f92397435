"""Backward-compatible path of the TRL adapter (and its ``trl`` entry point in installed metadata).

The adapter lives in :mod:`rlvr_schedule_adapters.trl`; this module re-exports it. Importing it
imports neither transformers nor TRL.
"""

from __future__ import annotations

from typing import Any

from rlvr_schedule_adapters.trl import (
    TRL_METRIC_ALIASES,
    ScheduleSetupWarning,
    last_complete_checkpoint,
    rlvr_schedule_metric_aliases,
)

__all__ = [
    "TRL_METRIC_ALIASES",
    "RlvrScheduleCallback",  # noqa: F822 (lazy)
    "ScheduleSetupWarning",
    "find_callback",  # noqa: F822 (lazy)
    "last_complete_checkpoint",
    "rlvr_schedule_metric_aliases",
]


def __getattr__(name: str) -> Any:
    if name in ("RlvrScheduleCallback", "find_callback"):
        from rlvr_schedule_adapters.trl import callback

        return getattr(callback, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
