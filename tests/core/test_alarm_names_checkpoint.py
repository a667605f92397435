"""A raised failure names the host's newest checkpoint saved before the failure's onset, on the
reference trainer's recorded crash runs (tests/data/forecast/trainer_runs.json.gz), with rolling
checkpoints the way a host keeps them (every ``SAVE_STEPS`` updates, the last ``KEEP`` of them)."""

from __future__ import annotations

import pytest

from benchmarks.evidence.forecast_skill import trainer_runs
from rlvr_schedule.driver import ScheduleDriver
from rlvr_schedule.policy.static import StaticSchedule

SAVE_STEPS, KEEP = 25, 3


def crash_runs():
    return [lr for lr in trainer_runs() if lr.failed]


@pytest.mark.parametrize("lr", crash_runs(), ids=lambda lr: lr.name)
def test_the_raised_failure_names_a_checkpoint_from_before_its_onset(lr) -> None:
    driver = ScheduleDriver(
        StaticSchedule([{"batch": 8, "lr": 1e-6}]), advisory=True, announce=lambda s: None
    )
    kept: list[str] = []  # the host's rotation: the last KEEP checkpoints exist on disk
    named = None
    for rec in lr.run.records:
        driver.observe(rec)
        failures = [a for a in driver.alarms if a.kind == "failure"]
        if failures:
            named = failures[0]
            break
        if rec.step % SAVE_STEPS == 0:
            path = f"checkpoint-{rec.step}"
            kept = [*kept, path][-KEEP:]
            driver.note_checkpoint(path, rec.step)
    assert named is not None, "the crash was not raised"
    assert named.checkpoint is not None
    saved_at = int(named.checkpoint.rsplit("-", 1)[1])
    assert saved_at < named.onset_step <= named.step
    assert named.checkpoint in kept, "the rotation deleted it before the failure was raised"
