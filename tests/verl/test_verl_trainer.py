"""The real verl trainer subclass on a real composed config, with the Ray workers replaced by
recorders: start-up, the per-step reads after a switch, the LR call, faults, checkpoints.

verl cannot run a step on CPU (rollouts need vLLM/SGLang servers, the FSDP engine needs CUDA),
so each test drives the trainer's own methods between steps the way ``PPOTrainer.fit`` does.
"""

from __future__ import annotations

import copy
import json
import warnings

import pytest
import torch

from rlvr_schedule_adapters.verl.batch import VerlSetupWarning
from rlvr_schedule_adapters.verl.state import STATE_FILE


class RecordingWorkerGroup:
    """Stands in for ``actor_rollout_wg``: records rlvr_set_lr calls and update_actor meta."""

    def __init__(self, fail: int = 0) -> None:
        self.lrs: list[float] = []
        self.fail = fail
        self.update_meta: list[dict] = []

    def rlvr_set_lr(self, lr: float):
        if self.fail > 0:
            self.fail -= 1
            raise RuntimeError("worker unreachable")
        self.lrs.append(lr)
        return [lr]

    def update_actor(self, batch):
        self.update_meta.append(dict(batch.extra_info))
        return {"metrics": {"mfu": 0.0, "lr": 1e-6}}


def _metrics(step: int, score: float = 0.5) -> dict:
    return {
        "training/global_step": step,
        "critic/score/mean": score,
        "actor/entropy": 1.0,
        "actor/grad_norm": 0.5,
        "actor/lr": 1e-6,
        "response_length/mean": 10.0,
    }


def make_trainer(config, wg=None):
    from verl.utils.tracking import Tracking

    from rlvr_schedule_adapters.verl.trainer import RlvrSchedulePPOTrainer

    t = RlvrSchedulePPOTrainer(config)
    t.actor_rollout_wg = wg if wg is not None else RecordingWorkerGroup()
    t.logger = Tracking(project_name="p", experiment_name="e", default_backend=[])
    t.global_steps = 1
    return t


def run_steps(t, steps, score: float = 0.5):
    """What fit() does around a step that matters here: log, then advance the step counter."""
    for _ in range(steps):
        t.logger.log(data=_metrics(t.global_steps, score), step=t.global_steps)
        t.global_steps += 1


def prompts_per_step(t) -> tuple[int, int]:
    """The prompts a real ``PPOTrainer`` step would submit and sample, read from the trainer's
    own ``step()`` with the rollout and training stages stubbed out."""
    import transfer_queue as tq  # noqa: F401  (imported by verl's trainer module too)
    from verl.utils import tensordict_utils as tu

    gen = t.config.data.gen_batch_size
    submitted, sampled = [], []
    t._fetch_one_gen_batch = lambda: tu.get_tensordict({"input_ids": torch.zeros(gen, 2)})
    t._submit_batch_to_rollout = lambda batch: submitted.append(len(batch)) or len(batch)

    class _Meta:
        keys, tags, partition_id = [], [], "train"

    def step_once(metrics, timing_raw, sample_batch_size):
        sampled.append(sample_batch_size)
        return _Meta()

    t._step_once = step_once
    t.step({}, {})
    return submitted[-1], sampled[-1]


def test_registered_and_sync(schedule_config):
    from verl.trainer.ppo.v1 import get_trainer_cls

    from rlvr_schedule_adapters.verl.trainer import TRAINER_NAME, RlvrSchedulePPOTrainer

    assert get_trainer_cls(TRAINER_NAME) is RlvrSchedulePPOTrainer
    t = make_trainer(schedule_config)
    # verl branches on trainer_mode == "sync": the subclass must look like a plain sync run
    assert schedule_config.trainer.v1.trainer_mode == "sync" and t.trainer_mode == "sync"
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    assert type(t.replay_buffer) is ReplayBuffer


