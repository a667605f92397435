"""What the two-clock policy builds from its config, written once for every caller.

The start point, the operating batch, the LR rule and the failure-clock trigger: the live policy
(:class:`~rlvr_schedule.policy.TwoClockScheduler`), the planner (``rlvr-schedule plan``) and the
comparison harness all build them here from one :class:`~rlvr_schedule.policy.PolicyConfig`, so a
planned schedule and the live policy built from the same file start at the same batch, follow the
same B* to the same batch, set the same LR and switch at the same point of the failure clock.
"""

from __future__ import annotations

import math

from rlvr_schedule.policy import triggers
from rlvr_schedule.policy.constraints import BatchConstraints
from rlvr_schedule.policy.policy_config import PolicyConfig
from rlvr_schedule.policy.price import DEFAULT_PRICE, cost_optimal_batch
from rlvr_schedule.policy.triggers import FailureClockTrigger
from rlvr_schedule.theory.scaling import lr_for_batch

__all__ = [
    "clock_warnings",
    "failure_clock",
    "initial_stage",
    "known_critical_batch",
    "lr_at",
    "operating_batch",
    "operating_fraction_at",
    "price_for_tolerance",
]


def known_critical_batch(cfg: PolicyConfig) -> float | None:
    """The known B* at the policy's own LR (``critical_batch`` rescaled from the LR it was
    measured at, B* ~ 1/r); None when none is known."""
    if cfg.critical_batch is None:
        return None
    at = cfg.critical_batch_lr if cfg.critical_batch_lr is not None else cfg.base_lr
    return float(cfg.critical_batch) * at / cfg.base_lr


def initial_stage(cfg: PolicyConfig, constraints: BatchConstraints | None = None) -> tuple[int, str]:
    """The start point and why, built once from the config for the live policy and the planner:
    ``initial_batch``, else the operating fraction x the known B*
    (:func:`~rlvr_schedule.policy.triggers.start_batch`), else the fallback batch."""
    c = constraints if constraints is not None else cfg.constraints
    if cfg.initial_batch != "auto":
        return int(cfg.initial_batch), "initial"
    if cfg.critical_batch is not None:
        known = float(known_critical_batch(cfg) or cfg.critical_batch)
        frac = operating_fraction_at(cfg, known)
        if cfg.sample_tolerance is None:
            rho = cfg.price if cfg.price is not None else DEFAULT_PRICE
            how = "stated" if cfg.price is not None else "default"
            why = f"initial: cheapest at price {rho:g} rollouts/update ({how}): {frac:.3g} x critical batch {known:g}"
            return operating_batch(cfg, known, c), why
        return operating_batch(cfg, known, c), f"initial: {frac:.3g} x critical batch {known:g}"
    return c.snap(
        cfg.fallback_batch or cfg.base_batch or c.lowest
    ), "initial: fallback until the gradient-noise estimate"


def failure_clock(cfg: PolicyConfig, base_batch: float) -> FailureClockTrigger | None:
    """The failure-clock trigger built once from the config (None: no sweep clock given): the clock
    measured at ``failure_batch`` (None: the base batch) and ``failure_lr`` (None: the LR rule's there)."""
    if cfg.failure_samples is None:
        return None
    e = triggers.rule_exponent(cfg.lr_rule)
    ref_b = float(cfg.failure_batch or cfg.base_batch or base_batch)
    iv = cfg.failure_samples_interval
    return FailureClockTrigger(
        float(cfg.failure_samples),
        lower=float(iv[0]) if iv is not None else None,
        batch=ref_b,
        lr=float(cfg.failure_lr) if cfg.failure_lr is not None else cfg.base_lr * (ref_b / base_batch) ** e,
        exponent=cfg.failure_exponent,
        rule_exponent=e,
        fraction=cfg.failure_clock_fraction,
        floor=cfg.failure_clock_floor,
        min_rollouts=cfg.min_stage_samples,
    )


def operating_fraction_at(cfg: PolicyConfig, critical_batch: float, price: float | None = None) -> float:
    """Batch / B* where the policy runs at a B*: the batch cheapest at the price
    (:func:`~rlvr_schedule.policy.price.cost_optimal_batch`; ``price`` None: the stated one, else
    the default) over B*, or an older file's fixed ``sample_tolerance`` fraction."""
    if cfg.sample_tolerance is not None:
        return cfg.operating_fraction
    rho = price if price is not None else (cfg.price if cfg.price is not None else DEFAULT_PRICE)
    bstar = float(critical_batch)
    # at least one rollout: a price of 0 (no per-update cost measured) puts the batch at the smallest runnable
    return max(cost_optimal_batch(bstar, rho), 1.0) / bstar if bstar > 0 else 0.0


def price_for_tolerance(cfg: PolicyConfig) -> float:
    """The price an older file's ``sample_tolerance`` amounts to at its known B* (NaN: none known)."""
    from rlvr_schedule.policy.price import price_equivalent

    known = known_critical_batch(cfg)
    return math.nan if known is None else price_equivalent(cfg.operating_fraction, known)


def operating_batch(
    cfg: PolicyConfig,
    critical_batch: float,
    constraints: BatchConstraints | None = None,
    price: float | None = None,
) -> int:
    """The batch the policy runs at a B* (at its own LR): the batch cheapest at the price
    (:func:`operating_fraction_at`), snapped to the nearest runnable batch (the start with a known
    B*; the B* tracker's target)."""
    c = constraints if constraints is not None else cfg.constraints
    return triggers.start_batch(critical_batch, operating_fraction_at(cfg, critical_batch, price), c)


def lr_at(cfg: PolicyConfig, batch: float, base_batch: float) -> float:
    """The LR rule's LR at ``batch``: ``base_lr`` at ``base_batch``, scaled by ``lr_rule``."""
    return float(lr_for_batch(batch, base_batch, cfg.base_lr, rule=cfg.lr_rule))


def clock_warnings(cfg: PolicyConfig, clock: FailureClockTrigger | None, batch: int, lr: float) -> list[str]:
    """A set-up warning when the failure clock runs out within ``min_stage_samples`` at the start:
    its trigger never proposes a switch (the first stage would be too short), so the schedule never
    switches ahead of the failure it was given."""
    if clock is None:
        return []
    first = clock.stage_fraction * (1.0 - clock.stage_used_) * clock.clock(batch, lr)
    if first >= cfg.min_stage_samples:
        return []
    return [
        f"the failure clock ({clock.failure_samples:.5g} rollouts, lower bound {clock.lower:.5g}) gives a "
        f"first stage of {first:.4g} rollouts at batch {batch}, shorter than min_stage_samples "
        f"{cfg.min_stage_samples}: the schedule can never switch ahead of it (lower min_stage_samples or "
        "check failure_samples)"
    ]
