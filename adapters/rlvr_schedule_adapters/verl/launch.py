"""Launch verl's PPO/GRPO trainer with a batch schedule.

    python -m rlvr_schedule_adapters.verl --schedule schedule.yaml \\
        data.train_files=... actor_rollout_ref.model.path=... actor_rollout_ref.rollout.n=8 ...

The arguments other than ours are verl's usual Hydra overrides. The config is composed from
verl's own ``ppo_trainer`` config (``--config-name`` picks another, e.g.
``ppo_megatron_trainer``, or ``--config-dir`` a directory of yours), checked as
``verl.trainer.main_ppo.main`` checks it, given an ``rlvr_schedule`` section and run through
:data:`~rlvr_schedule_adapters.verl.trainer.RlvrScheduleTaskRunner`. A bad schedule file fails
here, before Ray starts, with a ConfigError naming the file and field.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["build_config", "describe", "launch", "main", "parse_args"]


def _verl_config_dir() -> str:
    import verl

    return os.path.join(os.path.dirname(verl.__file__), "trainer", "config")


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    """Our options and the remaining Hydra overrides (``key=value``, ``+key=value``, ``~key``)."""
    p = argparse.ArgumentParser(
        prog="python -m rlvr_schedule_adapters.verl",
        description="Run verl's sync PPO/GRPO trainer following a batch schedule.",
    )
    p.add_argument("--schedule", required=True, help="schedule YAML/JSON (static or two_clock)")
    p.add_argument(
        "--mini-batch-mode",
        choices=("per_step", "fixed"),
        default="per_step",
        help="per_step: keep PPO mini-batches per step (default); fixed: keep ppo_mini_batch_size",
    )
    p.add_argument("--jsonl", default=None, help="also write records and decisions to this JSONL file")
    p.add_argument(
        "--advisory",
        action="store_true",
        help="decide and log every decision with its reason, change nothing (batch and LR stay as launched)",
    )
    p.add_argument(
        "--config-name", default="ppo_trainer", help="verl config to compose (default ppo_trainer)"
    )
    p.add_argument("--config-dir", default=None, help="directory of the config (default: verl's own)")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="compose and check the config, print the batch plan and start-up warnings, run nothing",
    )
    args, rest = p.parse_known_args(argv)
    bad = [a for a in rest if "=" not in a and not a.startswith("~")]
    if bad:
        p.error(f"not a Hydra override (key=value): {' '.join(bad)}")
    return args, rest


def build_config(
    overrides: Sequence[str],
    schedule: str | os.PathLike[str],
    *,
    mini_batch_mode: str = "per_step",
    jsonl: str | None = None,
    config_name: str = "ppo_trainer",
    config_dir: str | None = None,
    validate: bool = True,
    advisory: bool = False,
) -> Any:
    """verl's composed config with ``overrides`` and the ``rlvr_schedule`` section.

    The schedule file is parsed first (ConfigError on a bad one). ``validate`` runs verl's
    ``auto_set_device`` and ``validate_config`` as its own ``main`` does.
    """
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from rlvr_schedule.policy import load_schedule
    from rlvr_schedule_adapters.verl.trainer import SETTINGS_KEY

    schedule_path = str(Path(schedule).resolve())
    load_schedule(schedule_path)  # fail early, on the driver
    cdir = str(Path(config_dir or _verl_config_dir()).resolve())
    with initialize_config_dir(config_dir=cdir, version_base=None):
        config = compose(config_name=config_name, overrides=list(overrides))
    if not config.trainer.get("use_v1", False):
        raise ValueError("the rlvr-schedule verl adapter drives the v1 trainer: set trainer.use_v1=True")
    if validate:
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import validate_config
        from verl.utils.device import auto_set_device

        auto_set_device(config)
        validate_config(
            config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
        )
    with open_dict(config):
        config[SETTINGS_KEY] = {
            "schedule": schedule_path,
            "mini_batch_mode": mini_batch_mode,
            "jsonl": None if jsonl is None else str(Path(jsonl).resolve()),
            "advisory": bool(advisory),
        }
    return config


def launch(config: Any, *, run: Callable[..., None] | None = None) -> None:
    """Run ``config`` (from :func:`build_config`) with the schedule-following task runner."""
    from rlvr_schedule_adapters.verl.trainer import RlvrScheduleTaskRunner

    if run is None:
        from verl.trainer.main_ppo import run_ppo as run
    run(config, task_runner_class=RlvrScheduleTaskRunner)


def describe(config: Any) -> str:
    """The batch plan of a config from :func:`build_config`, with the start-up warnings the
    trainer would give (on a copy: ``data.gen_batch_size`` gets pinned as the trainer pins it)."""
    import copy

    from rlvr_schedule.policy import load_schedule
    from rlvr_schedule_adapters.verl.batch import (
        check_setup,
        pin_gen_batch_size,
        planned_rollout_batches,
        read_layout,
    )
    from rlvr_schedule_adapters.verl.trainer import SETTINGS_KEY

    cfg = copy.deepcopy(config)
    section = cfg[SETTINGS_KEY]
    schedule = load_schedule(section.schedule)
    gen = pin_gen_batch_size(cfg, schedule)
    lay = read_layout(cfg)
    lines = [
        f"schedule: {section.schedule} ({type(schedule).__name__})"
        + (" - advisory: decisions are logged, nothing is applied" if section.get("advisory") else ""),
        f"launch: {lay.train_batch_size} prompts x rollout.n {lay.group_size} = {lay.rollouts} "
        "rollouts per step, "
        f"ppo_mini_batch_size {lay.ppo_mini_batch_size}, data.gen_batch_size {gen}, {lay.world_size} ranks",
        "planned rollout batches: " + ", ".join(str(b) for b in planned_rollout_batches(schedule)),
    ]
    msgs = check_setup(cfg, schedule, mini_batch_mode=section.mini_batch_mode, warn=False)
    lines += [f"warning: {m}" for m in msgs] or ["no start-up warnings"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, *, run: Callable[..., None] | None = None) -> int:
    """The command line: build the config, then :func:`launch` it (or print it: ``--dry-run``)."""
    args, overrides = parse_args(argv)
    config = build_config(
        overrides,
        args.schedule,
        mini_batch_mode=args.mini_batch_mode,
        jsonl=args.jsonl,
        config_name=args.config_name,
        config_dir=args.config_dir,
        advisory=args.advisory,
    )
    if args.dry_run:
        print(describe(config))
        return 0
    launch(config, run=run)
    return 0