def test_worker_class_is_swapped(schedule_config):
    from verl.trainer.ppo.utils import Role

    from rlvr_schedule_adapters.verl.trainer import ScheduleActorRolloutRefWorker

    t = make_trainer(schedule_config)
    t._init_resource_pool_mgr()
    ((role, cls),) = [
        (r, c)
        for r, c in t.role_worker_mapping.items()
        if r in (Role.ActorRollout, Role.ActorRolloutRef, Role.Actor)
    ]
    assert cls.__ray_actor_class__ is ScheduleActorRolloutRefWorker
    assert hasattr(ScheduleActorRolloutRefWorker, "rlvr_set_lr")


def test_gen_batch_size_pinned_to_divide_every_stage(schedule_config):
    t = make_trainer(schedule_config)
    # stages: 32, 64, 128 rollouts = 8, 16, 32 prompts; launched with 8 prompts
    assert t.config.data.gen_batch_size == 8
    assert t.rlvr_setup_warnings == []


def test_start_and_switch_reach_the_per_step_reads(schedule_config):
    schedule_config.actor_rollout_ref.actor.optim.lr = 5e-7  # launched with another LR
    wg = RecordingWorkerGroup()
    t = make_trainer(schedule_config, wg)
    t.on_train_begin()
    assert wg.lrs == [1e-6]  # stage 0 applied at start
    assert prompts_per_step(t) == (8, 8)

    run_steps(t, 2)  # 64 rollouts: the schedule moves to 64 rollouts, 2e-6
    assert t.config.data.train_batch_size == 16
    assert t.config.actor_rollout_ref.actor.ppo_mini_batch_size == 16  # still one mini-batch per step
    assert wg.lrs[-1] == pytest.approx(2e-6)
    assert prompts_per_step(t) == (16, 16)  # 2 dataloader fetches of 8, one update of 16 prompts
    assert t._get_required_batch_multiple(dp_size=1) == 16 * 4

    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    class _Batch:
        extra_info: dict = {}

    PPOTrainer._update_actor(t, _Batch(), {})
    assert wg.update_meta[-1]["mini_batch_size"] == 16 * 4  # rollouts per PPO mini-batch

    run_steps(t, 2)  # 64 + 2 x 64 = 192: third stage
    assert t.config.data.train_batch_size == 32 and wg.lrs[-1] == pytest.approx(3e-6)
    assert t.rlvr_controller.samples == 192
    assert t.rlvr_controller.faults == []


def test_advisory_decides_but_changes_neither_config_nor_workers(schedule_config):
    from omegaconf import open_dict

    with open_dict(schedule_config):
        schedule_config.rlvr_schedule.advisory = True
    schedule_config.actor_rollout_ref.actor.optim.lr = 5e-7
    wg = RecordingWorkerGroup()
    t = make_trainer(schedule_config, wg)
    t.on_train_begin()
    run_steps(t, 6)  # 6 x 32 = 192 rollouts: the schedule passes both of its switches (64, 192)
    assert t.rlvr_controller.schedule.index == 2 and t.rlvr_controller.last_decision.batch == 128
    assert wg.lrs == [] and t.config.data.train_batch_size == 8  # as launched
    assert t.rlvr_controller.samples == 6 * 32  # rollouts counted at the batch that ran


def test_failed_lr_call_keeps_the_stage_and_retries(schedule_config):
    wg = RecordingWorkerGroup()
    t = make_trainer(schedule_config, wg)
    t.on_train_begin()
    wg.fail = 1
    run_steps(t, 2)  # the switch to 64 fails at the LR call
    assert t.config.data.train_batch_size == 8  # config restored: the old stage stays whole
    assert t.config.actor_rollout_ref.actor.ppo_mini_batch_size == 8
    assert t.rlvr_controller.running == (32, 1e-6)
    assert [w for _, w, _ in t.rlvr_controller.faults] == ["apply"]
    run_steps(t, 1)  # retried on the next step
    assert t.config.data.train_batch_size == 16 and wg.lrs[-1] == pytest.approx(2e-6)
    assert t.rlvr_controller.samples == 3 * 32


def test_raising_schedule_does_not_stop_training(schedule_config, monkeypatch):
    wg = RecordingWorkerGroup()
    t = make_trainer(schedule_config, wg)
    t.on_train_begin()

    def boom(record):
        raise RuntimeError("scheduler bug")

    monkeypatch.setattr(t.rlvr_controller.schedule, "propose", boom)
    run_steps(t, 3)  # Tracking.log must not raise
    assert t.config.data.train_batch_size == 8
    assert len(t.rlvr_controller.faults) == 3
    assert t.rlvr_controller.samples == 3 * 32  # rollouts still counted


