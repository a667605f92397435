"""Args mutation as OpenRLHF's SamplesGenerator reads it, batch plans and the start-up check."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rlvr_schedule.policy import BatchConstraints, StaticSchedule
from rlvr_schedule_adapters.openrlhf import (
    RolloutPlan,
    apply_plan_to_args,
    check_setup,
    plan_for_batch,
)


def _generator(args, prompts=64):
    """OpenRLHF's real SamplesGenerator with only the vLLM call replaced (it is the rollout engine)."""
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

    loader = [(["src"], [f"p{i}"], ["label"], [None]) for i in range(prompts)]  # batch of 1 prompt, as built
    gen = SamplesGenerator(
        strategy=SimpleNamespace(args=args),
        prompts_dataloader=loader,
        eval_dataloader=None,
        tokenizer=None,
        vllm_engines=[],
    )
    asked = []

    def fake_vllm(dataloader_iter, num_prompts, dynamic_filtering, **kw):
        asked.append(num_prompts)
        got = []
        for _ in range(num_prompts):
            try:
                _, p, _, _ = next(dataloader_iter)
            except StopIteration:
                return got, len(got) // args.rollout.n_samples_per_prompt, True
            got.extend([p[0]] * args.rollout.n_samples_per_prompt)
        return got, num_prompts, False

    gen._generate_vllm = fake_vllm
    return gen, asked


def test_openrlhf_args_are_the_cli_defaults(openrlhf_args):
    a = openrlhf_args
    assert (a.rollout.batch_size, a.rollout.n_samples_per_prompt, a.train.batch_size) == (2, 4, 8)
    assert a.rollout.vllm_generate_batch_size == 2  # the CLI's default: rollout.batch_size
    assert a.train.dynamic_batch_enable is False and a.train.async_enable is False


def test_plan_keeps_updates_per_step(openrlhf_args, cli_args):
    p = plan_for_batch(openrlhf_args, 32)
    assert p == RolloutPlan(train_batch=32, rollout_prompts=8, n_samples_per_prompt=4, updates_per_rollout=1)
    two = cli_args("--rollout.batch_size", "4")  # 16 rollouts per step, 2 updates of 8
    p2 = plan_for_batch(two, 16)
    assert (p2.rollout_prompts, p2.updates_per_rollout, p2.rollouts_per_step) == (8, 2, 32)


@pytest.mark.parametrize("batch, match", [(6, "n_samples_per_prompt 4"), (0, "positive")])
def test_plan_refuses_batches_that_do_not_divide(openrlhf_args, batch, match):
    with pytest.raises(ValueError, match=match):
        plan_for_batch(openrlhf_args, batch)


def test_plan_refuses_batches_the_ranks_cannot_split(cli_args):
    args = cli_args("--actor.num_gpus_per_node", "2", "--train.micro_batch_size", "4")
    with pytest.raises(ValueError, match="divisor=8"):
        plan_for_batch(args, 12)  # 3 prompts x 4: whole groups, but not 2 ranks x 4


def test_samples_generator_follows_the_new_batch(openrlhf_args):
    gen, asked = _generator(openrlhf_args)
    first, *_ = gen.generate_samples()
    assert len(first) == 8 and asked == [2]
    apply_plan_to_args(openrlhf_args, plan_for_batch(openrlhf_args, 24))
    second, *_ = gen.generate_samples()
    assert len(second) == 24 and asked == [2, 6]


def test_changing_only_batch_size_gives_a_short_batch(openrlhf_args):
    """Why both fields change together: OpenRLHF generates vllm_generate_batch_size prompts."""
    gen, _ = _generator(openrlhf_args)
    gen.generate_samples()
    openrlhf_args.rollout.batch_size = 6  # vllm_generate_batch_size left at 2
    short, *_ = gen.generate_samples()
    assert len(short) == 8  # not the 6 x 4 = 24 asked for


def test_check_setup_accepts_a_fitting_schedule(openrlhf_args):
    sched = StaticSchedule(
        [{"batch": 8, "lr": 1e-3, "until_samples": 64}, {"batch": 32, "lr": 2e-3}],
        BatchConstraints(group_size=4),
    )
    assert check_setup(openrlhf_args, sched) == []


def test_check_setup_names_what_cannot_hold(cli_args):
    args = cli_args("--train.async_enable", "--actor.lr_scheduler", "cosine_with_min_lr")
    sched = StaticSchedule(
        [{"batch": 12, "lr": 1e-3, "until_samples": 64}, {"batch": 10, "lr": 2e-3}],
        BatchConstraints(group_size=2),
    )
    reasons = "\n".join(check_setup(args, sched))
    assert "async" in reasons
    assert "cosine_with_min_lr" in reasons
    assert "group_size 2 != rollout.n_samples_per_prompt 4" in reasons
    assert "stage 1: batch 10" in reasons
    assert "stage 0 batch 12 differs from --train.batch_size 8" in reasons


def test_check_setup_warns_that_auto_initial_batch_has_no_noise_estimate(openrlhf_args):
    from rlvr_schedule.policy import schedule_from_dict

    auto = schedule_from_dict(
        {"type": "two_clock", "initial_batch": "auto", "fallback_batch": 8, "constraints": {"group_size": 4}}
    )
    # GA 4 (8 per update, micro-batches of 2, one rank): the workers measure it
    assert not any("micro-batch gradient norm" in r for r in check_setup(openrlhf_args, auto))
    openrlhf_args.train.micro_batch_size = 8  # GA 1: nothing to measure
    assert any("micro-batch gradient norm" in r for r in check_setup(openrlhf_args, auto))
    fixed = schedule_from_dict({"type": "two_clock", "initial_batch": 8, "constraints": {"group_size": 4}})
    assert not any("micro-batch gradient norm" in r for r in check_setup(openrlhf_args, fixed))
