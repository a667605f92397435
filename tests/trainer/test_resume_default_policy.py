"""Resume across a switch of the two-clock policy on the reference trainer.

The switch is made by construction, not by the learned model's estimate crossing a threshold
(floating-point kernels differ between CPUs, so a seeded run drifts apart from one machine to the
next): the policy is given a critical batch (its auto start: 0.46 x 35 -> 16) and a failure clock
(1280 rollouts at batch 16, so its switch, x2 at the held LR, comes once 640 are spent, whatever
the model learns); B* tracking and the alarm detectors are off. The run is interrupted before the
switch and resumed; decisions, samples, rewards and the final weights must equal the uninterrupted
run's, so the policy's state (the failure clock spent, the hysteresis, the noise estimate's EMAs)
survives the checkpoint. The default policy's auto switch from the noise estimate is tested on a
gradient noise the test sets (``tests/trainer/test_torch_loop_host.py``). The SIGKILL version is
``benchmarks/evidence/tiny_task.py killresume`` (``docs/RESULTS.md`` 4).
"""

from __future__ import annotations

import json

import pytest
import torch

from rlvr_trainer.config import TrainConfig

pytestmark = pytest.mark.slow

FAILURE_SAMPLES = 1280  # the stated failure clock at batch 16: the switch once half is spent
RESUME_STEPS = 48  # 768 rollouts: the failure switch (640 + hysteresis) comes before the end
INTERRUPT = 24  # 384 rollouts: before it


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _set_switch_policy(cfg):
    from rlvr_schedule.policy import BatchConstraints, PolicyConfig, TwoClockScheduler

    return TwoClockScheduler(
        PolicyConfig(
            base_lr=cfg.base_lr,
            base_batch=cfg.base_batch,
            critical_batch=35.0,
            sample_tolerance=0.3,  # the fixed 0.46 B* this recording's switch points were set by
            growth=2.0,
            failure_samples=float(FAILURE_SAMPLES),
            failure_batch=16.0,
            track_critical_batch=False,
            detectors=(),
            constraints=BatchConstraints(group_size=8, min_batch=8, max_batch=128),
        )
    )


def test_resume_across_a_set_switch_of_the_two_clock_policy(tiny_model_dir, tmp_path):
    from rlvr_trainer.train import Trainer

    cfg = TrainConfig(
        model=str(tiny_model_dir),
        batch=16,
        base_batch=16,
        base_lr=2e-4,
        max_samples=16 * RESUME_STEPS,
        micro_batch=4,  # below the batch: the micro-batch gradient norm feeds the noise estimate
        seed=3,
    )
    with Trainer(cfg, tmp_path / "full", schedule=_set_switch_policy(cfg)) as full:
        full.train()
        w_full = {k: v.clone() for k, v in full.model.state_dict().items()}
    with Trainer(cfg, tmp_path / "part", schedule=_set_switch_policy(cfg)) as part:
        part.train(max_steps=INTERRUPT)
    with Trainer(cfg, tmp_path / "part", schedule=_set_switch_policy(cfg)) as resumed:
        resumed.train(resume=True)
        w_part = resumed.model.state_dict()
        assert all(torch.equal(w_full[k], w_part[k]) for k in w_full)

    d_full, d_part = (
        _rows(tmp_path / "full" / "decisions.jsonl"),
        _rows(tmp_path / "part" / "decisions.jsonl"),
    )
    switches = [d for d in d_full if d["switched"]]
    print("switches:", [(d["step"], d["samples"], d["batch"], d["reason"]) for d in switches])
    assert d_full[0]["batch"] == 16  # the auto start from the stated critical batch
    assert len(switches) == 1 and switches[0]["batch"] == 32  # one failure switch, x2 at the held LR
    assert FAILURE_SAMPLES / 2 <= switches[0]["samples"] <= FAILURE_SAMPLES / 2 + 16 * 4
    assert switches[0]["step"] > INTERRUPT  # the switch comes after the interruption
    assert d_part == d_full
    m_full, m_part = _rows(tmp_path / "full" / "metrics.jsonl"), _rows(tmp_path / "part" / "metrics.jsonl")
    assert [m["batch"] for m in m_full][-1] == 32  # the run trained at the new batch
    for key in ("samples", "batch", "lr", "reward_mean", "entropy", "grad_norm"):
        assert [m[key] for m in m_part] == [m[key] for m in m_full], key
