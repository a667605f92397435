"""Metrics translation: OpenRLHF's real logs_dict keys -> StepRecord, and the controller's step."""

from __future__ import annotations

import inspect
import math
from types import SimpleNamespace

import pytest
import torch

from rlvr_schedule.policy import StaticSchedule
from rlvr_schedule_adapters.openrlhf import ScheduleController, translate_metrics


def _rollout_stats(rewards, lengths):
    """OpenRLHF's own rollout statistics (BasePPOTrainer._compute_rollout_stats) of fake experiences."""
    from openrlhf.trainer.ppo_trainer import BasePPOTrainer

    exps = [
        SimpleNamespace(
            info={"reward": torch.tensor(r, dtype=torch.float)},
            response_length=torch.tensor(n, dtype=torch.float),
            truncated=torch.zeros(len(r)),
        )
        for r, n in zip(rewards, lengths, strict=True)
    ]
    return BasePPOTrainer._compute_rollout_stats(None, exps)


def _logs(step_rewards=((1.0, 0.0), (1.0, 1.0)), kl=0.01):
    status = {
        "policy_loss": -0.1,
        "kl": kl,
        "ppo_kl": 0.002,
        "ppo_clip_ratio": 0.05,
        "actor_grad_norm": 0.7,
        "actor_lr": 1e-3,
        "response_length": 10.0,
        "timing/ppo_train": 0.5,
        "generated_samples": ["some text", 1.0],
    }
    status.update(_rollout_stats(step_rewards, [(10.0, 12.0)] * len(step_rewards)))
    return status


def test_the_key_names_are_those_openrlhf_logs():
    from openrlhf.trainer.ray.ppo_actor import ActorPPOTrainer

    step_src = inspect.getsource(ActorPPOTrainer.training_step) + inspect.getsource(ActorPPOTrainer.ppo_train)
    for key in ("actor_lr", "actor_grad_norm", "ppo_clip_ratio", "ppo_kl", '"kl"', "entropy_loss"):
        assert key in step_src, key
    stats = _rollout_stats([(1.0, 0.0)], [(3.0, 5.0)])
    assert stats["rollout/num_samples"] == 2.0
    assert stats["rollout/reward_mean"] == pytest.approx(0.5)
    assert stats["rollout/response_length_mean"] == pytest.approx(4.0)


def test_translate_keeps_numbers_and_drops_samples_text():
    m = translate_metrics(_logs())
    assert "generated_samples" not in m and "rollout/num_samples" not in m
    assert m["actor_lr"] == 1e-3 and m["rollout/reward_mean"] == pytest.approx(0.75)
    assert translate_metrics({"kl": torch.tensor(0.5), "flag": True, "name": "x"}) == {"kl": 0.5}


class _Recorder:
    def __init__(self, fail: bool | int = False):
        self.calls, self.fail = [], fail  # fail: always (True) or the first n calls

    def __call__(self, batch, lr):
        if self.fail is True or (self.fail and len(self.calls) < self.fail):
            self.calls.append(None)
            raise RuntimeError("worker refused")
        self.calls.append((batch, lr))


def test_record_fields_from_real_logs(openrlhf_args):
    sched = StaticSchedule([{"batch": 8, "lr": 1e-3, "until_samples": None}])
    ctl = ScheduleController(sched, openrlhf_args, _Recorder())
    ctl.on_step(1, _logs())
    ctl.on_step(2, _logs(((0.0, 0.0), (1.0, 0.0)), kl=0.03))
    assert ctl.samples == 8  # 2 steps x 4 rollouts logged in rollout/num_samples
    d = ctl.last_decision
    assert d.step == 2 and d.samples == 8 and not d.switched


