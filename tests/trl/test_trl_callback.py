"""RlvrScheduleCallback on a real TRL GRPOTrainer (tiny local model, CPU).

What changes at a switch is MEASURED: completions reaching the reward function between optimizer
steps and the LR in the optimizer's param groups when ``step()`` runs (see conftest.Measured).
"""

from __future__ import annotations

import json
import logging
import math
import warnings

import pytest
from trl_harness import GROUP, PER_DEVICE, TWO_STAGES, S, run_grpo

from rlvr_schedule_adapters.trl import RlvrScheduleCallback, ScheduleSetupWarning, find_callback

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def checkpointed(tiny_model, tmp_path_factory):
    """One scheduled run, checkpointed every 3 updates; shared by the switch and resume tests."""
    out = tmp_path_factory.mktemp("checkpointed")
    cb = RlvrScheduleCallback(TWO_STAGES, strict=True)
    trainer, m = run_grpo(tiny_model, out, [cb], save_strategy="steps", save_steps=3)
    return cb, trainer, m, out


def test_switch_changes_completions_per_update_and_applied_lr(checkpointed):
    cb, trainer, m, _ = checkpointed

    # 4 updates of 8 rollouts reach until_samples=32; from the 5th update on: 16 rollouts at lr/4
    assert m.completions == [8, 8, 8, 8, 16, 16, 16, 16]
    assert m.lr == pytest.approx([1e-3] * 4 + [2.5e-4] * 4)
    assert m.ga == [S] * 4 + [2 * S] * 4
    # the callback's own sample count agrees with what reached the reward function
    assert cb.samples == sum(m.completions) == 96
    assert [d.samples for d in cb.decisions] == [8, 16, 24, 32, 48, 64, 80, 96]
    assert [d.switched for d in cb.decisions].count(True) == 1
    # and what TRL logs as the LR is the LR that ran (the scheduler's last-lr was updated too)
    logged = [h["learning_rate"] for h in trainer.state.log_history if "learning_rate" in h]
    assert logged == pytest.approx(m.lr)
    assert cb.errors == []


def test_switch_waits_for_an_aligned_boundary(tiny_model, tmp_path):
    # the switch is decided after 3 updates (24 rollouts, 6 micro-steps): 6 is not a multiple of the
    # new accumulation 4, so one more update runs at the old stage and no update is cut short
    sched = {"stages": [{"batch": 8, "lr": 1e-3, "until_samples": 24}, {"batch": 16, "lr": 5e-4}]}
    cb = RlvrScheduleCallback(sched, strict=True)
    _, m = run_grpo(tiny_model, tmp_path, [cb], max_steps=6)

    assert cb.decisions[2].switched and cb.decisions[2].batch == 16
    assert m.completions == [8, 8, 8, 8, 16, 16]
    assert m.lr == pytest.approx([1e-3] * 4 + [5e-4] * 2)  # batch and LR switch together
    assert all(c % (PER_DEVICE * S) == 0 for c in m.completions)


@pytest.mark.parametrize(
    "ckpt, expect",
    [
        (3, [8, 16, 16, 16, 16]),  # resumed in stage 0 with 24 samples: the switch still comes at 32
        (6, [16, 16]),  # resumed in stage 1: GA re-applied in on_train_begin
    ],
)
def test_resume_restores_stage_and_keeps_updates_whole(tiny_model, checkpointed, tmp_path, ckpt, expect):
    first, _, m0, out = checkpointed
    state = json.loads((out / f"checkpoint-{ckpt}" / "trainer_state.json").read_text())
    saved = state["stateful_callbacks"]["RlvrScheduleCallback"]
    assert saved["attributes"]["rlvr_state"]["driver"]["samples"] == sum(m0.completions[:ckpt])

    fresh = RlvrScheduleCallback(TWO_STAGES, strict=True)
    trainer, m = run_grpo(
        tiny_model,
        tmp_path,
        [fresh],
        resume=str(out / f"checkpoint-{ckpt}"),
        restore_callback_states_from_checkpoint=True,
    )
    restored = find_callback(trainer)
    assert restored is not fresh and isinstance(restored, RlvrScheduleCallback)
    assert m.completions == expect
    assert m.lr == pytest.approx(m0.lr[ckpt:])
    assert restored.samples == sum(m0.completions) == 96
    assert restored.schedule.index == 1
    assert [d.samples for d in restored.decisions] == [d.samples for d in first.decisions][ckpt:]


class _Raising:
    """A schedule that raises from its third record on."""

    def __init__(self):
        from rlvr_schedule.policy import StaticSchedule

        self.inner = StaticSchedule(TWO_STAGES["stages"])
        self.calls = 0

    stages = property(lambda self: self.inner.stages)
    current = property(lambda self: self.inner.current)

    def step(self, record):
        self.calls += 1
        if self.calls >= 3:
            raise RuntimeError("broken schedule")
        return self.inner.step(record)

    def state_dict(self):
        return self.inner.state_dict()

    def load_state_dict(self, state):
        self.inner.load_state_dict(state)


