"""Resume after damage: a torn last line in ``metrics.jsonl`` (what a disk-full or power cut leaves),
also the line of the checkpoint's own update, and a ``checkpoint.pt`` cut mid-file. Every run resumes
(the torn line cut with a warning counting its bytes; a checkpoint past the log's last whole record,
or a cut one, named and the one before it used), and its records match an uninterrupted run's from
the last whole checkpoint on."""

from __future__ import annotations

import json
import shutil

import pytest

from rlvr_schedule.policy import StaticSchedule
from rlvr_schedule.records import Stage
from rlvr_schedule.theory.scaling import lr_for_batch
from rlvr_trainer.config import TrainConfig


def _rows(p):
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def _two_stage(cfg):
    lr16 = lr_for_batch(16, cfg.base_batch, cfg.base_lr)
    lr32 = lr_for_batch(32, cfg.base_batch, cfg.base_lr)
    return StaticSchedule([Stage(batch=16, lr=lr16, until_samples=64), Stage(batch=32, lr=lr32)])


def _tear_last_line(p) -> int:
    data = p.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    cut = last + (len(data) - last) // 2
    p.write_bytes(data[:cut])  # half of the last record, no newline
    return len(data) - cut


@pytest.mark.slow
def test_resume_after_a_torn_log_and_a_cut_checkpoint(tiny_model_dir, tmp_path, caplog):
    from rlvr_trainer.train import Trainer

    cfg = TrainConfig(
        model=str(tiny_model_dir),
        batch=16,
        base_batch=16,
        base_lr=3e-4,
        max_samples=128,
        micro_batch=8,
        seed=2,
        checkpoint_every=1,
    )
    with Trainer(cfg, tmp_path / "full", schedule=_two_stage(cfg)) as full:
        full.train()
    with Trainer(cfg, tmp_path / "torn", schedule=_two_stage(cfg)) as part:
        part.train(max_steps=3)  # killed after update 3; checkpoints at 3 and (kept) at 2
    for name in ("torn_record", "cut"):
        shutil.copytree(tmp_path / "torn", tmp_path / name)
    m_full = _rows(tmp_path / "full" / "metrics.jsonl")
    line4 = json.dumps(m_full[3])
    with open(tmp_path / "torn" / "metrics.jsonl", "a") as fh:  # killed while writing update 4's record
        fh.write(line4[: len(line4) // 2])
    _tear_last_line(tmp_path / "torn_record" / "metrics.jsonl")  # update 3's record torn after its save
    _tear_last_line(tmp_path / "cut" / "metrics.jsonl")
    ckpt = tmp_path / "cut" / "checkpoint.pt"
    ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])  # cut mid-file

    d_full = _rows(tmp_path / "full" / "decisions.jsonl")
    for name, resumed_at in (("torn", 3), ("torn_record", 2), ("cut", 2)):
        caplog.clear()
        with caplog.at_level("INFO"), Trainer(cfg, tmp_path / name, schedule=_two_stage(cfg)) as again:
            again.train(resume=True)
        assert f"at step {resumed_at} " in caplog.text, caplog.text
        assert "bytes dropped" in caplog.text  # the torn line, counted
        if name == "torn_record":
            assert "its last record torn): resuming from" in caplog.text
        if name == "cut":
            assert "checkpoint.pt: damaged checkpoint" in caplog.text and "checkpoint.pt.prev" in caplog.text
        m, d = _rows(tmp_path / name / "metrics.jsonl"), _rows(tmp_path / name / "decisions.jsonl")
        assert [r["samples"] for r in m] == [r["samples"] for r in m_full] == [16, 32, 48, 64, 96, 128]
        assert [r["batch"] for r in m] == [r["batch"] for r in m_full]
        assert [r["reward_mean"] for r in m] == pytest.approx([r["reward_mean"] for r in m_full])
        assert d == d_full
