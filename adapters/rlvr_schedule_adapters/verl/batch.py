"""Rollouts per step through verl's per-step config reads, and the checks made at start-up.

verl 0.9.1's ``PPOTrainer`` re-reads ``data.train_batch_size`` (prompts per step),
``actor_rollout_ref.rollout.n`` (group size) and ``actor_rollout_ref.actor.ppo_mini_batch_size``
(prompts per optimizer mini-batch) from ``self.config`` on every step, so a stage switch is a
config write between steps. The dataloader batch (``data.gen_batch_size``, else the *initial*
``train_batch_size``) is fixed once built and each step fetches ``train_batch_size /
gen_batch_size`` chunks: ``gen_batch_size`` must divide every prompt count the schedule plans,
so :func:`pin_gen_batch_size` sets it before the dataloader exists. The group size is kept: a
stage changes the number of prompts, never ``n`` (the rollout workers hold their own copy).

Works on any OmegaConf ``DictConfig`` (struct or not); imports omegaconf only when called.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rlvr_schedule_adapters._common import ScheduleSetupWarning, warn_setup

__all__ = [
    "VerlSetupWarning",
    "BatchLayout",
    "read_layout",
    "apply_rollout_batch",
    "planned_rollout_batches",
    "pin_gen_batch_size",
    "check_setup",
    "noise_estimate_gaps",
    "host_grid",
    "MINI_BATCH_MODES",
]

#: "per_step": keep the number of PPO mini-batches per step (ppo_mini_batch_size scales with
#: the batch; with one mini-batch a step is one optimizer update). "fixed": keep
#: ppo_mini_batch_size (a bigger batch means more updates per step).
MINI_BATCH_MODES = ("per_step", "fixed")


#: The adapters' one set-up warning class (the verl name is kept for existing filters).
VerlSetupWarning = ScheduleSetupWarning


@dataclass(frozen=True)
class BatchLayout:
    """The batch fields of a verl config, in prompts unless named ``rollouts``."""

    train_batch_size: int
    group_size: int
    ppo_mini_batch_size: int
    gen_batch_size: int | None
    world_size: int

    @property
    def rollouts(self) -> int:
        """Rollouts per trainer step (prompts x group size): the schedule's batch unit."""
        return self.train_batch_size * self.group_size

    @property
    def mini_batches(self) -> int | None:
        """PPO mini-batches per step (None when ppo_mini_batch_size does not divide the batch)."""
        if self.ppo_mini_batch_size <= 0 or self.train_batch_size % self.ppo_mini_batch_size:
            return None
        return self.train_batch_size // self.ppo_mini_batch_size


def read_layout(config: Any) -> BatchLayout:
    """The batch fields of a verl ``ppo_trainer`` config."""
    data, arr = config.data, config.actor_rollout_ref
    gen = data.get("gen_batch_size", None)
    trainer = config.trainer
    world = int(trainer.get("n_gpus_per_node", 1) or 1) * int(trainer.get("nnodes", 1) or 1)
    return BatchLayout(
        train_batch_size=int(data.train_batch_size),
        group_size=int(arr.rollout.n),
        ppo_mini_batch_size=int(arr.actor.ppo_mini_batch_size),
        gen_batch_size=None if gen in (None, 0) else int(gen),
        world_size=max(world, 1),
    )


def _set(node: Any, key: str, value: Any) -> None:
    """Set a key of a DictConfig node, also when struct mode forbids adding it."""
    try:
        from omegaconf import open_dict
    except ImportError:  # a plain mapping-like object (tests of the pure logic)
        node[key] = value
        return
    with open_dict(node):
        node[key] = value


