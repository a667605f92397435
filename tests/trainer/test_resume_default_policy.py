"""Resume across a switch of the DEFAULT two-clock policy on the reference trainer (issue 12).

The default policy (``PolicyConfig()``: ``initial_batch: auto`` with no known B*) runs its fallback
batch until the gradient-noise estimate has 100 records (and 1600 rollouts), then switches to 0.30 x
that estimate: a switch of the default policy within a short run, decided from state (the estimate's
EMAs, the forecast window) that a resume must restore. The run is interrupted before the switch and
resumed; decisions, samples, rewards and the final weights must equal the uninterrupted run's.
The SIGKILL version is ``benchmarks/evidence/tiny_task.py killresume`` (``docs/RESULTS.md`` 4).
"""

from __future__ import annotations

import json

import pytest
import torch

from rlvr_trainer.config import TrainConfig

pytestmark = pytest.mark.slow

STEPS = 112  # the auto switch comes at record 100


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _policy(cfg):
    from rlvr_schedule.policy import BatchConstraints, PolicyConfig, TwoClockScheduler

    # only what the trainer fixes: its LR, group size and batch range; every policy knob at its default
    return TwoClockScheduler(
        PolicyConfig(
            base_lr=cfg.base_lr,
            base_batch=cfg.base_batch,
            constraints=BatchConstraints(group_size=cfg.group_size, min_batch=8, max_batch=128),
        )
    )


def test_resume_across_the_default_policys_switch(tiny_model_dir, tmp_path):
    from rlvr_trainer.train import Trainer

    cfg = TrainConfig(
        model=str(tiny_model_dir),
        batch=16,
        base_batch=16,
        base_lr=2e-4,
        max_samples=16 * STEPS,
        micro_batch=4,  # below the batch: the micro-batch gradient norm feeds the noise estimate
        seed=3,
    )
    with Trainer(cfg, tmp_path / "full", schedule=_policy(cfg)) as full:
        full.train()
        w_full = {k: v.clone() for k, v in full.model.state_dict().items()}
    with Trainer(cfg, tmp_path / "part", schedule=_policy(cfg)) as part:
        part.train(max_steps=60)  # interrupted 40 records before the switch
    with Trainer(cfg, tmp_path / "part", schedule=_policy(cfg)) as resumed:
        resumed.train(resume=True)
        w_part = resumed.model.state_dict()
        assert all(torch.equal(w_full[k], w_part[k]) for k in w_full)

    d_full, d_part = (
        _rows(tmp_path / "full" / "decisions.jsonl"),
        _rows(tmp_path / "part" / "decisions.jsonl"),
    )
    switches = [d for d in d_full if d["switched"]]
    print("switches:", [(d["step"], d["samples"], d["batch"], d["reason"]) for d in switches])
    assert switches and switches[0]["step"] > 60, switches  # the switch comes after the interruption
    assert switches[0]["reason"].startswith("auto:")
    assert d_part == d_full
    m_full, m_part = _rows(tmp_path / "full" / "metrics.jsonl"), _rows(tmp_path / "part" / "metrics.jsonl")
    assert len({m["batch"] for m in m_full}) >= 2  # the run trained at the new batch
    for key in ("samples", "batch", "lr", "reward_mean", "entropy", "grad_norm"):
        assert [m[key] for m in m_part] == [m[key] for m in m_full], key
