"""Backward-compatible path of the verl adapter (and its ``verl`` entry point in installed metadata).

The adapter lives in :mod:`rlvr_schedule_adapters.verl`; this module re-exports it lazily (importing
it imports neither verl nor torch) and keeps the launcher::

    python -m rlvr_schedule_adapters.verl_plugin --schedule schedule.yaml [--advisory] <verl Hydra overrides>
"""

from __future__ import annotations

from typing import Any

from rlvr_schedule_adapters import verl as _verl
from rlvr_schedule_adapters.verl.plugin import VERL_ALIASES, rlvr_schedule_metric_aliases  # noqa: F401

__all__ = list(_verl.__all__)


def __getattr__(name: str) -> Any:
    return getattr(_verl, name)


def main(argv: list[str] | None = None) -> int:
    """``python -m rlvr_schedule_adapters.verl_plugin --schedule FILE <Hydra overrides>``."""
    from rlvr_schedule_adapters.verl.launch import main as _main

    return _main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
