"""The TRL set-up check: can the Trainer's data plan hold the schedule?

The HF Trainer plans its epochs from the *initial* ``gradient_accumulation_steps``; a schedule that
grows the accumulation later ends each epoch early, and a dataset too small for the schedule ends
the run before ``max_steps`` without a word (measured on TRL 1.16, ``docs/adapters_trl.md``). These
checks replay the Trainer's epoch loop on the schedule's plan (and on an online policy's fastest
growth) and return what would go wrong, one sentence each.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rlvr_schedule_adapters._common import planned_batches, reachable_batches
from rlvr_schedule_adapters.trl.epochs import BatchUnit, epoch_fit

__all__ = ["check_plan"]


def check_plan(
    schedule: Any,
    unit: BatchUnit,
    *,
    remaining: int,
    samples: int,
    micro_per_epoch: int,
    ga0: int,
    epochs: int,
    noise_estimate: bool,
    snap: Callable[[int], int] = int,
) -> list[str]:
    """Reasons the run cannot hold ``schedule`` for its ``remaining`` updates (empty: it can).

    ``unit``: rollouts per micro-step; ``micro_per_epoch``: the dataloader's length; ``ga0``: the
    accumulation the Trainer planned from; ``noise_estimate``: the records carry the micro-batch
    gradient norm (so B* tracking can move the batch); ``snap``: a planned batch as the host runs
    it (on its grid, :meth:`~rlvr_schedule.driver.ScheduleDriver.snap`).
    """
    if remaining <= 0:
        return []
    stages = list(schedule.stages)
    index = getattr(schedule, "index", len(stages) - 1)
    plan = [snap(b) for b in planned_batches(stages, remaining, samples=samples, start=index)]
    try:
        accum = [unit.accumulation(b) for b in plan]
    except ValueError as exc:
        return [f"schedule not runnable with this trainer: {exc}"]
    out: list[str] = []
    fit = epoch_fit(accum, micro_per_epoch=micro_per_epoch, initial_accumulation=ga0, epochs=epochs)
    if fit.updates < fit.planned:
        need = fit.micro_needed * unit.per_step
        out.append(
            f"the dataset is too small for the schedule: the Trainer plans epochs from the initial "
            f"gradient_accumulation_steps={ga0}, so the run would end after {fit.updates} of "
            f"{fit.planned} remaining updates ({micro_per_epoch} micro-steps per epoch x {epochs} "
            f"epochs). One epoch must hold the sum of accumulation over all steps: "
            f"{fit.micro_needed} micro-steps = {need} completions"
        )
        return out
    if fit.partial:
        out.append(
            f"{fit.partial} update(s) will be cut short at an epoch end: make the epoch "
            f"({micro_per_epoch} micro-steps) a multiple of every planned accumulation count"
        )
    # the worst case of an online schedule: it grows as early and as far as its rules allow
    worst = reachable_batches(schedule, remaining, samples=samples, noise_estimate=noise_estimate)
    if worst is None or max(worst) <= max(plan):
        return out
    top = max(worst)
    if math.isinf(top):
        out.append(
            "the run may end early: the schedule can grow its batch without bound (B* tracking; "
            "no constraints.max_batch) and the data plan is fixed from "
            f"gradient_accumulation_steps={ga0}; cap constraints.max_batch"
        )
        return out
    if any(int(b) % unit.multiple for b in worst):
        return out  # a batch this trainer cannot run is refused when proposed (the stage holds)
    grown = epoch_fit(
        [unit.accumulation(int(b)) for b in worst],
        micro_per_epoch=micro_per_epoch,
        initial_accumulation=ga0,
        epochs=epochs,
    )
    if grown.updates < remaining:
        out.append(
            f"the run may end early: if the schedule grows as early as its rules allow, to "
            f"{int(top)} rollouts, the data holds only {grown.updates} of {remaining} remaining updates "
            f"({micro_per_epoch} micro-steps per epoch x {epochs} epochs, planned from "
            f"gradient_accumulation_steps={ga0}); to be safe give one epoch "
            f"{grown.micro_needed * unit.per_step} completions or cap constraints.max_batch"
        )
    return out