def test_raising_schedule_does_not_stop_training(tiny_model, tmp_path, caplog):
    sched = _Raising()
    cb = RlvrScheduleCallback(sched)
    with caplog.at_level(logging.ERROR, logger="rlvr_schedule.adapters.trl"):
        trainer, m = run_grpo(tiny_model, tmp_path, [cb], max_steps=4)
    assert trainer.state.global_step == 4
    assert m.completions == [8] * 4 and m.lr == pytest.approx([1e-3] * 4)  # current stage held
    assert sched.calls == 4 and len(cb.errors) == 2
    assert "broken schedule" in caplog.text


def test_an_off_grid_stage_is_snapped_onto_the_trainers_grid(tiny_model, tmp_path, caplog):
    # 12 rollouts is not a multiple of per-device 4 x steps_per_generation 2: the trainer published its
    # grid (multiples of 8) at train begin, so the stage runs at 8 (the nearest, ties down) with its LR
    sched = {"stages": [{"batch": 8, "lr": 1e-3, "until_samples": 16}, {"batch": 12, "lr": 5e-4}]}
    cb = RlvrScheduleCallback(sched)
    with caplog.at_level(logging.ERROR), pytest.warns(ScheduleSetupWarning, match="off the host's grid"):
        trainer, m = run_grpo(tiny_model, tmp_path, [cb], max_steps=4)
    assert trainer.state.global_step == 4
    assert m.completions == [8] * 4 and m.lr == pytest.approx([1e-3, 1e-3, 5e-4, 5e-4])
    assert cb.errors == [] and not caplog.records
    switch = next(d for d in cb.decisions if d.switched)
    assert switch.batch == 8 and "snapped to the host's grid (multiples of 8): 12 -> 8" in switch.reason


def test_warns_when_the_dataset_cannot_hold_the_schedule(tiny_model, tmp_path):
    # 8 prompts x 4 completions = 8 micro-steps per epoch; the Trainer plans 8 // 2 = 4 updates per
    # epoch and 2 epochs from the initial accumulation, but the plan needs 4 x 2 + 4 x 4 = 24 micro-steps
    with pytest.warns(ScheduleSetupWarning, match="too small"):
        trainer, m = run_grpo(tiny_model, tmp_path, [RlvrScheduleCallback(TWO_STAGES)], n_prompts=8)
    # ... and the warning is real: the run silently ends before max_steps
    assert trainer.state.global_step < 8
    assert sum(m.completions) <= 2 * 8 * PER_DEVICE


def test_two_clock_scheduler_initial_stage_is_applied_through_the_driver(tiny_model, tmp_path):
    spec = {
        "type": "two_clock",
        "initial_batch": 16,
        "base_lr": 4e-4,
        "base_batch": 8,
        "lr_rule": "sqrt",
        "max_stages": 4,
        "constraints": {"group_size": GROUP, "divisor": PER_DEVICE * S},
    }
    cb = RlvrScheduleCallback(spec, strict=True)
    assert cb.driver.plugins is cb.host
    # the policy cannot switch within 3 updates of 16 (min_stage_samples 160), no failure forecast has
    # its 2048 rollouts of evidence, and the B* estimate needs 100 records (estimate_samples): the
    # set-up check must not warn that the run may end early (the old growth^max_stages bound did)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, m = run_grpo(tiny_model, tmp_path, [cb], max_steps=3)
    assert not [w for w in caught if "may end early" in str(w.message)]
    assert m.completions == [16, 16, 16]
    assert m.lr == pytest.approx([4e-4 * math.sqrt(2)] * 3)
    assert len(cb.decisions) == 3 and cb.errors == []


def test_decisions_at_logging_steps_count_every_update(tiny_model, tmp_path):
    # logging every 3 updates: records come at steps 3 and 6 (samples 24, 48); the switch decided at
    # step 6 (48 >= 32) applies from update 7, and samples still count every update
    cb = RlvrScheduleCallback(TWO_STAGES, strict=True)
    _, m = run_grpo(tiny_model, tmp_path, [cb], logging_steps=3)
    assert [d.samples for d in cb.decisions] == [24, 48]
    assert m.completions == [8] * 6 + [16] * 2
    assert cb.samples == sum(m.completions) == 80


def test_advisory_mode_decides_and_logs_but_the_trainer_runs_as_configured(tiny_model, tmp_path, capsys):
    cb = RlvrScheduleCallback(TWO_STAGES, apply=False, strict=True)
    trainer, m = run_grpo(tiny_model, tmp_path, [cb], learning_rate=5e-4)
    # the schedule switched (at 32 rollouts) and said so on the console; the trainer kept its GA and LR
    assert [d.switched for d in cb.decisions].count(True) == 1 and cb.schedule.index == 1
    said = [ln for ln in capsys.readouterr().err.splitlines() if "advisory, not applied" in ln]
    # what the first stage would change (the LR: 5e-4 set up, 1e-3 scheduled), then the switch
    assert len(said) == 2 and "LR 0.0005 -> 0.001" in said[0] and "until_samples 32 reached" in said[1]
    assert m.completions == [8] * 8 and m.ga == [S] * 8 and m.lr == pytest.approx([5e-4] * 8)
    assert cb.samples == 64 and cb.errors == []
