"""Where a TRL run stands against its schedule: the plain object :class:`RlvrScheduleCallback` owns.

The callback turns Trainer events into calls on a :class:`TrlRunState`; the state object holds
everything that is not a reference to the Trainer: the stage in effect in the Trainer and the one
waiting for an aligned update boundary, the rollouts of the last update, and where the data stream
stands in the epoch (micro-steps done, the Trainer's own count of them after a resume, the train
sampler's shuffle state when the epoch began). It knows the HF Trainer's accumulation arithmetic and
nothing of transformers, so it is tested and saved without a Trainer.

Why the position matters: the Trainer ends an update whenever its micro-step count since the epoch
began divides by ``gradient_accumulation_steps`` (read at that micro-step), and on resume it counts
the micro-steps behind it with the *initial* accumulation. A new stage may therefore start only at a
boundary whose count divides by its accumulation, and after a resume of a grown schedule the Trainer's
count is short by :attr:`TrlRunState.offset` until the epoch ends.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlvr_schedule_adapters.trl.epochs import BatchUnit

__all__ = ["TrlRunState"]

log = logging.getLogger("rlvr_schedule.adapters.trl")

#: Version of the saved form (``rlvr_state`` in ``trainer_state.json``).
VERSION = 2


def _pair(v: Any) -> tuple[int, float] | None:
    return (int(v[0]), float(v[1])) if v else None


@dataclass
class TrlRunState:
    """The schedule's bookkeeping in one TRL run (the rollout count and the stage asked for live in the
    :class:`~rlvr_schedule.driver.ScheduleDriver`). Stages are ``(rollouts per update, base LR)``."""

    unit: BatchUnit | None = None  # rollouts per micro-step and the accumulation multiple (train begin)
    applied: tuple[int, float] | None = None  # stage in effect in the Trainer
    pending: tuple[int, float] | None = None  # asked for, waiting for an aligned boundary
    last_batch: int | None = None  # rollouts of the last update (measured micro-steps)
    last_step: int = 0  # global step of the last record fed
    start_samples: int = 0  # rollouts consumed when this train() call began (resume)
    micro: int = 0  # micro-steps of the update in progress
    epoch_pos: int = 0  # micro-steps done in the current epoch
    micro_per_epoch: int | None = None
    offset: int = 0  # micro-steps done in this epoch minus the Trainer's count of them (resume)
    trainer_pos: int = 0  # the Trainer's count of them at the resume
    resume_pos: int | None = None  # where the resumed epoch starts (until its first epoch begin)
    epoch_rng: str | None = None  # the train sampler's generator state when the epoch began
    saved_epoch_pos: int | None = None  # from the checkpoint
    saved_sampler_rng: str | None = None  # from the checkpoint

    # --- the accumulation arithmetic ---------------------------------------------------------------
    def accumulation(self, fallback: int) -> int:
        """The accumulation count of the stage in effect (``fallback``: the Trainer's, before one is)."""
        if self.applied is not None and self.unit is not None:
            return self.unit.accumulation(self.applied[0])
        return int(fallback)

    def ready(self, current_ga: int) -> tuple[int, float, int] | None:
        """The waiting stage and its accumulation if it may start now: at a boundary where the
        micro-steps done in the epoch divide by its count (else the next update would be cut short)."""
        if self.pending is None or self.unit is None:
            return None
        batch, lr = self.pending
        ga = self.unit.accumulation(batch)
        if ga != self.accumulation(current_ga) and self.epoch_pos % ga:
            return None
        return batch, lr, ga

    def steering(self, current_ga: int) -> int:
        """The ``gradient_accumulation_steps`` to set before the next micro-step, so that the Trainer,
        whose count is off by :attr:`offset`, ends the update after exactly the stage's micro-steps:
        a value that divides its count only at the update's last micro-step (the stage's own value
        when the offset is a multiple of it)."""
        ga = self.accumulation(current_ga)
        if self.offset % ga == 0:
            return ga
        count = self.epoch_pos - self.offset + self.micro + 1  # the Trainer's step + 1, next micro-step
        return count if self.micro + 1 >= ga else count + 1

    def update_done(self) -> int:
        """An optimizer update ended: its micro-steps, counted into the epoch."""
        micro, self.micro = self.micro + 1, 0
        self.epoch_pos += micro
        if self.unit is not None:
            self.last_batch = self.unit.batch(micro)
        return micro

    def first_micro_cut(self, current_ga: int) -> int | None:
        """The Trainer's count at the next update's first micro-step when the stage's value divides it
        (that update would end after one micro-step), else None."""
        ga = self.accumulation(current_ga)
        count = self.epoch_pos - self.offset + 1
        return count if ga > 1 and count % ga == 0 else None

    # --- train begin and resume ------------------------------------------------------------------
    def begin(self, unit: BatchUnit, micro_per_epoch: int | None) -> None:
        """A ``train()`` call begins (fresh or resumed)."""
        self.unit, self.micro, self.micro_per_epoch = unit, 0, micro_per_epoch

    def forget_run(self) -> None:
        """The callback is reused for a new run: its counters restart."""
        self.last_step, self.last_batch, self.pending = 0, None, None

    def resume_position(self, global_step: int, ga0: int, *, ignore_data_skip: bool) -> int:
        """Micro-steps of the current epoch behind the resumed run (saved), or the Trainer's guess.

        The Trainer skips ``(global_step % updates_per_epoch) x gradient_accumulation_steps`` batches,
        counted with the initial accumulation (before any callback runs). After a schedule has grown
        the batch that count is short of what the run really did; the difference is kept in
        :attr:`offset` and :meth:`steering` keeps the updates whole for the rest of the epoch.
        """
        self.offset = 0
        per_epoch = self.micro_per_epoch
        if not per_epoch or ignore_data_skip:
            trainer_pos = 0
        else:
            trainer_pos = (global_step % max(-(-per_epoch // ga0), 1)) * ga0
        self.trainer_pos = trainer_pos
        saved = self.saved_epoch_pos if self.last_step > 0 else None
        if saved is None or int(saved) == trainer_pos:
            pos = trainer_pos
        else:
            self.offset = int(saved) - trainer_pos
            log.info(
                "resume: the Trainer counts %s micro-steps into the epoch (it assumes a constant "
                "gradient_accumulation_steps) where the run had done %s; the callback moves the data "
                "stream there and keeps updates whole until the epoch ends",
                trainer_pos,
                saved,
            )
            pos = int(saved)
        self.resume_pos = self.epoch_pos = pos
        return pos

    def epoch_begins(self, rng: str | None) -> None:
        self.epoch_rng = rng
        self.epoch_pos = self.resume_pos or 0
        self.resume_pos = None

    # --- saved form --------------------------------------------------------------------------------
    def state_dict(self, driver: Mapping[str, Any], rng_now: str | None) -> dict[str, Any]:
        """The JSON-able form saved in checkpoints, with the driver's state. Saved after the epoch's
        last update, the next epoch starts from the sampler's generator as it is now (``rng_now``)."""
        epoch_pos, rng = self.epoch_pos, self.epoch_rng
        if self.micro_per_epoch and epoch_pos >= self.micro_per_epoch and rng_now is not None:
            epoch_pos, rng = 0, rng_now
        return {
            "version": VERSION,
            "driver": dict(driver),
            "last_batch": self.last_batch,
            "last_step": self.last_step,
            "applied": list(self.applied) if self.applied else None,
            "pending": list(self.pending) if self.pending else None,
            "epoch_pos": epoch_pos,
            "sampler_rng": rng,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Everything but the driver's part (the callback hands that to its driver)."""
        self.last_batch = state.get("last_batch")
        self.last_step = int(state.get("last_step", 0))
        self.applied, self.pending = _pair(state.get("applied")), _pair(state.get("pending"))
        self.saved_epoch_pos = state.get("epoch_pos")
        self.saved_sampler_rng = state.get("sampler_rng")
