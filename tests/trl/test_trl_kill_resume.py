"""Kill/resume of a scheduled GRPOTrainer run: the same completions per update as an uninterrupted run.

Completions are counted at the reward function (``trl_harness.Measured``), not taken from the callback.
The schedule (``killable_grpo.THREE_STAGES``) has a switch that waits one update for an aligned
boundary, so some checkpoints hold a stage in effect *and* a pending one: the hard case for a resume
(the Trainer's own micro-step count assumes a constant accumulation).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from killable_grpo import STEPS, THREE_STAGES, last_per_step, scheduled_run
from trl_harness import run_grpo

from rlvr_schedule_adapters.trl import RlvrScheduleCallback, find_callback

pytestmark = pytest.mark.slow

CHILD = Path(__file__).resolve().parent / "killable_grpo.py"
UNINTERRUPTED = [8, 8, 8, 8, 16, 16, 32, 32, 32]
DECISION_KEYS = ("samples", "batch", "lr", "stage", "switched")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run (in this process), a checkpoint after every update."""
    out = tmp_path_factory.mktemp("uninterrupted")
    scheduled_run(out)
    return out


def _decisions(out: Path) -> dict[int, tuple]:
    rows = last_per_step(out / "schedule.jsonl", "decision")
    return {s: tuple(r[k] for k in DECISION_KEYS) for s, r in rows.items()}


def test_uninterrupted_reference(reference):
    measured = last_per_step(reference / "measured.jsonl")
    assert [measured[s]["completions"] for s in sorted(measured)] == UNINTERRUPTED
    decisions = _decisions(reference)
    assert [d[0] for d in decisions.values()] == [sum(UNINTERRUPTED[:i]) for i in range(1, STEPS + 1)]
    # after update 5 the 32-batch stage is decided but waits: 12 micro-steps do not divide by 8
    assert decisions[5][1:] == (32, 5e-4, 2, True)


@pytest.mark.parametrize("ckpt", [5, 6])
def test_resume_runs_the_restored_stage_from_the_first_update(tiny_model, reference, tmp_path, ckpt):
    # checkpoint-5 holds stage 16 in effect and 32 pending (the Trainer counts 10 micro-steps into the
    # epoch, the run had done 12); checkpoint-6 a freshly applied 32 (count 12 where the run did 16).
    # Before the fix both resumed at the initial 8 rollouts per update until an aligned boundary.
    cb = RlvrScheduleCallback(THREE_STAGES, strict=True, name="resume-test")
    trainer, m = run_grpo(
        tiny_model,
        tmp_path,
        [cb],
        resume=str(reference / "run" / f"checkpoint-{ckpt}"),
        restore_callback_states_from_checkpoint=True,
        max_steps=STEPS,
    )
    restored = find_callback(trainer)
    assert m.completions == UNINTERRUPTED[ckpt:]
    assert restored.samples == sum(UNINTERRUPTED) == 160
    ref = _decisions(reference)
    got = {d.step: (d.samples, d.batch, d.lr, d.stage, d.switched) for d in restored.decisions}
    assert got == {s: ref[s] for s in range(ckpt + 1, STEPS + 1)}
    assert m.lr == pytest.approx(([1e-3] * 4 + [7e-4] * 2 + [5e-4] * 3)[ckpt:])  # batch and LR together
    # the steering value is gone after the run: args hold the stage's accumulation count
    assert trainer.args.gradient_accumulation_steps == 32 // 4
    assert restored.errors == []


def _child(out: Path, resume: bool) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [sys.executable, str(CHILD), str(out)] + (["--resume"] if resume else [])
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _cut_checkpoint(out: Path) -> bool:
    """A checkpoint directory is being written (it has no trainer_state.json yet)."""
    run = out / "run"
    return run.is_dir() and any(
        d.name.startswith("checkpoint-") and not (d / "trainer_state.json").exists() for d in run.iterdir()
    )


def test_sigkill_at_random_points_and_resume_matches_uninterrupted(reference, tmp_path):
    rng = random.Random(3)
    out = tmp_path / "killed"
    measured_log = out / "measured.jsonl"
    kills, texts = [], []
    for attempt, at in enumerate([2, 4, 6, None]):  # kill after `at` updates (+ a random delay); finish
        offset = measured_log.stat().st_size if measured_log.exists() else 0
        p = _child(out, resume=attempt > 0)
        # wait for *this* child's own update `at` (not a row an earlier child left), so every kill lands
        # in a resumed run, after its "resume from" line, however slow or fast the machine is
        while (
            attempt < 3
            and p.poll() is None
            and max(last_per_step(measured_log, offset=offset), default=0) < at
        ):
            time.sleep(0.01)
        if attempt == 1:  # the second kill aims at a checkpoint write (if it catches one)
            t_end = time.monotonic() + 2.0
            while p.poll() is None and not _cut_checkpoint(out) and time.monotonic() < t_end:
                time.sleep(0.001)
        elif attempt < 3:
            time.sleep(rng.uniform(0.0, 0.05))  # anywhere: in an update or in a checkpoint write
        if attempt < 3 and p.poll() is None:
            p.kill()
            kills.append((at, _cut_checkpoint(out)))
        texts.append(p.communicate(timeout=600)[0])
        if p.returncode == 0:  # finished (a resume from the last checkpoint would run one update more)
            break
    assert p.returncode == 0, texts[-1][-3000:]
    said = [line for t in texts for line in t.splitlines() if line.startswith(("skipped", "resume from"))]
    print("kills (after n updates, checkpoint cut):", kills, said)
    resumed_from = [int(line.rsplit("-", 1)[1]) for line in said if "from" in line and "checkpoint-" in line]
    assert max(resumed_from) >= 5  # a checkpoint whose stage the Trainer's own count would cut short

    assert len(kills) >= 2, f"too few kills landed before the run finished: {kills}"
    measured = last_per_step(out / "measured.jsonl")
    assert sorted(measured) == list(range(1, STEPS + 1))
    assert [measured[s]["completions"] for s in sorted(measured)] == UNINTERRUPTED
    assert _decisions(out) == _decisions(reference)
