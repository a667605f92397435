"""A raised alarm of the collapse watch calls verl's own ``_save_checkpoint`` (the real method, with
the Ray workers replaced by a recorder that writes what an actor would) and keeps the checkpoint
apart from ``max_actor_ckpt_to_keep``; the tiny step metrics raise no alarm on cue, so the watch
gets one detector that warns at a known step (the detectors are tested on real runs in tests/core)."""

from __future__ import annotations

import json
import os

from omegaconf import open_dict
from test_verl_trainer import RecordingWorkerGroup, make_trainer, run_steps

from rlvr_schedule.clocks.failure import Detector
from rlvr_schedule.clocks.failure.alarms import CollapseWatch
from rlvr_schedule_adapters.verl.state import STATE_FILE


class WarnAt(Detector):
    name = "warn_at"
    kind = "warning"

    def __init__(self, step: int) -> None:
        super().__init__(patience=1)
        self.step = step

    def _check(self, record):  # type: ignore[no-untyped-def]
        return record.step == self.step, 1.0


class SavingWorkerGroup(RecordingWorkerGroup):
    """Also stands in for the actor's ``save_checkpoint``: writes a weights file where verl asks."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[tuple[str, int]] = []

    def save_checkpoint(self, local_path, remote_path, global_step, max_ckpt_to_keep=None):  # type: ignore[no-untyped-def]
        os.makedirs(local_path, exist_ok=True)
        with open(os.path.join(local_path, "model.pt"), "w") as f:
            f.write(f"weights at step {global_step}")
        self.saved.append((local_path, int(global_step)))


class _Loader:
    def state_dict(self):  # type: ignore[no-untyped-def]
        return {"epoch": 0}


def test_a_warning_calls_verls_save_and_keeps_the_checkpoint_apart(schedule_config, tmp_path):
    with open_dict(schedule_config):
        schedule_config.rlvr_schedule.advisory = True  # advisory: on by default
    wg = SavingWorkerGroup()
    t = make_trainer(schedule_config, wg)
    t.train_dataloader = _Loader()
    t.rlvr_controller.driver.watch = CollapseWatch([WarnAt(2)], raised={"warn_at"})
    t.on_train_begin()
    run_steps(t, 3)
    root = tmp_path / "ckpt"
    assert [(os.path.relpath(p, root), s) for p, s in wg.saved] == [("global_step_2/actor", 2)]
    kept = root / "alarm-global_step_2"
    assert (kept / "actor" / "model.pt").read_text() == "weights at step 2"
    assert (kept / "data.pt").is_file()
    info = json.loads((kept / "alarm.json").read_text())
    assert info["step"] == 2 and info["samples"] == 64 and info["alarms"][0]["name"] == "warn_at"
    state = json.loads((kept / STATE_FILE).read_text())
    assert state["complete"] is True and state["samples"] == 64  # the step's record included
    assert (root / "latest_checkpointed_iteration.txt").read_text() == "2"
    assert t.rlvr_controller.driver.alarm_checkpoints[0]["path"] == str(kept)
    assert t.rlvr_controller.faults == []


def test_applied_mode_does_not_save_at_an_alarm_unless_the_schedule_file_asks(
    schedule_config, write_schedule
):
    wg = SavingWorkerGroup()
    t = make_trainer(schedule_config, wg)
    t.train_dataloader = _Loader()
    t.rlvr_controller.driver.watch = CollapseWatch([WarnAt(2)], raised={"warn_at"})
    t.on_train_begin()
    run_steps(t, 3)
    assert wg.saved == []
