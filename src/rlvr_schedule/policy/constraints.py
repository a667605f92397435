"""What rollout batches a host can actually run.

A GRPO batch is whole groups (a multiple of the group size), and frameworks further need it
to split evenly over data-parallel ranks and micro-batches (``divisor``). Schedules propose
ideal batches; :meth:`BatchConstraints.snap` turns them into runnable ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from rlvr_schedule.errors import ConfigError

__all__ = ["BatchConstraints"]

_FIELDS = ("group_size", "min_batch", "max_batch", "divisor")


def _check_int(value: Any, name: str, *, source: str | None, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"must be a positive integer, got {value!r}", source=source, field=name)


@dataclass(frozen=True)
class BatchConstraints:
    """Runnable rollout batches: multiples of ``lcm(group_size, divisor)`` within [min, max].

    ``divisor`` is what the host needs the batch to be a multiple of (e.g. data-parallel world
    size x micro-batch); ``max_batch`` None means unbounded.
    """

    group_size: int = 1
    min_batch: int = 1
    max_batch: int | None = None
    divisor: int | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self, *, source: str | None = None, prefix: str = "") -> None:
        """Raise :class:`ConfigError` naming the first invalid field."""
        _check_int(self.group_size, prefix + "group_size", source=source)
        _check_int(self.min_batch, prefix + "min_batch", source=source)
        _check_int(self.max_batch, prefix + "max_batch", source=source, optional=True)
        _check_int(self.divisor, prefix + "divisor", source=source, optional=True)
        if self.max_batch is not None:
            if self.max_batch < self.min_batch:
                raise ConfigError(
                    f"max_batch {self.max_batch} is below min_batch {self.min_batch}",
                    source=source,
                    field=prefix + "max_batch",
                )
            if self.lowest > self.max_batch:
                raise ConfigError(
                    f"no multiple of {self.multiple} (group_size x divisor) lies in "
                    f"[{self.min_batch}, {self.max_batch}]",
                    source=source,
                    field=prefix + "max_batch",
                )

    @property
    def multiple(self) -> int:
        """Every runnable batch is a multiple of this (lcm of group size and divisor)."""
        return math.lcm(self.group_size, self.divisor or 1)

    @property
    def lowest(self) -> int:
        """The smallest runnable batch."""
        m = self.multiple
        return -(-self.min_batch // m) * m

    @property
    def highest(self) -> int | None:
        """The largest runnable batch (None: unbounded)."""
        if self.max_batch is None:
            return None
        m = self.multiple
        return (self.max_batch // m) * m

    def is_valid(self, batch: int) -> bool:
        """Whether ``batch`` is runnable as is."""
        hi = self.highest
        return batch % self.multiple == 0 and batch >= self.lowest and (hi is None or batch <= hi)

    def snap(self, batch: float, mode: str = "nearest") -> int:
        """The runnable batch nearest ``batch`` (``mode``: "nearest" with ties down, "down", "up").

        Raises ValueError for a non-finite or non-positive batch.
        """
        b = float(batch)
        if not math.isfinite(b) or b <= 0:
            raise ValueError(f"batch must be finite and positive, got {batch!r}")
        m = self.multiple
        q = b / m
        if mode == "nearest":
            k = math.floor(q)
            k = k + 1 if q - k > 0.5 else k
        elif mode == "down":
            k = math.floor(q)
        elif mode == "up":
            k = math.ceil(q)
        else:
            raise ValueError(f"mode must be 'nearest', 'down' or 'up', got {mode!r}")
        out = max(k * m, self.lowest)
        hi = self.highest
        if hi is not None:
            out = min(out, hi)
        return int(out)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def with_host_grid(
        self,
        divisor: int,
        *,
        group_size: int | None = None,
        max_batch: int | None = None,
        host: str = "the host",
    ) -> tuple[BatchConstraints, list[str]]:
        """These constraints on the host's grid of runnable batches, and what conflicts (one sentence each).

        A host can run only multiples of ``divisor`` (e.g. TRL: per-device batch x world x
        steps_per_generation) of whole groups of ``group_size``, up to ``max_batch``; it publishes
        that at set-up so that a schedule proposes only batches it can run instead of the user
        copying the divisor into the schedule. The merge keeps every batch runnable for both:
        divisor ``lcm(own, host)``, group size ``lcm(own, host)``, the tighter ``max_batch``. A user
        divisor (or group size) that is not a multiple of the host's conflicts: the batches it
        allows are not all runnable, so the merge narrows them, and says so. When nothing runnable
        is left below ``max_batch``, the bound is raised to the smallest runnable batch (said too).
        """
        _check_int(divisor, "divisor", source=host)
        _check_int(group_size, "group_size", source=host, optional=True)
        _check_int(max_batch, "max_batch", source=host, optional=True)
        notes: list[str] = []
        div = math.lcm(self.divisor or 1, divisor)
        if self.divisor is not None and self.divisor % divisor:
            notes.append(
                f"constraints.divisor {self.divisor} conflicts with {host}'s grid of runnable batches "
                f"(multiples of {divisor}): the schedule's batches become multiples of {div}"
            )
        group = self.group_size
        if group_size is not None and group % group_size:
            group = math.lcm(group, group_size)
            notes.append(
                f"constraints.group_size {self.group_size} is not a multiple of {host}'s group size "
                f"{group_size}: batches become whole groups of {group}"
            )
        top = self.max_batch if max_batch is None else min(max_batch, self.max_batch or max_batch)
        multiple = math.lcm(group, div)
        low = -(-self.min_batch // multiple) * multiple
        if top is not None and low > top:
            notes.append(
                f"no batch on {host}'s grid (multiples of {multiple}) lies in [{self.min_batch}, {top}]: "
                f"max_batch becomes {low}"
            )
            top = low
        merged = BatchConstraints(
            group_size=group, min_batch=self.min_batch, max_batch=top, divisor=None if div == 1 else div
        )
        return merged, notes

    @classmethod
    def from_dict(
        cls, d: Mapping[str, Any] | None, *, source: str | None = None, prefix: str = "constraints."
    ) -> BatchConstraints:
        """From a config mapping; unknown or invalid fields raise ConfigError naming them."""
        if d is None:
            return cls()
        if not isinstance(d, Mapping):
            raise ConfigError(
                f"must be a mapping, got {type(d).__name__}", source=source, field=prefix.rstrip(".")
            )
        for k in d:
            if k not in _FIELDS:
                raise ConfigError(
                    f"unknown key (allowed: {', '.join(_FIELDS)})", source=source, field=prefix + str(k)
                )
        kw = {k: d[k] for k in _FIELDS if k in d}
        # validate with the source and prefix before the dataclass validates without them
        probe = object.__new__(cls)
        for k in _FIELDS:
            object.__setattr__(probe, k, kw.get(k, getattr(cls, k)))
        probe.validate(source=source, prefix=prefix)
        return cls(**kw)
