"""Two processes on CPU (torch.distributed, gloo): rollouts counted across ranks, the micro-batch
gradient norm averaged over ranks so every rank feeds its schedule the same record, the switch taken
by both ranks at the same update, and a resume after the switch that each rank runs as the
uninterrupted run did."""

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


def _torchrun(model: Path, out: Path, *extra: str) -> list[dict]:
    """Both ranks' reports. ``--standalone``: the rendezvous takes a free port (no fixed one to race
    another run for); the child destroys its process group before exit (see ``ddp_grpo.run``)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    done = subprocess.run(
        [*cmd, str(CHILD), str(model), str(out), *extra], capture_output=True, text=True, timeout=600, env=env
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ddp")
    make_tiny_model(tmp / "model")
    return tmp, _torchrun(tmp / "model", tmp / "full")


def test_two_processes_count_rollouts_across_ranks_and_agree(uninterrupted):
    _, ranks = uninterrupted
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


@pytest.mark.parametrize("ckpt", [4, 5])
def test_two_processes_resume_across_the_switch_as_the_uninterrupted_run(uninterrupted, ckpt):
    """Checkpoint 4: the switch decided, waiting for its boundary; checkpoint 5: the first update of
    GA 4 done, 12 micro-steps into the epoch while the Trainer counts 5 x 2 = 10. Each rank must pick
    its own batches up at the run's position (``BatchSamplerShard``: a micro-step takes 2 batches)."""
    tmp, full = uninterrupted
    saved = str(tmp / "full" / "trainer" / f"checkpoint-{ckpt}")
    ranks = _torchrun(tmp / "model", tmp / f"resumed-{ckpt}", saved)
    assert all(r["errors"] == [] for r in ranks)
    for r, f in zip(ranks, full, strict=True):  # per rank, measured at its reward function and optimizer
        assert r["completions"] == f["completions"][ckpt:] == {4: [16, 16], 5: [16]}[ckpt]
        assert r["lr"] == f["lr"][ckpt:]
        assert r["prompts"] == f["prompts"][ckpt:]
        assert r["texts"] == f["texts"][ckpt:]
    assert ranks[0]["decisions"] == full[0]["decisions"][ckpt:]
