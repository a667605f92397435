"""Fixtures of the verl adapter tests: real verl configs (composed once), schedule files."""

from __future__ import annotations

import copy
import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network calls from the local test cluster

#: A GRPO-style base: 8 prompts x 4 rollouts per step, one PPO mini-batch, one (CPU) rank.
BASE_OVERRIDES = [
    "algorithm.adv_estimator=grpo",
    "data.train_batch_size=8",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "actor_rollout_ref.actor.optim.lr=1e-6",
    "trainer.n_gpus_per_node=1",
    "trainer.nnodes=1",
    "trainer.logger=[]",
]

STATIC_YAML = """\
type: static
constraints: {group_size: 4}
stages:
  - {batch: 32, lr: 1.0e-6, until_samples: 64}
  - {batch: 64, lr: 2.0e-6, until_samples: 192}
  - {batch: 128, lr: 3.0e-6, until_samples: null}
"""


@pytest.fixture(scope="session")
def _base_config():
    import verl
    from hydra import compose, initialize_config_dir

    d = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=d, version_base=None):
        return compose(config_name="ppo_trainer", overrides=BASE_OVERRIDES)


@pytest.fixture
def verl_config(_base_config):
    """A fresh copy of verl's real composed ``ppo_trainer`` config (struct mode kept)."""
    return copy.deepcopy(_base_config)


@pytest.fixture
def write_schedule(tmp_path: Path) -> Callable[[str], Path]:
    def write(text: str = STATIC_YAML, name: str = "schedule.yaml") -> Path:
        p = tmp_path / name
        p.write_text(textwrap.dedent(text))
        return p

    return write


@pytest.fixture
def schedule_config(verl_config, write_schedule, tmp_path):
    """The base config with an ``rlvr_schedule`` section (static 32 -> 64 -> 128 rollouts) and
    checkpoints under ``tmp_path``."""
    from omegaconf import open_dict

    path = write_schedule()
    with open_dict(verl_config):
        verl_config.rlvr_schedule = {"schedule": str(path), "mini_batch_mode": "per_step"}
        verl_config.trainer.default_local_dir = str(tmp_path / "ckpt")
    verl_config.trainer.v1.trainer_mode = "rlvr_sync"
    return verl_config


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray cluster for the tests that need Ray (4 logical CPUs; shut down at the end)."""
    import ray

    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