def test_canonical_record(openrlhf_args):
    seen = []

    class Spy(StaticSchedule):
        def propose(self, record):
            seen.append(record)
            return super().propose(record)

    ctl = ScheduleController(
        Spy([{"batch": 8, "lr": 1e-3, "until_samples": None}]), openrlhf_args, _Recorder()
    )
    ctl.on_step(5, _logs())
    r = seen[0]
    assert (r.step, r.samples, r.batch) == (5, 4, 8)
    assert r.reward_mean == pytest.approx(0.75)
    # ppo_train's "response_length" is the canonical name itself and fills the field; the rollout
    # statistic is kept under its own name
    assert r.response_length == pytest.approx(10.0)
    assert r.extra["rollout/response_length_mean"] == pytest.approx(11.0)
    assert r.kl == pytest.approx(0.01)  # KL to the reference wins over ppo_kl
    assert r.extra["ppo_kl"] == pytest.approx(0.002)
    assert r.clip_frac == pytest.approx(0.05)
    assert r.grad_norm == pytest.approx(0.7)
    assert r.lr == pytest.approx(1e-3)
    assert math.isnan(r.entropy)  # no entropy coefficient, no entropy_loss


def test_switch_applies_to_workers_and_args(openrlhf_args):
    sched = StaticSchedule(
        [{"batch": 8, "lr": 1e-3, "until_samples": 24}, {"batch": 16, "lr": 2e-3, "until_samples": None}]
    )
    rec = _Recorder()
    ctl = ScheduleController(sched, openrlhf_args, rec)
    logs = {**_logs(), "rollout/num_samples": 8.0}
    decisions = [ctl.on_step(s, dict(logs)) for s in (1, 2, 3)]
    assert [d.switched for d in decisions] == [False, False, True]
    assert rec.calls == [(16, 2e-3)]
    a = openrlhf_args
    assert (a.rollout.batch_size, a.rollout.vllm_generate_batch_size, a.train.batch_size) == (4, 4, 16)
    logs16 = {**logs, "rollout/num_samples": 16.0}
    ctl.on_step(4, logs16)
    assert ctl.samples == 40 and ctl.batch == 16


def test_worker_fault_is_logged_and_the_stage_held(openrlhf_args, caplog):
    sched = StaticSchedule(
        [{"batch": 8, "lr": 1e-3, "until_samples": 8}, {"batch": 16, "lr": 2e-3, "until_samples": None}]
    )
    ctl = ScheduleController(sched, openrlhf_args, _Recorder(fail=True))
    logs = {**_logs(), "rollout/num_samples": 8.0}
    ctl.step_logs(1, logs)  # must not raise
    assert ctl.faults and "worker refused" in str(ctl.faults[0][2])
    assert "training continues at the stage in effect" in caplog.text
    assert openrlhf_args.train.batch_size == 8 and openrlhf_args.rollout.batch_size == 2
    assert ctl.batch == 8


def test_a_failed_switch_is_retried_at_the_next_step(openrlhf_args):
    sched = StaticSchedule(
        [{"batch": 8, "lr": 1e-3, "until_samples": 8}, {"batch": 16, "lr": 2e-3, "until_samples": None}]
    )
    rec = _Recorder(fail=1)
    ctl = ScheduleController(sched, openrlhf_args, rec)
    ctl.step_logs(1, {**_logs(), "rollout/num_samples": 8.0})  # switch refused: the schedule holds
    assert ctl.batch == 8 and sched.current.batch == 8
    ctl.step_logs(2, {**_logs(), "rollout/num_samples": 8.0})  # applied now
    assert rec.calls == [None, (16, 2e-3)]
    assert ctl.batch == 16 and openrlhf_args.train.batch_size == 16 and sched.current.batch == 16


