"""Resume across a switch of the two-clock policy on a real GRPOTrainer.

The policy is ``TwoClockScheduler(PolicyConfig(...))`` with the LR, its reference batch and the batch
constraints set, a critical batch (its auto start: 0.46 x 35 -> 16 rollouts per update) and a failure
clock (1280 rollouts at batch 16): the failure-clock switch, x2 at the held LR, comes once 640 rollouts
are spent (after the hysteresis), whatever the model learns. B* tracking and the alarm detectors are
off: no switch waits for a learned model's estimate to cross a threshold (floating-point kernels
differ between CPUs, so a seeded run drifts apart from one machine to the next). The switch is decided
from state a resume must restore (the failure clock spent, the hysteresis, the noise estimate's EMAs),
and the training metrics match only when the resumed run takes the same prompts and the same sampling
RNG as the uninterrupted one (:mod:`rlvr_schedule_adapters.trl.data_order`). The default policy's
auto switch from the noise estimate is tested on a noise the test sets
(``tests/trl/test_trl_example_schedules.py``).

Measured, not taken from the callback: completions and prompts per update at the reward function,
the LR in the optimizer's param groups when ``step()`` runs (``trl_harness.Measured``). The
``GRPOConfig`` starts at ``gradient_accumulation_steps`` 2 (8 rollouts) while the policy runs 16 and
more: the Trainer's own count of micro-steps is wrong at every checkpoint, before and after a switch.
The assertions take the switch from the uninterrupted run.
"""

from __future__ import annotations

import pytest
from trl_harness import GROUP, PER_DEVICE, S, run_grpo

from rlvr_schedule_adapters.trl import RlvrScheduleCallback, find_callback

pytestmark = pytest.mark.slow

STEPS = 64  # the first failure-clock switch comes at update 42 (640 rollouts + hysteresis)
SAVE = 8
FAILURE_SAMPLES = 1280  # the stated failure clock at batch 16
PROMPTS = 1600  # micro-steps per epoch (2 prompts each, each generation used S=2 times): no early-end warning


def _policy():
    from rlvr_schedule.policy import BatchConstraints, PolicyConfig, TwoClockScheduler

    # the run's LR at its batch and the runnable batches (multiples of per-device 4 x
    # steps_per_generation 2, whole groups of 4, at most 64); a stated B* and failure clock
    return TwoClockScheduler(
        PolicyConfig(
            base_lr=1e-3,
            base_batch=16,
            critical_batch=35.0,
            sample_tolerance=0.3,  # the fixed 0.46 B* this recording's switch points were set by
            growth=2.0,
            failure_samples=float(FAILURE_SAMPLES),
            track_critical_batch=False,
            detectors=(),
            constraints=BatchConstraints(group_size=GROUP, divisor=PER_DEVICE * S, max_batch=64),
        )
    )


def _run(tiny_model, out, resume=None):
    cb = RlvrScheduleCallback(_policy(), strict=True, name="default-policy")
    trainer, m = run_grpo(
        tiny_model,
        out,
        [cb],
        n_prompts=PROMPTS,
        resume=resume,
        max_steps=STEPS,
        save_strategy="steps",
        save_steps=SAVE,
        restore_callback_states_from_checkpoint=True,
        max_completion_length=6,
    )
    cb = find_callback(trainer)
    assert cb.errors == []
    grad_norms = {h["step"]: h["grad_norm"] for h in trainer.state.log_history if "grad_norm" in h}
    rewards = {h["step"]: h["reward"] for h in trainer.state.log_history if "reward" in h}
    return cb, m, grad_norms, rewards


@pytest.fixture(scope="module")
def uninterrupted(tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("default-policy")
    return out, *_run(tiny_model, out)


def _decisions(cb):
    return {d.step: (d.samples, d.batch, d.lr, d.stage, d.switched, d.reason) for d in cb.decisions}


def _switches(cb):
    return [d for d in cb.decisions if d.switched]


def test_the_policy_switches_on_its_failure_clock_in_the_uninterrupted_run(uninterrupted):
    _, cb, m, _, _ = uninterrupted
    switches = _switches(cb)
    print("switches:", [(d.step, d.samples, d.batch, d.lr, d.reason) for d in switches])
    assert cb.decisions[0].batch == 16  # the auto start from the stated critical batch
    assert switches, "no switch: the resume tests below would cross none"
    assert all(d.trigger == "failure_clock" for d in switches)  # each stage spends half of what is left
    first = switches[0]
    assert first.batch == 32
    assert FAILURE_SAMPLES / 2 <= first.samples <= FAILURE_SAMPLES / 2 + 4 * 16
    # measured at the reward function and the optimizer: 16 rollouts at 1e-3 until the switch is in
    # effect, then the new batch at the held LR. The new accumulation count waits for an
    # update boundary where the micro-steps done divide by it (at most a few updates)
    j = next(i for i, c in enumerate(m.completions) if c != 16)
    assert first.step <= j <= first.step + 3
    assert m.completions[:j] == [16] * j
    assert m.completions[j] == first.batch
    assert m.lr[:j] == pytest.approx([1e-3] * j)
    assert m.lr[j] == pytest.approx(1e-3) == pytest.approx(first.lr)


def _resume_and_compare(tiny_model, uninterrupted, tmp_path, ckpt):
    out, cb_full, m_full, gn_full, rw_full = uninterrupted
    cb, m, gn, rw = _run(tiny_model, tmp_path, resume=str(out / f"checkpoint-{ckpt}"))
    later = range(ckpt + 1, STEPS + 1)
    # the same prompts and completions, rollouts and LR per update, measured
    assert m.completions == m_full.completions[ckpt:]
    assert m.lr == m_full.lr[ckpt:]  # bit-exact
    assert m.prompts == m_full.prompts[ckpt:]
    assert m.texts == m_full.texts[ckpt:]
    # the training metrics the noise estimate reads, bit-exact
    assert [gn[s] for s in later] == [gn_full[s] for s in later]
    assert [rw[s] for s in later] == [rw_full[s] for s in later]
    # and so the same decisions (switches, reasons, samples) at every update
    full = _decisions(cb_full)
    assert _decisions(cb) == {s: full[s] for s in later}
    assert cb.samples == cb_full.samples
    return cb, m


def test_resume_before_the_switch_makes_the_same_switch(tiny_model, uninterrupted, tmp_path):
    switch = _switches(uninterrupted[1])[0].step
    ckpt = SAVE * max(switch // 2 // SAVE, 1)  # interrupted half-way to the switch
    cb, _ = _resume_and_compare(tiny_model, uninterrupted, tmp_path, ckpt)
    assert [d.step for d in _switches(cb)][0] == switch


def test_resume_after_the_switch_runs_the_switched_stage_from_its_first_update(
    tiny_model, uninterrupted, tmp_path
):
    _, cb_full, m_full, _, _ = uninterrupted
    first = _switches(cb_full)[0]
    in_effect = next(i for i, c in enumerate(m_full.completions) if c != 16) + 1  # its first update
    ckpt = SAVE * -(-in_effect // SAVE)  # the first checkpoint with the switched stage in effect
    assert ckpt < STEPS
    _, m = _resume_and_compare(tiny_model, uninterrupted, tmp_path, ckpt)
    # the resumed run's first update runs the switched stage (measured: rollouts and LR)
    assert m.completions[0] == first.batch
    assert m.lr[0] == pytest.approx(first.lr)
