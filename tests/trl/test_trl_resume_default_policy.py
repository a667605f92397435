"""Resume across a switch of the DEFAULT two-clock policy on a real GRPOTrainer (issue 12).

The policy is ``TwoClockScheduler(PolicyConfig(...))`` with only the LR, its reference batch (also the
fallback batch of ``initial_batch: auto``) and the batch constraints set: with no known B* it runs
16 rollouts per update until the gradient-noise estimate (the callback's micro-batch gradient norm)
is ready, then switches to 0.46 x that estimate (sample_tolerance 0.3). The switch is decided from state
a resume must restore (the estimate's EMAs, the forecast window), and from the training metrics, which a resume
reproduces only when the resumed run takes the same prompts and the same sampling RNG as the
uninterrupted one (:mod:`rlvr_schedule_adapters.trl.data_order`).

Measured, not taken from the callback: completions and prompts per update at the reward function,
the LR in the optimizer's param groups when ``step()`` runs (``trl_harness.Measured``). The
``GRPOConfig`` starts at ``gradient_accumulation_steps`` 2 (8 rollouts) while the policy runs 16 and
more: the Trainer's own count of micro-steps is wrong at every checkpoint, before and after a switch.
In the run here (seed 0, 2026-12-05) the policy switches 16 -> 64 at update 100 (auto: 0.462 x the
estimate 276 = 127, capped at max_batch 64) and makes no other switch in the 112 updates (before the default moved from 0.175 to 0.3
it went 16 -> 48 at update 100 and 48 -> 64 at update 110 by B* tracking);
the assertions take the switches from the uninterrupted run, not from these numbers. No pacing knob
is set (their names may change with issue 12's rollout units).
"""

from __future__ import annotations

import pytest
from trl_harness import GROUP, PER_DEVICE, S, run_grpo

from rlvr_schedule_adapters.trl_callback import RlvrScheduleCallback, find_callback

pytestmark = pytest.mark.slow

STEPS = 112  # the default auto switch comes once the noise estimate has 100 records
SAVE = 8
PROMPTS = 1600  # micro-steps per epoch (2 prompts each, each generation used S=2 times): no early-end warning


def _policy():
    from rlvr_schedule.policy import BatchConstraints, PolicyConfig, TwoClockScheduler

    # only what the run fixes: its LR at its batch and the runnable batches (multiples of
    # per-device 4 x steps_per_generation 2, whole groups of 4, at most 64); every knob at its default
    return TwoClockScheduler(
        PolicyConfig(
            base_lr=1e-3,
            base_batch=16,
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


def test_the_default_policy_switches_in_the_uninterrupted_run(uninterrupted):
    _, cb, m, _, _ = uninterrupted
    switches = _switches(cb)
    print("switches:", [(d.step, d.samples, d.batch, d.lr, d.reason) for d in switches])
    assert switches, "the default policy made no switch: the resume tests below would cross none"
    first = switches[0]
    assert first.reason.startswith("auto:") and first.batch != 16
    # measured at the reward function and the optimizer: 16 rollouts at 1e-3 until the switch is in
    # effect, then the new batch at its square-root-rule LR. The new accumulation count waits for an
    # update boundary where the micro-steps done divide by it (at most a few updates)
    j = next(i for i, c in enumerate(m.completions) if c != 16)
    assert first.step <= j <= first.step + 3
    assert m.completions[:j] == [16] * j
    assert m.completions[j] == first.batch
    assert m.lr[:j] == pytest.approx([1e-3] * j)
    assert m.lr[j] == pytest.approx(1e-3 * (first.batch / 16) ** 0.5) == pytest.approx(first.lr)


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
