"""Resumes where exactly one of the Trainer's micro-step count and the run's true position is 0.

A resumed Trainer (transformers 5.x) loads the checkpoint's RNG states before making the epoch's
iterator when its own count of micro-steps in the epoch is 0, and after the first fetch otherwise.
The uninterrupted run stood mid-epoch (iterator made) or at an epoch start (iterator not yet made).
Making an iterator draws the workers' base seed, from the global torch RNG unless the loader has a
generator. Where the Trainer's count is 0 but the run's position is not, the callback gives the
loader one for that epoch (``data_order.detach_loader_seed``), so the sampling is the run's.

The run: 8 prompts (8 micro-steps per epoch), GA 2 for two updates, then GA 4. Epoch 0 ends after
update 3 (2 + 2 + 4 micro-steps); the Trainer, counting ``global_step % 4 x 2``, thinks otherwise.
Measured at the reward function and the optimizer (``trl_harness.Measured``).
"""

from __future__ import annotations

import json

import pytest
from trl_harness import run_grpo

from rlvr_schedule_adapters.trl import RlvrScheduleCallback

pytestmark = pytest.mark.slow

SCHEDULE = {"stages": [{"batch": 8, "lr": 1e-3, "until_samples": 16}, {"batch": 16, "lr": 2.5e-4}]}
KW = {
    "n_prompts": 8,
    "max_steps": 12,  # the Trainer plans 3 epochs from GA 2; with GA 4 the run ends earlier
    "save_strategy": "steps",
    "save_steps": 1,
    "restore_callback_states_from_checkpoint": True,
}


def _cb():
    return RlvrScheduleCallback(SCHEDULE, strict=True, name="epoch-edges")


@pytest.fixture(scope="module")
def uninterrupted(tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("epoch-edges")
    _, m = run_grpo(tiny_model, out, [_cb()], **KW)
    return out, m


def _positions(out, step):
    """(the Trainer's count of micro-steps in the epoch, the saved true position) at a checkpoint."""
    state = json.loads((out / f"checkpoint-{step}" / "trainer_state.json").read_text())
    saved = state["stateful_callbacks"]["RlvrScheduleCallback"]["attributes"]["rlvr_state"]["epoch_pos"]
    return (step % 4) * 2, saved


def _resume_and_compare(tiny_model, uninterrupted, tmp_path, ckpt):
    out, full = uninterrupted
    _, m = run_grpo(tiny_model, tmp_path, [_cb()], resume=str(out / f"checkpoint-{ckpt}"), **KW)
    assert m.completions == full.completions[ckpt:]
    assert m.lr == full.lr[ckpt:]
    assert m.prompts == full.prompts[ckpt:]
    assert m.texts == full.texts[ckpt:]  # the sampling after the resume, bit for bit


def test_the_run_crosses_the_epoch_out_of_step_with_the_trainer(uninterrupted):
    out, full = uninterrupted
    assert full.completions == [8, 8, 16, 16, 16, 16, 16]
    assert _positions(out, 4) == (0, 4)  # the Trainer at an epoch start, the run half-way
    assert _positions(out, 3) == (6, 0)  # the run at an epoch start, the Trainer near the end


def test_resume_where_the_trainer_but_not_the_run_is_at_an_epoch_start(tiny_model, uninterrupted, tmp_path):
    _resume_and_compare(tiny_model, uninterrupted, tmp_path, 4)


@pytest.mark.xfail(
    strict=True,
    reason="the Trainer's count (6) is ahead of the run's position (0): the Trainer ends its epoch, and "
    "so an update, after steps_in_epoch - 6 = 2 micro-steps (a local of _run_epoch no callback can "
    "move), cutting the first update to 8 rollouts; see docs/adapters_trl.md, Which prompts come next",
)
def test_resume_where_the_run_but_not_the_trainer_is_at_an_epoch_start(tiny_model, uninterrupted, tmp_path):
    _resume_and_compare(tiny_model, uninterrupted, tmp_path, 3)
