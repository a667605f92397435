"""What a rollout batch means in OpenRLHF's args (the host's ``apply`` on the trainer side), and the
set-up check made before the run.

OpenRLHF 0.11.2's ``SamplesGenerator`` re-reads ``args.rollout.batch_size`` and
``vllm_generate_batch_size`` every step, and the replay buffer ``args.train.batch_size``: a stage
switch is an args write between steps (``docs/adapters_openrlhf.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RolloutPlan", "apply_plan_to_args", "check_setup", "plan_for_batch", "updates_per_rollout"]


@dataclass(frozen=True)
class RolloutPlan:
    """What one rollout batch means in OpenRLHF's args.

    ``train_batch`` samples per optimizer update (``args.train.batch_size``), ``rollout_prompts``
    prompts per step (``args.rollout.batch_size`` = ``vllm_generate_batch_size``); a step yields
    ``rollout_prompts x n_samples_per_prompt`` rollouts = ``updates_per_rollout x train_batch``.
    """

    train_batch: int
    rollout_prompts: int
    n_samples_per_prompt: int
    updates_per_rollout: int

    @property
    def rollouts_per_step(self) -> int:
        return self.rollout_prompts * self.n_samples_per_prompt


def _dp_world(args: Any) -> tuple[int, int]:
    """(data-parallel ranks, micro-batch size): a train batch must be a multiple of their product."""
    world = int(args.actor.num_nodes) * int(args.actor.num_gpus_per_node)
    dup = int(getattr(args.ds, "ring_attn_size", 1) or 1) * int(
        getattr(args.ds, "tensor_parallel_size", 1) or 1
    )
    return max(world // dup, 1), int(args.train.micro_batch_size)


def updates_per_rollout(args: Any) -> int:
    """Optimizer updates per rollout step as the args stand (rollouts per step / train batch)."""
    per_step = int(args.rollout.batch_size) * int(args.rollout.n_samples_per_prompt)
    tb = int(args.train.batch_size)
    return max(per_step // tb, 1) if tb > 0 else 1


def plan_for_batch(args: Any, batch: int, *, updates: int | None = None) -> RolloutPlan:
    """The args values that give ``batch`` rollouts per update; ValueError naming what does not divide.

    ``updates`` (updates per rollout step) defaults to the run's present ratio, which stays fixed.
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive integer, got {batch!r}")
    n = int(args.rollout.n_samples_per_prompt)
    k = updates if updates is not None else updates_per_rollout(args)
    rollouts = batch * k
    if rollouts % n:
        raise ValueError(
            f"batch {batch} x {k} update(s) per rollout step is not a whole number of prompts "
            f"(n_samples_per_prompt {n}); use BatchConstraints(group_size={n})"
        )
    if not getattr(args.train, "dynamic_batch_enable", False):
        dp, micro = _dp_world(args)
        if batch % (dp * micro):
            raise ValueError(
                f"batch {batch} does not split over {dp} data-parallel rank(s) x micro_batch_size "
                f"{micro}; use BatchConstraints(divisor={dp * micro})"
            )
    return RolloutPlan(
        train_batch=batch, rollout_prompts=rollouts // n, n_samples_per_prompt=n, updates_per_rollout=k
    )


def host_grid(args: Any, *, updates: int | None = None) -> Any:
    """OpenRLHF's grid of runnable batches (rollouts per update) as
    :class:`~rlvr_schedule.policy.BatchConstraints`: micro-batch x data-parallel size (unless
    ``dynamic_batch_enable``), and ``updates`` (per rollout step, default the run's ratio) x batch in
    whole prompts. What :func:`plan_for_batch` accepts, published to the schedule at set-up."""
    import math

    from rlvr_schedule.policy.constraints import BatchConstraints

    n = int(args.rollout.n_samples_per_prompt)
    k = updates if updates is not None else updates_per_rollout(args)
    divisor = n // math.gcd(n, k)
    if not getattr(args.train, "dynamic_batch_enable", False):
        dp, micro = _dp_world(args)
        divisor = math.lcm(divisor, dp * micro)
    return BatchConstraints(divisor=divisor)


