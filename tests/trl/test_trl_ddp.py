"""Two processes on CPU (torch.distributed, gloo): rollouts counted across ranks, the micro-batch
gradient norm averaged over ranks so every rank feeds its schedule the same record, the switch taken
by both ranks at the same update."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from trl_harness import make_tiny_model

pytestmark = pytest.mark.slow

CHILD = Path(__file__).resolve().parent / "ddp_grpo.py"


def test_two_processes_count_rollouts_across_ranks_and_agree(tmp_path):
    model = tmp_path / "model"
    make_tiny_model(model)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            "29531",
            str(CHILD),
            str(model),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert all(r["world"] == 2 and r["errors"] == [] for r in ranks)
    # 4 per device x 2 ranks x GA: 16 rollouts per update; the switch to 32 decided at 48 rollouts
    # (6 micro-steps into the epoch) waits one update for a boundary the new GA 4 divides
    assert [x["batch"] for x in ranks[0]["records"]] == [16, 16, 16, 16, 32, 32]
    assert [x["samples"] for x in ranks[0]["records"]] == [16, 32, 48, 64, 96, 128]
    # what each rank's reward function scored: half of every update
    assert ranks[0]["completions"] == ranks[1]["completions"] == [8, 8, 8, 8, 16, 16]
    assert ranks[0]["ga"] == ranks[1]["ga"] == [2, 2, 2, 2, 4, 4]
    # the same records and decisions on both ranks (the micro norm is averaged over them)
    assert ranks[0]["records"] == ranks[1]["records"] and ranks[0]["decisions"] == ranks[1]["decisions"]
    assert all(math.isfinite(x["grad_norm_micro"]) and x["micro_batch"] == 4 for x in ranks[0]["records"])
