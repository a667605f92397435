"""examples/trl_grpo_cpu.py runs on CPU, switches as scheduled and resumes from its checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo_cpu.py"
pytestmark = pytest.mark.slow


def _run(*args: str) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_example_switches_and_resumes(tmp_path):
    text = _run("--out", str(tmp_path), "--steps", "6", "--save-steps", "2")
    rows = [line.split() for line in text.splitlines() if line[:4].strip().isdigit()]
    assert [int(r[2]) for r in rows] == [8, 8, 8, 8, 16, 16]  # rollouts per update
    assert "switch -> 16" in text and "callback errors 0" in text

    # a kill while checkpoint-6 was written leaves it without trainer_state.json (written last):
    # --resume skips it, says so, and continues from checkpoint-4
    (tmp_path / "run" / "checkpoint-6" / "trainer_state.json").unlink()
    text = _run("--out", str(tmp_path), "--steps", "8", "--save-steps", "2", "--resume")
    assert "skipping incomplete" in text and "checkpoint-6 (no trainer_state.json)" in text
    assert f"resume: from {tmp_path / 'run' / 'checkpoint-4'}" in text
    rows = [line.split() for line in text.splitlines() if line[:4].strip().isdigit()]
    assert [(int(r[0]), int(r[1]), int(r[2])) for r in rows] == [
        (5, 48, 16),
        (6, 64, 16),
        (7, 80, 16),
        (8, 96, 16),
    ]

    # the resumed run (a new process, a callback rebuilt from the checkpoint) still writes to the
    # JSONL sink registered on the host passed to the callback it replaced
    lines = [json.loads(x) for x in (tmp_path / "schedule.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines if r.get("kind") == "record"] == [1, 2, 3, 4, 5, 6, 5, 6, 7, 8]
