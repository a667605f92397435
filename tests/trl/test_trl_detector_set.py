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


def test_a_raised_failure_keeps_the_checkpoint_named_from_before_its_onset(tmp_path) -> None:
    """The checkpoint the driver names for a raised failure (the newest saved before the onset) is
    kept apart from ``save_total_limit`` as ``alarm-checkpoint-N`` with ``alarm.json``."""
    import json
    from types import SimpleNamespace

    from rlvr_schedule.records import StepRecord, WatchAlarm

    cb = RlvrScheduleCallback(str(EXAMPLE), apply=False)
    old = tmp_path / "checkpoint-10"
    old.mkdir()
    (old / "model.safetensors").write_text("weights")
    cb._bound["args"] = SimpleNamespace(output_dir=str(tmp_path), should_save=True)
    cb._control = SimpleNamespace(should_save=False)
    cb.driver.note_checkpoint(str(old), 10)
    alarm = WatchAlarm("failure", "reward_fall", 30, 240, 20, 160, "reward fell", str(old))
    rec = StepRecord(step=30, samples=240, batch=8, lr=1e-6)
    cb._save_at_alarm([alarm], rec)
    kept = tmp_path / "alarm-checkpoint-10"
    assert (kept / "model.safetensors").read_text() == "weights"
    info = json.loads((kept / "alarm.json").read_text())
    assert info["kept_for"]["onset_step"] == 20 and info["kept_for"]["checkpoint"] == str(old)
    assert cb._control.should_save  # and the checkpoint at the alarm itself, as before
