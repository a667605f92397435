"""End to end on the tiny model with vLLM rollouts: reward rises on an easy task; resume is exact."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlvr_schedule.policy import StaticSchedule
from rlvr_schedule.records import Stage
from rlvr_schedule.theory.scaling import lr_for_batch
from rlvr_trainer.config import TrainConfig


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_short_run_raises_reward_on_an_easy_task(tiny_model_dir, tmp_path):
    from rlvr_trainer.train import Trainer

    cfg = TrainConfig(
        model=str(tiny_model_dir),
        task_max_level=0,
        batch=EASY_BATCH,
        base_batch=EASY_BATCH,
        base_lr=EASY_LR,
        max_samples=EASY_SAMPLES,
        micro_batch=64,
        seed=1,
    )
    with Trainer(cfg, tmp_path / "easy") as trainer:
        records = trainer.train()
    reward = np.array([r.reward_mean for r in records])
    k = len(reward) // 4
    first, last = reward[:k].mean(), reward[-k:].mean()
    print(f"reward, first quarter {first:.3f}, last quarter {last:.3f}")
    assert last > first + 0.03, (first, last)
    # canonical records: cumulative samples, constant batch, the metrics the clocks read
    assert [r.samples for r in records] == [EASY_BATCH * (i + 1) for i in range(len(records))]
    rows = _rows(tmp_path / "easy" / "metrics.jsonl")
    for key in (
        "reward_mean",
        "reward_std",
        "entropy",
        "kl",
        "grad_norm",
        "clip_frac",
        "response_length",
        "frac_zero_std",
        "grad_norm_micro",
        "micro_batch",
        "lr",
        "batch",
        "samples",
        "step",
    ):
        assert key in rows[0] or key in ("grad_norm_micro", "micro_batch"), key


EASY_BATCH = 128
EASY_LR = 1e-4
EASY_SAMPLES = EASY_BATCH * 24


def _two_stage(cfg):
    lr16 = lr_for_batch(16, cfg.base_batch, cfg.base_lr)
    lr32 = lr_for_batch(32, cfg.base_batch, cfg.base_lr)
    return StaticSchedule([Stage(batch=16, lr=lr16, until_samples=64), Stage(batch=32, lr=lr32)])


@pytest.mark.slow
def test_resume_gives_the_same_decisions_and_samples(tiny_model_dir, tmp_path):
    from rlvr_trainer.train import Trainer

    cfg = TrainConfig(
        model=str(tiny_model_dir),
        batch=16,
        base_batch=16,
        base_lr=3e-4,
        max_samples=160,
        micro_batch=8,
        seed=2,
    )
    with Trainer(cfg, tmp_path / "full", schedule=_two_stage(cfg)) as full:
        full.train()
    with Trainer(cfg, tmp_path / "part", schedule=_two_stage(cfg)) as part:
        part.train(max_steps=3)  # interrupted before the switch at 64 samples
    assert len(_rows(tmp_path / "part" / "metrics.jsonl")) == 3
    with Trainer(cfg, tmp_path / "part", schedule=_two_stage(cfg)) as resumed:
        resumed.train(resume=True)

    d_full, d_part = (
        _rows(tmp_path / "full" / "decisions.jsonl"),
        _rows(tmp_path / "part" / "decisions.jsonl"),
    )
    assert d_part == d_full
    assert [d["batch"] for d in d_full] == [16, 16, 16, 32, 32, 32, 32]
    assert any(d["switched"] for d in d_full)  # the switch went through the trainer's hook
    m_full, m_part = _rows(tmp_path / "full" / "metrics.jsonl"), _rows(tmp_path / "part" / "metrics.jsonl")
    assert [m["samples"] for m in m_part] == [m["samples"] for m in m_full] == [16, 32, 48, 64, 96, 128, 160]
    assert [m["batch"] for m in m_part] == [16, 16, 16, 16, 32, 32, 32]
    # same prompts, sampling seeds and weights: the resumed run reproduces the rewards
    assert [m["reward_mean"] for m in m_part] == pytest.approx([m["reward_mean"] for m in m_full])