TWO_CLOCK = {
    "type": "two_clock",
    "initial_batch": 8,
    "base_lr": 1e-3,
    "growth": 2.0,
    "hysteresis_samples": 1,
    "min_stage_samples": 1,
    "max_stages": 2,
    "failure_signal": "entropy",
    "failure_threshold": 0.5,  # an absolute collapse level
    "forecast_samples": 16,  # v3's forecast evidence in rollouts (default 2048)
    "forecast": "on",  # the live forecast switches (advisory by default)
    "failure_exponent": 0.5,
    "failure_lr_exponent": 0.5,  # a square-root switch (policy v3's default holds the LR)
    "constraints": {"group_size": 4},
}


def _entropy_falls(ctl, steps=40):
    return [
        ctl.on_step(
            s,
            {
                "rollout/num_samples": float(ctl.batch),
                "entropy_loss": 2.0 - 0.04 * s,
                "actor_lr": 1e-3,
                "rollout/reward_mean": 0.1,
            },
        )
        for s in range(1, steps)
    ]


@pytest.mark.parametrize("fail", [False, True])
def test_two_clock_switches_through_the_driver(openrlhf_args, fail):
    from rlvr_schedule_adapters.openrlhf import ARGS_ATTR, make_controller

    setattr(openrlhf_args, ARGS_ATTR, {"schedule": TWO_CLOCK})
    rec = _Recorder(fail=fail)
    ctl = make_controller(openrlhf_args, rec)
    assert type(ctl.schedule).__name__ == "TwoClockScheduler"
    decisions = _entropy_falls(ctl)
    switched = [d for d in decisions if d.switched]
    if fail:  # the workers refused: the driver logged it and the schedule held its stage
        assert not switched and ctl.faults and ctl.faults[0][:2] == ("<host>", "apply")
        assert openrlhf_args.train.batch_size == 8 and ctl.schedule.current.batch == 8
    else:
        assert len(switched) == 1 and switched[0].batch == 16
        assert rec.calls == [(16, pytest.approx(1e-3 * 2**0.5))]  # sqrt LR rule
        assert openrlhf_args.train.batch_size == 16 and openrlhf_args.rollout.batch_size == 4


def test_advisory_controller_decides_but_never_reaches_the_workers(openrlhf_args, caplog):
    from rlvr_schedule_adapters.openrlhf import ARGS_ATTR, make_controller

    setattr(openrlhf_args, ARGS_ATTR, {"schedule": TWO_CLOCK, "advisory": True})
    rec = _Recorder()
    ctl = make_controller(openrlhf_args, rec)
    with caplog.at_level("INFO", logger="rlvr_schedule.driver"):
        decisions = _entropy_falls(ctl)
    assert [d.batch for d in decisions if d.switched] == [16]
    assert rec.calls == [] and openrlhf_args.train.batch_size == 8 and ctl.batch == 8
    assert "advisory, not applied" in caplog.text


def test_the_published_grid_is_what_plan_for_batch_accepts(openrlhf_args):
    from rlvr_schedule_adapters.openrlhf.plan import host_grid, plan_for_batch

    grid = host_grid(openrlhf_args)  # micro-batch 2 x 1 rank; 8 rollouts per update = 1 per step
    for batch in range(1, 100):
        try:
            plan_for_batch(openrlhf_args, batch)
            ok = True
        except ValueError:
            ok = False
        assert ok == grid.is_valid(batch), batch


def test_a_resume_on_another_grid_snaps_the_saved_stage_with_a_warning(openrlhf_args):
    from rlvr_schedule_adapters._common import ScheduleSetupWarning

    sched = StaticSchedule([{"batch": 8, "lr": 1e-3, "until_samples": None}])
    rec = _Recorder()
    ctl = ScheduleController(sched, openrlhf_args, rec)
    ctl.driver.resume_target = (6, 1e-3)  # saved by a run whose grid was multiples of 2 x 3 ranks
    openrlhf_args.train.micro_batch_size = 4  # this launch: multiples of 4
    with pytest.warns(ScheduleSetupWarning, match=r"saved in the checkpoint \(6 rollouts\).*snapped to 4"):
        assert ctl.begin()
    assert rec.calls == [(4, 1e-3)]
