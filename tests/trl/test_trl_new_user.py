"""The TRL example as a new user runs it with the README's schedules: the first update runs where the
Trainer was set up (``host`` values), a schedule that moves the run says so in one line (advisory:
what it would do), and a first LR far from the Trainer's is a set-up warning naming both."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "trl_grpo_cpu.py"
pytestmark = pytest.mark.slow


def _run(tmp_path: Path, *args: str) -> tuple[list[list[str]], str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), "--out", str(tmp_path), "--steps", "2", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [line.split() for line in out.stdout.splitlines() if line[:4].strip().isdigit()]
    return rows, out.stderr


def test_the_trl_schedule_starts_at_the_trainers_batch_and_lr(tmp_path):
    rows, err = _run(tmp_path, "--schedule", "examples/schedules/trl_two_clock.yaml")
    assert [(int(r[2]), float(r[3])) for r in rows] == [(8, 1e-3), (8, 1e-3)]
    assert "rlvr-schedule: from update 1" not in err  # nothing moved: nothing to say
    assert "FutureWarning" not in err  # the example's own warning filters


def test_a_schedule_that_moves_the_run_says_so_and_warns_on_a_far_lr(tmp_path):
    rows, err = _run(tmp_path, "--schedule", "examples/schedules/two_clock.yaml")
    lines = [ln for ln in err.splitlines() if ln.startswith("rlvr-schedule: from update 1")]
    assert len(lines) == 1 and "batch 8 -> 160" in lines[0] and "LR 0.001 -> 1e-06" in lines[0]
    assert "advisory" not in lines[0] and lines[0].split(": ", 2)[2].strip()  # a reason
    warned = [ln for ln in err.splitlines() if "ScheduleSetupWarning" in ln and "first LR" in ln]
    assert len(warned) == 1 and "1e-06" in warned[0] and "0.001" in warned[0]
    assert int(rows[0][2]) == 160


def test_advisory_says_what_it_would_do_and_trains_as_set_up(tmp_path):
    rows, err = _run(tmp_path, "--schedule", "examples/schedules/two_clock.yaml", "--advisory")
    lines = [ln for ln in err.splitlines() if ln.startswith("rlvr-schedule: from update 1")]
    assert len(lines) == 1 and "(advisory, not applied)" in lines[0] and "-> 160" in lines[0]
    assert [int(r[2]) for r in rows] == [8, 8]
