"""The reachable-batch simulator: the largest batch the two-clock policy can reach, update by update.

What a host checks its data plan against before the run (a TRL or verl set-up that can feed only
so many rollouts per update): the policy's own rules, played forward greedily from its current
state with one record per update, switching as early and as far as each rule allows.
"""

from __future__ import annotations

import math
from typing import Any

#: A :class:`~rlvr_schedule.policy.TwoClockScheduler` (not imported: the scheduler imports this module).
TwoClockScheduler = Any

__all__ = ["largest_reachable_batch", "reachable_batches"]


def reachable_batches(
    policy: TwoClockScheduler, steps: int, *, samples: int | None = None, noise_estimate: bool = True
) -> list[float]:
    """The largest rollout batch each of the next ``steps`` updates can run at, the policy
    switching as early and as far as its rules allow; ``math.inf`` where nothing bounds it.

    What a host checks its data plan against before the run. The rules, one record per update
    (the most a host can feed): a switch decided on an update's record applies from the next
    update; at most ``max_stages`` stages; between switches ``min_stage_samples`` rollouts and a
    ``hysteresis_samples`` streak, each update carrying the batch in effect. ``samples``: rollouts consumed so far
    (None: the policy's own count, from the records it has seen). Where a switch may go:

    - failure trigger: ``growth`` x the batch (snapped up), only where a switch postpones the
      failure (:attr:`PolicyConfig.postpone_exponent` > 0: the default);
    - B* tracking (``track_critical_batch``): to the fraction x the B* estimate, which nothing
      bounds but ``constraints.max_batch``, once that is ``track_step`` x the batch;
    - the one-off ``initial_batch: auto`` switch: any batch, at the first estimated record.

    Tracking and ``auto`` need the gradient-noise estimate: ``estimate_samples`` rollouts of records
    carrying ``grad_norm_micro`` and ``micro_batch``; ``noise_estimate=False`` says the host's records
    never carry them (so only the failure trigger can grow the batch).

    Failure switches may use up the stages before tracking is ready, or never come; the answer
    is the larger, update by update, of the plans with and without them.
    """
    plan = _plan(policy, steps, samples, noise_estimate, failure=True)
    if policy.config.postpone_exponent > 0 and policy.config.track_critical_batch and noise_estimate:
        other = _plan(policy, steps, samples, noise_estimate, failure=False)
        plan = [max(x, y) for x, y in zip(plan, other, strict=True)]
    return plan


def _plan(
    policy: TwoClockScheduler, steps: int, samples: int | None, noise_estimate: bool, *, failure: bool
) -> list[float]:
    """One greedy plan of :func:`reachable_batches` (``failure``: with failure switches)."""
    cfg = policy.config
    cons = policy.constraints
    run, tracker = policy.run, policy.tracker
    hi = float(cons.highest) if cons.highest is not None else math.inf
    records0 = run.records
    auto = run.auto_pending
    streak_s = float(run.streak_samples)
    noise0, noise_s = int(tracker.noise.n_updates), float(tracker.noise_samples)
    now = run.samples if samples is None else samples
    since = float(now) - float(run.last_switch)
    left = int(cfg.max_stages) - len(policy.stages)
    cur = float(policy.current.batch)
    out: list[float] = []
    for i in range(max(int(steps), 0)):
        out.append(cur)  # update i runs at the batch in effect; its record may switch the next one
        k = records0 + i + 1
        since += cur
        streak_s += cur
        noise_s += cur
        if left <= 0:
            continue
        estimated = (
            noise_estimate
            and noise0 + (k - records0) >= tracker.est_records
            and noise_s >= tracker.est_samples
        )
        target = cur
        if auto and estimated:  # the auto switch skips hysteresis and the stage minimums
            auto, target = False, hi
        elif (
            min(
                since - cfg.min_stage_samples,
                streak_s - cfg.hysteresis_samples,
            )
            >= 0
        ):
            if failure and cfg.postpone_exponent > 0 and math.isfinite(cur):
                target = max(target, float(cons.snap(cur * cfg.growth, "up")))
            if cfg.track_critical_batch and estimated and hi >= cfg.track_step * cur:
                target = max(target, hi)
        if target > cur:
            cur, streak_s, since, left, auto = target, 0.0, 0.0, left - 1, False
    return out


def largest_reachable_batch(
    policy: TwoClockScheduler,
    steps: int | None = None,
    *,
    samples: int | None = None,
    noise_estimate: bool = True,
) -> float | None:
    """The largest batch the policy can switch to within ``steps`` more updates (None: any
    number), ``math.inf`` when only an unset ``constraints.max_batch`` would bound it, or None
    when it cannot grow. See :func:`reachable_batches`."""
    cfg = policy.config
    if steps is None:
        # every remaining stage, each switch as late as the rules make it at most (at the
        # smallest batch, the rollout limits take the most updates)
        low = max(int(policy.constraints.lowest), 1)
        per_switch = max(-(-max(cfg.min_stage_samples, cfg.hysteresis_samples) // low), 1)
        steps = (
            max(policy.tracker.est_records, -(-policy.tracker.est_samples // low))
            + (int(cfg.max_stages) + 1) * per_switch
            + 1
        )
    plan = reachable_batches(policy, steps, samples=samples, noise_estimate=noise_estimate)
    if not plan:
        return None
    top = max(plan)
    return (top if math.isinf(top) else int(top)) if top > plan[0] else None
