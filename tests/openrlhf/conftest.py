"""OpenRLHF adapter tests: real OpenRLHF 0.11.2 classes on CPU.

OpenRLHF's trainer modules import flash_attn and vllm at module level; when those are missing
(always, on CPU) the test-only stubs in ``stubs/`` are appended to ``sys.path`` (never shipped,
every call raises). No ``tests/__init__.py``: the OpenRLHF wheel ships a top-level ``tests``
package, so nothing here imports through a ``tests`` package.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
STUBS = HERE / "stubs"

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if any(importlib.util.find_spec(m) is None for m in ("flash_attn", "vllm")):
    sys.path.append(str(STUBS))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

#: A small GRPO-like command line: 2 prompts x 4 samples = 8 rollouts per step, one update per step.
BASE_ARGV = [
    "--actor.model_name_or_path",
    "tiny-model",
    "--rollout.batch_size",
    "2",
    "--rollout.n_samples_per_prompt",
    "4",
    "--train.batch_size",
    "8",
    "--train.micro_batch_size",
    "2",
    "--rollout.micro_batch_size",
    "2",
    "--actor.num_nodes",
    "1",
    "--actor.num_gpus_per_node",
    "1",
    "--algo.advantage.estimator",
    "group_norm",
    "--actor.adam.lr",
    "1e-3",
    "--actor.lr_scheduler",
    "constant",
]


@pytest.fixture
def base_argv():
    """:data:`BASE_ARGV` (a fixture, so tests need not import this conftest by module name)."""
    return list(BASE_ARGV)


@pytest.fixture(scope="session")
def _base_args():
    from rlvr_schedule_adapters.openrlhf import openrlhf_cli_args

    return openrlhf_cli_args(BASE_ARGV)


@pytest.fixture
def openrlhf_args(_base_args):
    """OpenRLHF's own parsed args for :data:`BASE_ARGV` (fresh copy per test)."""
    return copy.deepcopy(_base_args)


@pytest.fixture
def cli_args():
    """OpenRLHF's parsed args for BASE_ARGV plus extra flags (later flags win)."""
    from rlvr_schedule_adapters.openrlhf import openrlhf_cli_args

    return lambda *extra: openrlhf_cli_args([*BASE_ARGV, *extra])