def apply_rollout_batch(
    config: Any,
    rollouts: int,
    *,
    mini_batch_mode: str = "per_step",
    mini_batches: int | None = None,
    use_critic: bool = False,
) -> BatchLayout:
    """Write a new rollouts-per-step into ``config``; returns the new layout.

    ``mini_batches`` is the number of PPO mini-batches per step to keep (``per_step`` mode;
    None: the config's current count). Raises ValueError, leaving ``config`` untouched, when the
    batch is not whole prompts, or does not split into the mini-batches, or the dataloader's
    ``gen_batch_size`` does not divide it.
    """
    if mini_batch_mode not in MINI_BATCH_MODES:
        raise ValueError(f"mini_batch_mode must be one of {MINI_BATCH_MODES}, got {mini_batch_mode!r}")
    old = read_layout(config)
    n = old.group_size
    if rollouts < 1 or rollouts % n:
        raise ValueError(
            f"rollout batch {rollouts} is not a positive multiple of actor_rollout_ref.rollout.n={n}"
        )
    prompts = rollouts // n
    gen = old.gen_batch_size or old.train_batch_size
    if prompts % gen:
        raise ValueError(
            f"{prompts} prompts per step is not a multiple of the dataloader batch "
            f"data.gen_batch_size={gen} (fixed once the dataloader is built)"
        )
    if mini_batch_mode == "per_step":
        k = mini_batches if mini_batches is not None else (old.mini_batches or 1)
        if prompts % k:
            raise ValueError(
                f"{prompts} prompts per step do not split into {k} PPO mini-batches "
                "(actor_rollout_ref.actor.ppo_mini_batch_size)"
            )
        mini = prompts // k
    else:
        mini = old.ppo_mini_batch_size
        if prompts % mini:
            raise ValueError(
                f"{prompts} prompts per step is not a multiple of "
                f"actor_rollout_ref.actor.ppo_mini_batch_size={mini}"
            )
    _set(config.data, "train_batch_size", prompts)
    _set(config.actor_rollout_ref.actor, "ppo_mini_batch_size", mini)
    if use_critic and config.get("critic") is not None and config.critic.get("ppo_mini_batch_size"):
        _set(config.critic, "ppo_mini_batch_size", mini)
    return read_layout(config)


def host_grid(config: Any, *, mini_batch_mode: str = "per_step", mini_batches: int | None = None) -> Any:
    """verl's grid of runnable rollout batches as :class:`~rlvr_schedule.policy.BatchConstraints`: whole
    groups (``rollout.n``) of whole dataloader fetches (``data.gen_batch_size``, fixed once the
    dataloader is built), whole PPO mini-batches (``per_step``: ``mini_batches`` of them, default the
    config's count; ``fixed``: of ``ppo_mini_batch_size`` prompts), each mini-batch split evenly over
    the data-parallel ranks. What :func:`apply_rollout_batch` accepts, published to the schedule at
    set-up so that it proposes nothing else."""
    from rlvr_schedule.policy.constraints import BatchConstraints

    layout = read_layout(config)
    n, world = layout.group_size, layout.world_size
    gen = layout.gen_batch_size or layout.train_batch_size
    if mini_batch_mode == "per_step":
        k = mini_batches if mini_batches is not None else (layout.mini_batches or 1)
        divisor = math.lcm(n * math.lcm(gen, k), k * world)
    else:
        mini = layout.ppo_mini_batch_size
        divisor = n * math.lcm(gen, mini)
        if (mini * n) % world:  # every batch is padded by verl: the grid cannot fix that
            divisor = math.lcm(divisor, world)
    return BatchConstraints(group_size=n, divisor=divisor)


def planned_rollout_batches(schedule: Any) -> list[int]:
    """Every rollout batch a schedule is known to run: all stages of a static schedule, the
    first one of an online one (its later batches are multiples of its constraints)."""
    return sorted({int(s.batch) for s in getattr(schedule, "stages", ())} | {int(schedule.current.batch)})


def _constraints(schedule: Any) -> Any:
    c = getattr(schedule, "constraints", None)
    if c is None:
        c = getattr(getattr(schedule, "config", None), "constraints", None)
    return c