def test_setup_warnings(verl_config, write_schedule, tmp_path):
    from omegaconf import open_dict

    path = write_schedule("""\
        type: static
        stages:
          - {batch: 32, lr: 1.0e-6, until_samples: 64}
          - {batch: 42, lr: 1.0e-6, until_samples: 128}
          - {batch: 48, lr: 1.0e-6, until_samples: null}
        """)
    with open_dict(verl_config):
        verl_config.rlvr_schedule = {"schedule": str(path)}
        verl_config.data.gen_batch_size = 8  # the user's choice: 48 rollouts = 12 prompts do not fit
    with pytest.warns(VerlSetupWarning) as rec:
        t = make_trainer(verl_config)
    text = " ".join(str(w.message) for w in rec)
    assert "planned rollout batch 42 is not a multiple of actor_rollout_ref.rollout.n=4" in text
    assert "planned rollout batch 48 (12 prompts) is not a multiple of the dataloader batch" in text
    # verl's grid (whole groups of 4 x whole fetches of 8 prompts): the driver runs the nearest batch on it
    assert "stage 1 (42 rollouts) is off the host's grid (multiples of 32): the host runs 32" in text
    assert "stage 2 (48 rollouts) is off the host's grid (multiples of 32): the host runs 32" in text
    assert len(t.rlvr_setup_warnings) == 4


def test_mini_batches_warning(schedule_config):
    schedule_config.actor_rollout_ref.actor.ppo_mini_batch_size = 4  # two updates per step
    with pytest.warns(VerlSetupWarning, match="2 PPO mini-batches per step"):
        t = make_trainer(schedule_config)
    t.on_train_begin()
    run_steps(t, 2)
    assert t.config.data.train_batch_size == 16
    assert t.config.actor_rollout_ref.actor.ppo_mini_batch_size == 8  # per_step mode keeps 2 per step


def test_missing_settings_is_a_clear_error(verl_config):
    from rlvr_schedule_adapters.verl.trainer import RlvrSchedulePPOTrainer

    with pytest.raises(ValueError, match="rlvr_schedule.schedule"):
        RlvrSchedulePPOTrainer(verl_config)


def test_checkpoint_state_saved_and_restored(schedule_config, monkeypatch, tmp_path):
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    monkeypatch.setattr(PPOTrainer, "_save_checkpoint", lambda self: None)  # workers' part
    wg = RecordingWorkerGroup()
    t = make_trainer(schedule_config, wg)
    t.on_train_begin()
    run_steps(t, 2)  # now at 64 rollouts
    # step 3: verl saves inside the step, then logs the step's metrics
    t._save_checkpoint()
    path = tmp_path / "ckpt" / "global_step_3" / STATE_FILE
    provisional = json.loads(path.read_text())
    assert provisional["complete"] is False and provisional["samples"] == 64
    assert provisional["pending_rollouts"] == 64
    run_steps(t, 1)
    final = json.loads(path.read_text())
    assert final["complete"] is True and final["samples"] == 128 and final["in_effect"][0] == 64
    assert not list(path.parent.glob(".*tmp"))  # atomic writes leave no temporaries

    # a new process resumes from global_step_3 with the launch config (8 prompts)
    def fake_load(self):
        self.global_steps = 3

    monkeypatch.setattr(PPOTrainer, "_load_checkpoint", fake_load)
    cfg2 = copy.deepcopy(schedule_config)
    cfg2.data.train_batch_size = 8
    cfg2.actor_rollout_ref.actor.ppo_mini_batch_size = 8
    cfg2.trainer.v1.trainer_mode = "rlvr_sync"
    wg2 = RecordingWorkerGroup()
    t2 = make_trainer(cfg2, wg2)
    t2._load_checkpoint()
    assert t2.rlvr_controller.samples == 128
    t2.global_steps = 4
    t2.on_train_begin()
    assert t2.config.data.train_batch_size == 16 and wg2.lrs == [pytest.approx(2e-6)]
    run_steps(t2, 1)  # 192: the third stage, as the uninterrupted run would
    assert t2.config.data.train_batch_size == 32


