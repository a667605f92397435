"""verl's step metrics -> canonical records, through a real ``Tracking`` object.

The metric dicts are built from verl's own code where it runs on CPU
(``compute_data_metrics`` on a DataProto); the actor-side keys are checked against verl's
source so that a rename in verl fails here rather than silently dropping a signal.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch

from rlvr_schedule.policy import StaticSchedule
from rlvr_schedule_adapters.verl.controller import ScheduleController
from rlvr_schedule_adapters.verl.tracking import BACKEND_NAME, ScheduleMetricsBackend, attach_backend


def _data_metrics(scores: list[float], response_lengths: list[int]) -> dict:
    """verl's real ``compute_data_metrics`` on a hand-made batch (prompt 3 tokens, response <= 5)."""
    from verl import DataProto
    from verl.trainer.ppo.metric_utils import compute_data_metrics

    b, p, r = len(scores), 3, 5
    resp_mask = torch.zeros(b, r)
    for i, n in enumerate(response_lengths):
        resp_mask[i, :n] = 1
    attn = torch.cat([torch.ones(b, p), resp_mask], dim=1)
    tls = torch.zeros(b, r)
    for i, (s, n) in enumerate(zip(scores, response_lengths, strict=True)):
        tls[i, n - 1] = s  # outcome reward on the last response token
    batch = DataProto.from_dict(
        tensors={
            "prompts": torch.ones(b, p, dtype=torch.long),
            "responses": torch.ones(b, r, dtype=torch.long),
            "attention_mask": attn.long(),
            "response_mask": resp_mask.long(),
            "token_level_scores": tls,
            "token_level_rewards": tls.clone(),
            "advantages": torch.randn(b, r),
            "returns": torch.randn(b, r),
        }
    )
    return compute_data_metrics(batch, use_critic=False)


#: keys the actor side logs, with the verl module that writes each (checked against its source)
ACTOR_KEYS = {
    "actor/entropy": "verl.trainer.ppo.v1.trainer_base",
    "actor/pg_clipfrac": "verl.trainer.ppo.core_algos",
    "actor/ppo_kl": "verl.trainer.ppo.core_algos",
    "training/global_step": "verl.trainer.ppo.v1.trainer_base",
}


@pytest.mark.parametrize("key,module", sorted(ACTOR_KEYS.items()))
def test_actor_keys_are_what_verl_writes(key, module):
    import importlib

    assert f'"{key}"' in inspect.getsource(importlib.import_module(module))


def test_renamed_worker_keys_are_what_verl_writes():
    # the worker returns grad_norm / lr / kl_loss and the trainer prefixes them with "actor/"
    from verl.trainer.ppo.v1 import trainer_base
    from verl.workers import engine_workers
    from verl.workers.utils import losses

    update_actor = inspect.getsource(trainer_base.PPOTrainer._update_actor)
    assert 'rename_dict(output["metrics"], "actor/")' in update_actor
    assert 'output["metrics"]["lr"] = lr' in inspect.getsource(engine_workers)
    assert 'metrics["kl_loss"]' in inspect.getsource(losses)


def _step_metrics(step: int, score: float, entropy: float, lr: float = 1e-6) -> dict:
    m = _data_metrics([score, score, 0.0, 2 * score], [5, 4, 3, 5])
    m.update(
        {
            "training/global_step": step,
            "training/epoch": 0,
            "actor/entropy": entropy,
            "actor/kl_loss": 0.01,
            "actor/ppo_kl": 0.002,
            "actor/grad_norm": 0.7,
            "actor/pg_clipfrac": 0.05,
            "actor/pg_loss": -0.1,
            "actor/lr": lr,
            "timing_s/step": 1.5,
            "perf/throughput": 100.0,
        }
    )
    return m


def _tracking():
    from verl.utils.tracking import Tracking

    return Tracking(project_name="p", experiment_name="e", default_backend=[])


def test_real_tracking_feeds_records():
    applied: list[tuple[int, float]] = []
    sched = StaticSchedule([{"batch": 32, "lr": 1e-6, "until_samples": None}])
    ctl = ScheduleController(
        sched, group_size=4, running=(32, 1e-6), apply_fn=lambda b, lr: applied.append((b, lr))
    )
    tracking = _tracking()
    attach_backend(tracking, ScheduleMetricsBackend(ctl))
    assert tracking.logger[BACKEND_NAME].controller is ctl

    tracking.log(data={"val-core/gsm8k/reward/mean@1": 0.2}, step=0)  # validation before training
    assert ctl.last_record is None and ctl.samples == 0
    for step in (1, 2):
        tracking.log(data=_step_metrics(step, 0.5 * step, 1.0 / step, lr=1e-6 * step), step=step)

    rec = ctl.last_record
    assert rec.step == 2 and rec.batch == 32 and rec.samples == 64  # counted: 2 steps x 8 prompts x 4
    assert rec.reward_mean == pytest.approx(np.mean([1.0, 1.0, 0.0, 2.0]))  # critic/score/mean
    assert rec.response_length == pytest.approx(np.mean([5, 4, 3, 5]))
    assert rec.entropy == pytest.approx(0.5)
    assert rec.kl == pytest.approx(0.01)  # kl_loss (to the reference) wins over ppo_kl
    assert rec.extra["actor/ppo_kl"] == pytest.approx(0.002)
    assert rec.grad_norm == pytest.approx(0.7) and rec.clip_frac == pytest.approx(0.05)
    assert rec.lr == pytest.approx(2e-6)  # the logged actor/lr, not the running value
    assert "timing_s/step" in rec.extra
    assert applied == [] and ctl.faults == []


def test_missing_lr_falls_back_to_the_running_lr():
    sched = StaticSchedule([{"batch": 32, "lr": 3e-6, "until_samples": None}])
    ctl = ScheduleController(sched, group_size=4, running=(32, 3e-6), apply_fn=lambda b, lr: None)
    m = _step_metrics(1, 0.1, 1.0)
    del m["actor/lr"]
    ctl.observe(m, 1)
    assert ctl.last_record.lr == pytest.approx(3e-6)
    m2 = _step_metrics(2, 0.1, 1.0)
    m2["actor/lr"] = float("nan")
    ctl.observe(m2, 2)
    assert ctl.last_record.lr == pytest.approx(3e-6)


def test_switch_is_applied_after_the_step_that_crossed():
    applied: list[tuple[int, float]] = []
    sched = StaticSchedule(
        [{"batch": 32, "lr": 1e-6, "until_samples": 64}, {"batch": 64, "lr": 2e-6, "until_samples": None}]
    )
    ctl = ScheduleController(
        sched, group_size=4, running=(32, 1e-6), apply_fn=lambda b, lr: applied.append((b, lr))
    )
    backend = ScheduleMetricsBackend(ctl)
    backend.log(_step_metrics(1, 0.1, 1.0), 1)
    assert applied == []
    backend.log(_step_metrics(2, 0.2, 1.0), 2)  # 64 rollouts reached
    assert applied == [(64, 2e-6)] and ctl.running == (64, 2e-6)
    backend.log(_step_metrics(3, 0.3, 1.0), 3)
    assert ctl.last_record.batch == 64 and ctl.samples == 128
    assert math.isclose(ctl.last_decision.lr, 2e-6)
