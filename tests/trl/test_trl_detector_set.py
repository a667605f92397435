"""The TRL callback runs the detector set ``watch`` and ``fit`` run (one set)."""

from __future__ import annotations

from pathlib import Path

from rlvr_schedule.cli import _Watch
from rlvr_schedule.clocks.failure import FailureClock, default_detectors
from rlvr_schedule_adapters.trl import RlvrScheduleCallback

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "schedules" / "two_clock.yaml"


def signature(dets):
    return [(type(d).__name__, d.state_dict()) for d in dets]


def test_trl_callback_builds_the_watch_and_fit_set() -> None:
    cb = RlvrScheduleCallback(str(EXAMPLE), apply=False)
    assert cb.driver.watch is not None
    ref = signature(default_detectors())
    assert signature(cb.driver.watch.detectors) == ref
    assert signature(_Watch().detectors) == ref
    assert signature(FailureClock().detector_set()) == ref
