"""What a TRL user sees and keeps when the collapse watch raises: a checkpoint at the alarm kept
apart from ``save_total_limit``, a resume from it, the schedule's state in TensorBoard, one console
line per switch and the set-up warning when TRL's LR scheduler would override the schedule's LR.

The tiny model's metrics raise no alarm of their own, so the watch gets one detector that warns at
a known step; the detectors themselves are tested on real runs in tests/core."""

from __future__ import annotations

import json
import math
import warnings

import pytest
from trl_harness import TWO_STAGES, run_grpo

from rlvr_schedule.clocks.failure import Detector
from rlvr_schedule.clocks.failure.alarms import CollapseWatch
from rlvr_schedule_adapters.trl import RlvrScheduleCallback, ScheduleSetupWarning, find_callback

pytestmark = pytest.mark.slow

ALARM_STEP = 3


class WarnAt(Detector):
    """A warning detector that fires at one step (a stand-in for a precursor of collapse)."""

    name = "warn_at"
    kind = "warning"

    def __init__(self, step: int) -> None:
        super().__init__(patience=1)
        self.step = step

    def _check(self, record):  # type: ignore[no-untyped-def]
        return record.step == self.step, 1.0


def _watched(cb):  # type: ignore[no-untyped-def]
    cb.driver.watch = CollapseWatch([WarnAt(ALARM_STEP)], raised={"warn_at"})
    return cb


def test_a_warning_saves_a_checkpoint_that_rotation_keeps_and_a_run_resumes_from(tiny_model, tmp_path):
    out = tmp_path / "run"
    cb = _watched(RlvrScheduleCallback(TWO_STAGES, apply=False, strict=True))  # advisory: on by default
    _, m = run_grpo(
        tiny_model, out, [cb], max_steps=6, save_strategy="steps", save_steps=2, save_total_limit=1
    )
    kept = out / f"alarm-checkpoint-{ALARM_STEP}"
    assert kept.is_dir() and (kept / "trainer_state.json").is_file()
    assert not (out / f"checkpoint-{ALARM_STEP}").exists()  # the Trainer's own copy was rotated away
    info = json.loads((kept / "alarm.json").read_text())
    held = sum(m.completions[:ALARM_STEP])
    assert info["step"] == ALARM_STEP and info["samples"] == held  # which rollouts it holds
    assert info["alarms"][0]["name"] == "warn_at"
    assert cb.driver.alarm_checkpoints == [
        {"step": ALARM_STEP, "samples": held, "alarms": ["warning:warn_at"], "path": str(kept)}
    ]
    state = json.loads((kept / "trainer_state.json").read_text())
    assert state["global_step"] == ALARM_STEP

    fresh = _watched(RlvrScheduleCallback(TWO_STAGES, apply=False, strict=True))
    trainer, m2 = run_grpo(
        tiny_model,
        tmp_path / "resumed",
        [fresh],
        max_steps=6,
        resume=str(kept),
        restore_callback_states_from_checkpoint=True,
    )
    live = find_callback(trainer)
    assert len(m2.completions) == 6 - ALARM_STEP  # it went on from the alarm's step
    assert live.samples == held + sum(m2.completions)
    # restored with the run's state (the resumed callback is rebuilt from the checkpoint, with the
    # default detectors: those may raise their own alarms later, the saved one is not raised again)
    assert live.driver.alarm_checkpoints[0] == cb.driver.alarm_checkpoints[0]
    assert ("warn_at", "warning") in live.driver.watch._seen


def test_applied_mode_saves_at_an_alarm_only_when_the_schedule_file_asks(tiny_model, tmp_path):
    cb = _watched(RlvrScheduleCallback(TWO_STAGES, strict=True))
    run_grpo(tiny_model, tmp_path / "off", [cb], max_steps=4)
    assert not list((tmp_path / "off").glob("alarm-*")) and cb.driver.alarm_checkpoints == []
    cb = _watched(RlvrScheduleCallback({**TWO_STAGES, "watch": {"checkpoint_on_alarm": True}}, strict=True))
    run_grpo(tiny_model, tmp_path / "on", [cb], max_steps=4)
    assert (tmp_path / "on" / f"alarm-checkpoint-{ALARM_STEP}" / "alarm.json").is_file()


def test_the_schedule_state_reaches_tensorboard(tiny_model, tmp_path):
    from rlvr_schedule.ingest.tb import read_scalars

    cb = RlvrScheduleCallback(TWO_STAGES, strict=True)
    run_grpo(tiny_model, tmp_path, [cb], max_steps=6, report_to=["tensorboard"])
    (logdir,) = (tmp_path / "runs").iterdir()  # the Trainer's own TensorBoard directory
    by_step = read_scalars(logdir)
    assert sorted(by_step) == [1, 2, 3, 4, 5, 6]
    assert all("train/loss" in v or "train/learning_rate" in v for v in by_step.values())  # the Trainer's
    assert [by_step[s]["rlvr/batch"] for s in range(1, 7)] == [8, 8, 8, 16, 16, 16]
    assert by_step[6]["rlvr/lr"] == pytest.approx(2.5e-4)
    assert by_step[6]["rlvr/samples"] == cb.samples
    assert by_step[6]["rlvr/warnings"] == len([a for a in cb.driver.watch.alarms_ if a.kind == "warning"])


def test_two_clock_state_in_tensorboard_has_the_clocks(tiny_model, tmp_path):
    from rlvr_schedule.ingest.tb import read_scalars

    sched = {
        "type": "two_clock",
        "initial_batch": 8,
        "base_batch": 8,
        "base_lr": 1e-3,
        "failure_samples": 400,
        "failure_batch": 8,
    }
    cb = RlvrScheduleCallback(sched, strict=True)
    run_grpo(tiny_model, tmp_path, [cb], max_steps=4, report_to=["tensorboard"])
    (logdir,) = (tmp_path / "runs").iterdir()
    last = read_scalars(logdir)[4]
    assert 0 < last["rlvr/failure_clock_spent"] < 1 and last["rlvr/failure_clock_left"] > 0
    assert math.isfinite(last["rlvr/batch"]) and "rlvr/warnings" in last


def test_setup_warns_about_a_decaying_lr_scheduler_but_not_in_advisory_mode(tiny_model, tmp_path, capsys):
    cb = RlvrScheduleCallback(TWO_STAGES, strict=True)
    with pytest.warns(ScheduleSetupWarning, match="lr_scheduler_type='linear'.*'constant'"):
        run_grpo(tiny_model, tmp_path / "a", [cb], max_steps=5, lr_scheduler_type="linear")
    err = capsys.readouterr().err
    switches = [ln for ln in err.splitlines() if "now 16 rollouts/update" in ln]
    assert len(switches) == 1 and "until_samples 32 reached" in switches[0]  # with its reason

    cb = RlvrScheduleCallback(TWO_STAGES, apply=False, strict=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_grpo(tiny_model, tmp_path / "b", [cb], max_steps=5, lr_scheduler_type="linear", n_prompts=8)
    assert not [w for w in caught if issubclass(w.category, ScheduleSetupWarning)]
    err = capsys.readouterr().err
    assert len([ln for ln in err.splitlines() if "(advisory, not applied)" in ln]) == 1
