"""The TRL callback feeds the gradient-noise estimate: its online B_simple on a real GRPOTrainer run
(gradient accumulation 8) against a brute-force B_simple from every micro-batch's own gradient.

The callback takes one number per update (the accumulated gradient's norm after the first micro-batch,
x GA) beside the Trainer's ``grad_norm``; the brute force snapshots the accumulated gradient after
every micro-batch (differences x GA are the micro-batches' own mean gradients, measured separately)
and estimates tr(Sigma) from their spread and |G|^2 from their mean, with the same EMA weights.
"""

from __future__ import annotations

import math

import pytest
import torch
from transformers import TrainerCallback
from trl_harness import run_grpo

from rlvr_schedule_adapters.trl import RlvrScheduleCallback

pytestmark = pytest.mark.slow

PER_DEVICE = 8  # completions per micro-batch (two groups of 4)
GA = 8
# The two-batch estimate is noisy per update (one micro-batch against the update): over 200 updates
# (the EMA's horizon) three seeds came within 2-10% of the brute force; over 40 updates within 50%.
STEPS = 200
BETA = 0.99  # GradientNoiseScale's default EMA


class MicroGrads(TrainerCallback):
    """Per update: the gradient of each micro-batch (accumulated-gradient differences x GA)."""

    def __init__(self) -> None:
        self.updates: list[torch.Tensor] = []  # (GA, n_params) per update
        self._acc: list[torch.Tensor] = []

    @staticmethod
    def _flat(model) -> torch.Tensor:
        return torch.cat(
            [p.grad.detach().float().flatten() for p in model.parameters() if p.grad is not None]
        )

    def on_substep_end(self, args, state, control, model=None, **kwargs):
        self._acc.append(self._flat(model))

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        acc = [*self._acc, self._flat(model)]
        self._acc = []
        prev = torch.zeros_like(acc[0])
        micro = []
        for a in acc:
            micro.append((a - prev) * GA)
            prev = a
        self.updates.append(torch.stack(micro))


def brute_force_b_simple(updates: list[torch.Tensor], b_small: int) -> float:
    b_big = b_small * GA
    tr, g2, w = 0.0, 0.0, 0.0
    for t, g in enumerate(updates):
        weight = BETA ** (len(updates) - 1 - t)
        mean = g.mean(0)
        tr_t = b_small * float(((g - mean) ** 2).sum(1).sum() / (GA - 1))
        g2_t = float((mean**2).sum()) - tr_t / b_big
        tr, g2, w = tr + weight * tr_t, g2 + weight * g2_t, w + weight
    return tr / g2


def test_online_b_simple_matches_brute_force(tiny_model, tmp_path):
    spec = {
        "type": "two_clock",
        "initial_batch": PER_DEVICE * GA,
        "base_lr": 1e-4,
        "lr_rule": "constant",
        "track_critical_batch": False,
        "detectors": [],
        "estimate_samples": 0,
        "constraints": {"group_size": 4, "divisor": PER_DEVICE * GA},
    }
    cb = RlvrScheduleCallback(spec, strict=True)
    probe = MicroGrads()
    trainer, m = run_grpo(
        tiny_model,
        tmp_path,
        [cb, probe],
        max_steps=STEPS,
        gradient_accumulation_steps=GA,
        steps_per_generation=GA,
        learning_rate=1e-4,
        loss_type="grpo",
        max_grad_norm=1e6,
        max_completion_length=8,
        per_device_train_batch_size=PER_DEVICE,
        log_level="error",
    )
    assert len(cb.decisions) == STEPS and len(probe.updates) == STEPS
    assert m.completions == [PER_DEVICE * GA] * STEPS
    noise = cb.schedule.noise
    assert noise.n_updates == STEPS  # every update's record carried grad_norm_micro and micro_batch
    online = noise.b_simple
    brute = brute_force_b_simple(probe.updates, PER_DEVICE)
    print(f"B_simple: online {online:.4g}, brute force {brute:.4g} ({STEPS} updates, GA {GA})")
    assert math.isfinite(online) and brute > 0
    assert online == pytest.approx(brute, rel=0.3)
