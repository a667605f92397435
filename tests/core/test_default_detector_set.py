"""One detector set: ``watch``, ``fit`` (and so ``report``), the driver (and so every adapter) and
the collapse watch build the same detectors, configured alike (the live failure forecast out of all
of them: one rule)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlvr_schedule.cli import _Watch
from rlvr_schedule.clocks.failure import FailureClock, default_detectors
from rlvr_schedule.clocks.failure.alarms import CollapseWatch
from rlvr_schedule.driver import ScheduleDriver
from rlvr_schedule.policy import load_schedule

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "schedules" / "two_clock.yaml"


def signature(dets: Any) -> list[tuple[str, dict[str, Any]]]:
    """Each detector's class and fresh state (its configuration: thresholds, patience, warm-ups)."""
    return [(type(d).__name__, d.state_dict()) for d in dets]


def test_watch_fit_driver_and_collapse_watch_build_one_set() -> None:
    ref = signature(default_detectors())
    assert "failure_forecast" not in [s["name"] for _, s in ref]
    assert "reward_fall" in [s["name"] for _, s in ref]
    watch = signature(_Watch().detectors)
    fit = signature(FailureClock().detector_set())
    driver = ScheduleDriver(load_schedule(EXAMPLE), advisory=True)
    assert driver.watch is not None
    host = signature(driver.watch.detectors)
    plain = signature(CollapseWatch().detectors)
    assert watch == ref
    assert fit == ref
    assert host == ref
    assert plain == ref
