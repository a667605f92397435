"""The example schedules, shipped with the package so that code and tests find them from any
directory (``examples/schedules/`` in the repository links here).

    from rlvr_schedule.examples import schedule_path
    load_schedule(schedule_path("two_clock.yaml"))
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["schedule_path", "schedule_names"]

_HERE = Path(__file__).resolve().parent


def schedule_names() -> list[str]:
    """The shipped schedule files' names."""
    return sorted(p.name for p in _HERE.glob("*.yaml"))


def schedule_path(name: str) -> Path:
    """The installed path of the example schedule ``name`` (e.g. ``"two_clock.yaml"``)."""
    from rlvr_schedule.errors import ConfigError

    p = _HERE / name
    if not p.is_file():
        raise ConfigError(f"no such example schedule (shipped: {', '.join(schedule_names())})", source=name)
    return p
