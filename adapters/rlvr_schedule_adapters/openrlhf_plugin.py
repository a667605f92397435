"""Backward-compatible path of the OpenRLHF adapter (and its ``openrlhf`` entry point in installed
metadata).

The adapter lives in :mod:`rlvr_schedule_adapters.openrlhf`; this module re-exports it lazily
(importing it imports neither OpenRLHF nor Ray nor torch) and keeps the launcher::

    python -m rlvr_schedule_adapters.openrlhf_plugin --schedule FILE [--advisory] <openrlhf args>
"""

from __future__ import annotations

from typing import Any

from rlvr_schedule_adapters import openrlhf as _openrlhf
from rlvr_schedule_adapters.openrlhf.plugin import (  # noqa: F401
    OPENRLHF_ALIASES,
    rlvr_schedule_metric_aliases,
)

__all__ = list(_openrlhf.__all__)


def __getattr__(name: str) -> Any:
    return getattr(_openrlhf, name)


if __name__ == "__main__":  # pragma: no cover - the launcher
    from rlvr_schedule_adapters.openrlhf.launch import main

    main()
