"""The reference trainer saves its own checkpoint at a raised alarm, kept beside ``checkpoint.pt``
(which every save replaces), and a run resumed from it continues as the uninterrupted run did.

The tiny task raises no alarm on cue, so the watch gets one detector that warns at a known step;
the detectors themselves are tested on real runs in tests/core."""

from __future__ import annotations

import json

import pytest

from rlvr_schedule.clocks.failure import Detector
from rlvr_schedule.clocks.failure.alarms import CollapseWatch
from rlvr_schedule.policy import StaticSchedule
from rlvr_schedule.records import Stage
from rlvr_trainer.config import TrainConfig

ALARM_STEP = 2


class WarnAt(Detector):
    name = "warn_at"
    kind = "warning"

    def __init__(self, step: int) -> None:
        super().__init__(patience=1)
        self.step = step

    def _check(self, record):  # type: ignore[no-untyped-def]
        return record.step == self.step, 1.0


def _rows(path):  # type: ignore[no-untyped-def]
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _trainer(cfg, out, **kw):  # type: ignore[no-untyped-def]
    from rlvr_trainer.train import Trainer

    t = Trainer(cfg, out, schedule=StaticSchedule([Stage(batch=16, lr=3e-4)]), **kw)
    t.driver.watch = CollapseWatch([WarnAt(ALARM_STEP)], raised={"warn_at"})
    return t


@pytest.mark.slow
def test_a_warning_saves_a_checkpoint_and_a_run_resumes_from_it(tiny_model_dir, tmp_path):
    cfg = TrainConfig(
        model=str(tiny_model_dir),
        batch=16,
        base_batch=16,
        base_lr=3e-4,
        max_samples=80,
        micro_batch=8,
        seed=2,
    )
    out = tmp_path / "run"
    with _trainer(cfg, out, advisory=True) as full:  # advisory: on by default
        full.train()
    ckpt = out / f"alarm-checkpoint-{ALARM_STEP}.pt"
    info = json.loads(ckpt.with_suffix(".json").read_text())
    assert info["step"] == ALARM_STEP and info["samples"] == 16 * ALARM_STEP
    assert info["alarms"][0]["name"] == "warn_at"
    assert full.driver.alarm_checkpoints[0]["path"] == str(ckpt)
    full_rows = _rows(out / "metrics.jsonl")
    assert [r["step"] for r in full_rows] == [1, 2, 3, 4, 5]

    with _trainer(cfg, out, advisory=True) as resumed:
        resumed.train(resume_from=ckpt)
    # the checkpoint lists itself (saved before its path was known) and is not raised again
    assert resumed.driver.alarm_checkpoints == [{**full.driver.alarm_checkpoints[0], "path": None}]
    rows = _rows(out / "metrics.jsonl")
    assert [r["samples"] for r in rows] == [r["samples"] for r in full_rows]
    assert [r["reward_mean"] for r in rows] == pytest.approx([r["reward_mean"] for r in full_rows])

    with _trainer(cfg, tmp_path / "applied") as applied:  # applied mode: only when asked
        applied.train(max_steps=3)
    assert not list((tmp_path / "applied").glob("alarm-*"))