def _granularity(schedule: Any, group_size: int, planned_prompts: Iterable[int]) -> int:
    """The gcd of the prompt counts the schedule can ask for."""
    g = 0
    for p in planned_prompts:
        g = math.gcd(g, p)
    c = _constraints(schedule)
    online = not getattr(schedule, "stages", None) or hasattr(schedule, "config")
    if c is not None and online and c.multiple % group_size == 0:
        g = math.gcd(g, c.multiple // group_size)
    return max(g, 1)


def pin_gen_batch_size(config: Any, schedule: Any) -> int:
    """Fix ``data.gen_batch_size`` before the dataloader is built; returns the value in effect.

    Unset: the gcd of every prompt count the schedule plans (so each step is whole dataloader
    fetches). Set by the user: kept, and :func:`check_setup` warns about planned sizes it does
    not divide.
    """
    layout = read_layout(config)
    if layout.gen_batch_size is not None:
        return layout.gen_batch_size
    n = layout.group_size
    prompts = [b // n for b in planned_rollout_batches(schedule) if b % n == 0 and b >= n]
    gen = _granularity(schedule, n, prompts + [layout.train_batch_size])
    _set(config.data, "gen_batch_size", gen)
    return gen


def noise_estimate_gaps(config: Any) -> list[str]:
    """Why the actor's records would carry no ``grad_norm_micro`` (empty when they will): the
    adapter's actor worker measures the first micro-batch of a step's one optimizer update."""
    from rlvr_schedule_adapters.verl.noise import MEAN_MODES

    layout = read_layout(config)
    actor = config.actor_rollout_ref.actor
    gaps = []
    if layout.mini_batches != 1:
        gaps.append("more than one PPO mini-batch per step")
    if int(actor.get("ppo_epochs", 1) or 1) != 1:
        gaps.append(f"actor.ppo_epochs={actor.ppo_epochs}")
    mode = actor.get("loss_agg_mode", "token-mean")
    if mode not in MEAN_MODES:
        gaps.append(f"actor.loss_agg_mode={mode} (not a mean)")
    micro = actor.get("ppo_micro_batch_size_per_gpu", None)
    per_rank = layout.rollouts // layout.world_size
    if not actor.get("use_dynamic_bsz", False) and (micro is None or int(micro) >= per_rank):
        gaps.append(
            f"actor.ppo_micro_batch_size_per_gpu={micro} leaves one micro-batch per rank "
            f"({per_rank} rollouts)"
        )
    return gaps


def check_setup(
    config: Any, schedule: Any, *, mini_batch_mode: str = "per_step", warn: bool = True
) -> list[str]:
    """Problems that stop the verl run from following the schedule; each also a
    :class:`~rlvr_schedule_adapters._common.ScheduleSetupWarning` when ``warn``. Empty when the set-up holds every planned stage."""
    layout = read_layout(config)
    n = layout.group_size
    msgs: list[str] = []
    c = _constraints(schedule)
    if c is not None and c.group_size not in (1, n):
        msgs.append(
            f"schedule constraints.group_size={c.group_size} differs from actor_rollout_ref.rollout.n={n}"
        )
    pc = getattr(schedule, "config", None)
    auto = pc is not None and getattr(pc, "initial_batch", None) == "auto"
    gaps = noise_estimate_gaps(config) if auto and getattr(pc, "critical_batch", 1) is None else []
    if gaps:
        msgs.append(
            "initial_batch 'auto' without critical_batch needs micro-batch gradient norms "
            f"(grad_norm_micro), which the actor cannot measure here ({'; '.join(gaps)}): the run "
            "stays on the fallback batch; give critical_batch (e.g. from `rlvr-schedule fit`) or "
            "an initial_batch"
        )
    gen = layout.gen_batch_size or layout.train_batch_size
    k = layout.mini_batches
    if k is None:
        msgs.append(
            f"actor_rollout_ref.actor.ppo_mini_batch_size={layout.ppo_mini_batch_size} does not "
            f"divide data.train_batch_size={layout.train_batch_size}"
        )
    elif k > 1:
        msgs.append(
            f"{k} PPO mini-batches per step: records count rollouts per trainer step, each "
            f"optimizer update sees 1/{k} of them (set ppo_mini_batch_size=train_batch_size "
            "for one update per step)"
        )
    for b in planned_rollout_batches(schedule):
        where = f"planned rollout batch {b}"
        if b % n:
            msgs.append(f"{where} is not a multiple of actor_rollout_ref.rollout.n={n}")
            continue
        p = b // n
        if p % gen:
            msgs.append(
                f"{where} ({p} prompts) is not a multiple of the dataloader batch "
                f"data.gen_batch_size={gen}; that stage cannot be applied"
            )
        if mini_batch_mode == "per_step" and k and p % k:
            msgs.append(f"{where} ({p} prompts) does not split into {k} PPO mini-batches")
        if mini_batch_mode == "fixed" and p % layout.ppo_mini_batch_size:
            msgs.append(
                f"{where} ({p} prompts) is not a multiple of "
                f"actor_rollout_ref.actor.ppo_mini_batch_size={layout.ppo_mini_batch_size}"
            )
        mini = p // k if (mini_batch_mode == "per_step" and k) else layout.ppo_mini_batch_size
        if (mini * n) % layout.world_size:
            msgs.append(
                f"{where}: a mini-batch of {mini * n} rollouts does not split over "
                f"{layout.world_size} data-parallel ranks (verl pads the batch)"
            )
    if warn:
        warn_setup(msgs, framework="verl")
    return msgs