def test_resume_from_provisional_state_counts_the_step(schedule_config, monkeypatch, tmp_path):
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    from rlvr_schedule_adapters.verl.state import save_state

    monkeypatch.setattr(PPOTrainer, "_save_checkpoint", lambda self: None)
    t = make_trainer(schedule_config)
    t.on_train_begin()
    run_steps(t, 1)
    t._save_checkpoint()  # crash before step 2's log: only the provisional state exists
    monkeypatch.setattr(PPOTrainer, "_load_checkpoint", lambda self: setattr(self, "global_steps", 2))
    cfg2 = copy.deepcopy(schedule_config)
    cfg2.trainer.v1.trainer_mode = "rlvr_sync"
    t2 = make_trainer(cfg2)
    t2._load_checkpoint()
    assert t2.rlvr_controller.samples == 64  # 32 seen + 32 of the checkpointed step

    # a corrupt file is logged and the schedule starts afresh; training goes on
    save_state(tmp_path / "ckpt" / "global_step_2", {"x": 1})
    (tmp_path / "ckpt" / "global_step_2" / STATE_FILE).write_text("{not json")
    t3 = make_trainer(cfg2)
    t3._load_checkpoint()
    assert t3.rlvr_controller.samples == 0
    assert [w for _, w, _ in t3.rlvr_controller.faults] == ["load_state"]


def test_resume_without_state_warns(schedule_config, monkeypatch):
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    monkeypatch.setattr(PPOTrainer, "_load_checkpoint", lambda self: setattr(self, "global_steps", 5))
    t = make_trainer(schedule_config)
    with pytest.warns(VerlSetupWarning, match="no scheduler state"):
        t._load_checkpoint()
    with warnings.catch_warnings():
        warnings.simplefilter("error", VerlSetupWarning)
        t.on_train_begin()


def test_two_clock_schedule_file_switches_the_trainer(verl_config, write_schedule, tmp_path):
    """A ``type: two_clock`` file: the scheduler applies through the plugin hook (the trainer's
    controller), driven by a falling entropy in verl's metrics."""
    from omegaconf import open_dict

    path = write_schedule(
        """\
        type: two_clock
        initial_batch: 32
        base_lr: 1.0e-6
        lr_rule: sqrt
        hysteresis_samples: 1
        min_stage_samples: 0
        max_stages: 2
        failure_signal: entropy
        failure_threshold: 0.2
        forecast_samples: 64
        forecast: "on"
        failure_exponent: 0.5
        failure_lr_exponent: 0.5
        growth: 2
        constraints: {group_size: 4, max_batch: 256}
        """,
        name="two_clock.yaml",
    )
    with open_dict(verl_config):
        verl_config.rlvr_schedule = {"schedule": str(path)}
    wg = RecordingWorkerGroup()
    t = make_trainer(verl_config, wg)
    t.on_train_begin()
    entropy = 1.0
    while t.config.data.train_batch_size == 8 and t.global_steps < 40:
        m = _metrics(t.global_steps)
        m["actor/entropy"] = entropy
        t.logger.log(data=m, step=t.global_steps)
        t.global_steps += 1
        entropy -= 0.05
    assert t.config.data.train_batch_size == 16  # switched to 64 rollouts
    assert t.config.actor_rollout_ref.actor.ppo_mini_batch_size == 16
    assert wg.lrs == [pytest.approx(1e-6 * 2**0.5)]  # sqrt rule
    assert t.rlvr_controller.schedule.current.batch == 64 and t.rlvr_controller.faults == []


def test_unwritable_state_is_survived(schedule_config, monkeypatch, tmp_path):
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    monkeypatch.setattr(PPOTrainer, "_save_checkpoint", lambda self: None)
    (tmp_path / "ckpt").write_text("a file where the checkpoint folder should be")
    t = make_trainer(schedule_config)
    t.on_train_begin()
    t._save_checkpoint()
    run_steps(t, 2)  # training goes on and still switches
    assert t.config.data.train_batch_size == 16
    assert [w for _, w, _ in t.rlvr_controller.faults] == ["save_state"]
