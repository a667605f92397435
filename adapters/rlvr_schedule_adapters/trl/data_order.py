"""Which prompts a resumed ``GRPOTrainer`` run takes next: the sampler's shuffle and the skip.

A resumed HF Trainer (transformers 5.x) rebuilds the train dataloader and skips
``(global_step % updates_per_epoch) x gradient_accumulation_steps`` batches of it, counted with the
accumulation count of the config. Two things then differ from the uninterrupted run:

- after a schedule has changed the accumulation count, the run really did a different number of
  micro-steps in the epoch: the resumed run sees prompts again (or skips some);
- TRL's ``RepeatSampler`` shuffles with its own ``torch.Generator``, seeded once when the sampler is
  built and drawn once per epoch; the Trainer does not replay the epochs before the checkpoint, so a
  run resumed in its second epoch or later walks the *first* epoch's order again.

The callback saves the generator's state at the start of the epoch and the true micro-step position;
:func:`restore_order` puts the state back and shifts the index stream once so that, after the
Trainer's own skip, the next batch is the one the uninterrupted run took. Indices only move: no data
is read for the skipped batches (accelerate's ``SkipBatchSampler`` drops index batches).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SamplerSite",
    "ShiftedOnce",
    "detach_loader_seed",
    "find_sampler",
    "generator_state",
    "restore_order",
]

log = logging.getLogger("rlvr_schedule.adapters.trl")


@dataclass(frozen=True)
class SamplerSite:
    """The batch sampler whose ``.sampler`` yields an epoch's indices, and how many of its batches one
    micro-step takes over all ranks (accelerate gives rank r every W-th batch unless it splits them)."""

    batch_sampler: Any
    batches_per_micro: int

    @property
    def sampler(self) -> Any:
        return self.batch_sampler.sampler

    @property
    def indices_per_micro(self) -> int:
        return int(self.batch_sampler.batch_size) * self.batches_per_micro


def find_sampler(dataloader: Any) -> SamplerSite | None:
    """The sampler site behind a Trainer's (accelerate-prepared) train dataloader, or None (an
    iterable dataset, a dataloader of another shape)."""
    bs = getattr(dataloader, "batch_sampler", None)
    per_micro = 1
    inner = getattr(bs, "batch_sampler", None)  # accelerate's BatchSamplerShard (several processes)
    if inner is not None and hasattr(inner, "sampler"):
        if not getattr(bs, "split_batches", False):
            per_micro = int(getattr(bs, "num_processes", 1) or 1)
        bs = inner
    if bs is None or not hasattr(bs, "sampler") or not getattr(bs, "batch_size", None):
        return None
    return SamplerSite(bs, per_micro)


def _base(sampler: Any) -> Any:
    return sampler.inner if isinstance(sampler, ShiftedOnce) else sampler


def generator_state(sampler: Any) -> str | None:
    """The state of the sampler's own ``torch.Generator`` (base64, JSON-able), or None if it has none."""
    gen = getattr(_base(sampler), "generator", None)
    if gen is None or not hasattr(gen, "get_state"):
        return None
    return base64.b64encode(gen.get_state().numpy().tobytes()).decode("ascii")


def set_generator_state(sampler: Any, state: str) -> None:
    import torch

    gen = _base(sampler).generator
    gen.set_state(torch.frombuffer(bytearray(base64.b64decode(state)), dtype=torch.uint8))


class ShiftedOnce:
    """A sampler that, on its first pass only, yields ``inner``'s first ``drop`` indices (the ones the
    Trainer's skip throws away) and then ``inner``'s indices from ``resume_at`` on; later passes are
    ``inner``'s. Lengths follow."""

    def __init__(self, inner: Any, *, drop: int, resume_at: int) -> None:
        self.inner, self.drop, self.resume_at = inner, int(drop), int(resume_at)
        self.done = False

    def __iter__(self) -> Iterator[Any]:
        if self.done:
            yield from self.inner
            return
        self.done = True
        items = list(self.inner)
        yield from items[: self.drop]
        yield from items[self.resume_at :]

    def __len__(self) -> int:
        n = len(self.inner)
        return n if self.done else max(n - self.resume_at, 0) + min(self.drop, n)

    def __getattr__(self, name: str) -> Any:  # generator, seed, ... of the wrapped sampler
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def restore_order(site: SamplerSite, *, rng: str | None, trainer_pos: int, true_pos: int) -> bool:
    """Put the epoch's shuffle state back and make the Trainer's skip of ``trainer_pos`` micro-steps
    land on ``true_pos``. Returns whether the stream was shifted."""
    if rng is not None:
        if generator_state(site.sampler) is None:
            log.warning("resume: the train sampler has no generator; its saved shuffle state is not restored")
        else:
            set_generator_state(site.sampler, rng)
    if trainer_pos == true_pos:
        return False
    per = site.indices_per_micro
    site.batch_sampler.sampler = ShiftedOnce(
        _base(site.sampler), drop=trainer_pos * per, resume_at=true_pos * per
    )
    return True


def detach_loader_seed(dataloader: Any, seed: int) -> Callable[[], None] | None:
    """Give the train dataloader its own ``torch.Generator`` for the worker base seed that each new
    iterator draws, so that making the next iterator does not draw from the global torch RNG.
    Returns the undo (back to the global RNG), or None where the loader already has a generator.

    Why: a resumed Trainer loads the checkpoint's RNG states before making the epoch's iterator when
    its own count of micro-steps in the epoch is 0, and after the first fetch otherwise. When the
    Trainer's count is 0 but the run stood mid-epoch (its iterator already made), that draw puts the
    sampling one draw off the uninterrupted run's; the callback detaches the seed for that one
    iterator. The drawn seed itself only seeds worker processes."""
    import torch

    base = getattr(dataloader, "base_dataloader", dataloader)  # accelerate's DataLoaderShard wraps one
    if not hasattr(base, "generator") or base.generator is not None:
        return None
    base.generator = torch.Generator().manual_seed(int(seed))

    def undo() -> None:
        base.generator = None

    return undo