def apply_plan_to_args(args: Any, plan: RolloutPlan) -> None:
    """Write ``plan`` into an OpenRLHF args namespace where ``SamplesGenerator`` reads it each step.

    ``rollout.batch_size`` and ``rollout.vllm_generate_batch_size`` change together (the generator
    generates ``vllm_generate_batch_size`` prompts and slices ``batch_size x n`` rollouts: a stale
    one gives a short or buffered batch); ``train.batch_size`` is what the replay buffer and the
    KL controller read.
    """
    args.rollout.batch_size = plan.rollout_prompts
    args.rollout.vllm_generate_batch_size = plan.rollout_prompts
    args.train.batch_size = plan.train_batch


def check_setup(args: Any, schedule: Any) -> list[str]:
    """Reasons this OpenRLHF set-up cannot hold ``schedule`` as written (empty: it can).

    Checked before the run starts; each reason is logged as a warning and the run goes ahead.
    """
    out: list[str] = []
    train, rollout = args.train, args.rollout
    if getattr(train, "async_enable", False):
        out.append(
            "--train.async_enable: the async trainer (PPOTrainerAsync) is not patched; the schedule "
            "is not applied"
        )
    if getattr(train, "dynamic_batch_enable", False):
        out.append(
            "--train.dynamic_batch_enable: optimizer steps follow a token budget; samples per update "
            "are set through train.batch_size only approximately"
        )
    if getattr(args.critic, "model_name_or_path", None):
        out.append("a critic (GAE) is trained: its samples per update and LR are not changed by the schedule")
    vgen = getattr(rollout, "vllm_generate_batch_size", None)
    if vgen and int(vgen) != int(rollout.batch_size):
        out.append(
            f"rollout.vllm_generate_batch_size {vgen} != rollout.batch_size {rollout.batch_size}: "
            "the adapter sets both to the scheduled prompts per step"
        )
    if getattr(args.algo, "dynamic_filtering_enable", False):
        out.append(
            "--algo.dynamic_filtering_enable: filtered prompts make steps shorter than the scheduled batch"
        )
    k = updates_per_rollout(args)
    per_step = int(rollout.batch_size) * int(rollout.n_samples_per_prompt)
    if per_step % int(train.batch_size):
        out.append(
            f"rollout.batch_size x n_samples_per_prompt = {per_step} is not a multiple of "
            f"train.batch_size {train.batch_size}"
        )
    sched_name = getattr(args.actor, "lr_scheduler", "constant")
    if sched_name not in ("constant", "constant_with_warmup"):
        out.append(
            f"--actor.lr_scheduler {sched_name}: its multiplier keeps running on the planned "
            "max_steps (computed from the initial batch); the schedule sets the base LR under it"
        )
    stages = list(getattr(schedule, "stages", ()) or ())
    cons = getattr(schedule, "constraints", None) or getattr(
        getattr(schedule, "config", None), "constraints", None
    )
    gs = getattr(cons, "group_size", None)
    if gs is not None and gs not in (1, int(rollout.n_samples_per_prompt)):
        out.append(
            f"schedule constraints group_size {gs} != rollout.n_samples_per_prompt "
            f"{rollout.n_samples_per_prompt}"
        )
    for i, st in enumerate(stages):
        try:
            plan_for_batch(args, int(st.batch), updates=k)
        except ValueError as exc:
            out.append(f"stage {i}: {exc}")
    cfg = getattr(schedule, "config", None)
    dp, micro = _dp_world(args)
    no_micro = getattr(train, "dynamic_batch_enable", False) or int(train.batch_size) <= dp * micro
    if (
        cfg is not None
        and getattr(cfg, "initial_batch", None) == "auto"
        and getattr(cfg, "critical_batch", None) is None
        and no_micro
    ):
        out.append(
            "initial_batch auto needs the gradient-noise estimate, which needs a micro-batch gradient "
            f"norm, measured only with several micro-batches per update (train.batch_size "
            f"{train.batch_size} over {dp} rank(s) x micro-batch {micro}, no dynamic batching): the "
            "run stays at the fallback batch; give critical_batch or an integer initial_batch"
        )
    if stages and int(stages[0].batch) != int(train.batch_size):
        out.append(
            f"stage 0 batch {stages[0].batch} differs from --train.batch_size {train.batch_size}: "
            "it is applied at the start, but max_steps and the LR schedule length were planned from "
            "the command line"
        )
    return out
