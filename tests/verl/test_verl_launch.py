"""The launcher, the Ray task runner and the entry-point module."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rlvr_schedule.errors import ConfigError

OVERRIDES = [
    "algorithm.adv_estimator=grpo",
    "data.train_batch_size=8",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "trainer.n_gpus_per_node=1",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
]


def test_main_builds_a_checked_config_and_runs_the_runner(write_schedule, tmp_path):
    from rlvr_schedule_adapters.verl import main
    from rlvr_schedule_adapters.verl.trainer import RlvrScheduleTaskRunner

    sched = write_schedule()
    calls = []
    from rlvr_schedule_adapters.verl import launch as launch_mod

    rc = launch_mod.main(
        ["--schedule", str(sched), "--jsonl", str(tmp_path / "r.jsonl"), *OVERRIDES],
        run=lambda cfg, task_runner_class: calls.append((cfg, task_runner_class)),
    )
    assert rc == 0 and len(calls) == 1
    cfg, runner = calls[0]
    assert runner is RlvrScheduleTaskRunner
    assert cfg.rlvr_schedule.schedule == str(sched.resolve())
    assert cfg.rlvr_schedule.mini_batch_mode == "per_step"
    assert cfg.rlvr_schedule.jsonl == str((tmp_path / "r.jsonl").resolve())
    assert cfg.rlvr_schedule.advisory is False
    assert cfg.data.train_batch_size == 8 and cfg.actor_rollout_ref.rollout.n == 4
    assert main is not None  # the entry-point module exposes the same command
    launch_mod.main(
        ["--schedule", str(sched), "--advisory", *OVERRIDES],
        run=lambda cfg, task_runner_class: calls.append((cfg, task_runner_class)),
    )
    assert calls[-1][0].rlvr_schedule.advisory is True


def test_bad_schedule_fails_before_anything_runs(write_schedule):
    from rlvr_schedule_adapters.verl.launch import main

    bad = write_schedule("type: static\nstages:\n  - {batch: -3, lr: 1.0e-6}\n", name="bad.yaml")
    ran = []
    with pytest.raises(ConfigError, match=r"bad.yaml.*stages\[0\].batch"):
        main(["--schedule", str(bad), *OVERRIDES], run=lambda *a, **k: ran.append(1))
    assert ran == []


def test_arguments_that_are_not_overrides_are_refused(write_schedule, capsys):
    from rlvr_schedule_adapters.verl.launch import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--schedule", "s.yaml", "data.train_batch_size=8", "oops"])
    assert "not a Hydra override" in capsys.readouterr().err
    args, rest = parse_args(["--schedule", "s.yaml", "--mini-batch-mode", "fixed", "a.b=1", "~c"])
    assert args.mini_batch_mode == "fixed" and rest == ["a.b=1", "~c"]


def test_legacy_trainer_is_refused(write_schedule):
    from rlvr_schedule_adapters.verl.launch import build_config

    with pytest.raises(ValueError, match="trainer.use_v1=True"):
        build_config([*OVERRIDES, "trainer.use_v1=False"], write_schedule(), validate=False)


def test_runner_runs_the_schedule_trainer(schedule_config, monkeypatch):
    """The runner's ``run`` (what the TaskRunner actor executes) selects our registered trainer
    through verl's own ``get_trainer_cls``; the rest of verl's run is stubbed."""
    from verl.trainer.main_ppo import TaskRunnerV1
    from verl.trainer.ppo.v1 import get_trainer_cls

    from rlvr_schedule_adapters.verl.trainer import RlvrSchedulePPOTrainer, RlvrScheduleTaskRunner

    seen = []
    monkeypatch.setattr(
        TaskRunnerV1.__ray_actor_class__,
        "run",
        lambda self, config: seen.append(get_trainer_cls(config.trainer.v1.trainer_mode)),
    )
    schedule_config.trainer.v1.trainer_mode = "sync"  # as launched
    runner = RlvrScheduleTaskRunner.__ray_actor_class__()
    runner.run(schedule_config)
    assert seen == [RlvrSchedulePPOTrainer]


def test_entry_point_module_imports_without_verl_or_torch():
    code = textwrap.dedent("""
        import sys
        for name in ("verl", "torch", "ray", "omegaconf", "hydra"):
            sys.modules[name] = None  # any import of them raises ImportError
        import rlvr_schedule_adapters.verl as vp
        from rlvr_schedule_adapters.verl import batch, controller, state, tracking
        print(sorted(vp.rlvr_schedule_metric_aliases().items())[0])
        try:
            vp.RlvrSchedulePPOTrainer
        except ImportError:
            print("lazy ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "lazy ok" in out.stdout


def test_plugin_host_finds_the_entry_point_aliases():
    from rlvr_schedule.ingest import collect_aliases
    from rlvr_schedule.plugins import PluginHost

    host = PluginHost()
    names = [name for name, _ in host.pm.list_name_plugin()]
    assert "verl" in names
    table = collect_aliases(host)
    assert table["critic/score/mean"] == "reward_mean" and table["actor/entropy"] == "entropy"


def test_example_schedule_loads():
    from pathlib import Path

    from rlvr_schedule.policy import TwoClockScheduler, load_schedule

    root = Path(__file__).resolve().parents[2]
    s = load_schedule(root / "examples" / "verl_qwen_math_two_clock.yaml")
    assert isinstance(s, TwoClockScheduler) and s.current.batch == 1024


@pytest.mark.slow
def test_example_script_dry_run(tmp_path):
    """The example launcher end to end short of Ray: verl composes and validates its config, the
    adapter prints the plan (no GPU needed)."""
    import os
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "verl_qwen_math_two_clock.sh"
    env = dict(os.environ, PYTHON=sys.executable, RUN_DIR=str(tmp_path / "run"))
    out = subprocess.run(
        ["bash", str(script), "--dry-run"], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "128 prompts x rollout.n 8 = 1024 rollouts per step" in out.stdout
    assert "data.gen_batch_size 32" in out.stdout and "no start-up warnings" in out.stdout


@pytest.mark.slow
def test_real_run_ppo_runs_our_trainer_in_the_task_runner_actor(verl_config, ray_cluster, tmp_path):
    """verl's own ``run_ppo`` with our runner: inside the TaskRunner actor process the trainer
    registered as ``rlvr_sync`` is found and built. The schedule file is missing, so our
    constructor's ConfigError (raised in the actor) is what comes back: no GPU needed."""
    from omegaconf import open_dict

    from rlvr_schedule_adapters.verl.launch import launch

    missing = tmp_path / "gone.yaml"
    with open_dict(verl_config):
        verl_config.rlvr_schedule = {"schedule": str(missing)}
        verl_config.transfer_queue.backend.SimpleStorage.num_data_storage_units = 1  # fits a CPU cluster
    with pytest.raises(Exception) as info:
        launch(verl_config)
    text = str(info.value)
    assert "ConfigError" in text and f"{missing}: cannot read schedule file" in text
    assert "RlvrSchedulePPOTrainer" in text or "build_controller" in text  # raised in our constructor
