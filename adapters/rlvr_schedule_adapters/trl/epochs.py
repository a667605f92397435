"""The HF Trainer's arithmetic of rollouts, accumulation and epochs (what the TRL adapter plans with)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BatchUnit", "EpochFit", "epoch_fit"]


@dataclass(frozen=True)
class BatchUnit:
    """How a rollout batch maps onto accumulation: ``batch = per_step x accumulation``.

    ``per_step`` is rollouts per micro-step over all ranks (per-device batch x data-parallel world);
    ``accumulation_multiple`` is what the accumulation count must be a multiple of (TRL: the
    ``steps_per_generation`` kept fixed while the batch changes).
    """

    per_step: int
    accumulation_multiple: int = 1

    @property
    def multiple(self) -> int:
        """Every runnable rollout batch is a multiple of this (``BatchConstraints.divisor``)."""
        return self.per_step * self.accumulation_multiple

    def accumulation(self, batch: int) -> int:
        """Accumulation steps for ``batch``; ValueError saying which batches are runnable."""
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1 or batch % self.multiple:
            raise ValueError(
                f"rollout batch {batch!r} is not runnable here: it must be a positive multiple of "
                f"{self.multiple} (= {self.per_step} rollouts per micro-step x accumulation multiple "
                f"{self.accumulation_multiple}); set BatchConstraints(divisor={self.multiple})"
            )
        return batch // self.per_step

    def batch(self, accumulation: int) -> int:
        return self.per_step * accumulation


@dataclass(frozen=True)
class EpochFit:
    """What a host's epoch plan (fixed from the initial accumulation) does with a batch plan.

    ``updates`` is how many of the planned updates run before the data plan ends; ``partial`` how
    many of those get fewer micro-steps than planned (an epoch ends mid-update);
    ``micro_needed`` / ``micro_available`` the micro-steps the plan needs and the run offers.
    """

    planned: int
    updates: int
    partial: int
    micro_needed: int
    micro_available: int

    @property
    def fits(self) -> bool:
        return self.updates >= self.planned and self.partial == 0


def epoch_fit(
    accumulations: Sequence[int], *, micro_per_epoch: int, initial_accumulation: int, epochs: int
) -> EpochFit:
    """Replay the HF-Trainer epoch loop with a changing accumulation count.

    The Trainer fixes updates per epoch as ``ceil(micro_per_epoch / initial_accumulation)`` and
    takes the current accumulation count of micro-steps for each update until the epoch's data
    runs out: a larger accumulation later ends each epoch early (fewer updates than planned; the
    run stops short of ``max_steps``) and an epoch length that is not a multiple of it cuts the
    last update of the epoch short.
    """
    per_epoch = max(-(-micro_per_epoch // initial_accumulation), 1)
    done = partial = 0
    for _ in range(max(epochs, 0)):
        pos = 0
        for _ in range(per_epoch):
            if done >= len(accumulations) or pos >= micro_per_epoch:
                break
            take = min(accumulations[done], micro_per_epoch - pos)
            partial += take < accumulations[done]
            pos += take
            done += 1
        if done >= len(accumulations):
            break
    return EpochFit(
        planned=len(accumulations),
        updates=done,
        partial=partial,
        micro_needed=int(sum(accumulations)),
        micro_available=micro_per_epoch * max(epochs, 0),
    )
