"""Where an update's time goes: seconds per named part, read the same way for any trainer.

On the CPU a part is the monotonic clock (``time.perf_counter``) around it. On CUDA the host
clock measures how long the host took to *enqueue* the work, so each part is also bracketed by
two CUDA events on the current stream, read after the update's own host sync (reading them adds
none). Every part is a ``torch.profiler.record_function`` range too: a profile of an update is
labelled with the same names. Parts may nest (``span`` around the others) and repeat (one
``forward`` per micro-batch): :meth:`PartClock.seconds` sums each name.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["PartClock"]


class PartClock:
    """Seconds per named part of an update: device time (CUDA events) on CUDA, host time elsewhere."""

    def __init__(self, device: Any = "cpu") -> None:
        self.cuda = torch.device(device).type == "cuda"
        self._spans: list[tuple[str, float, float, Any, Any]] = []  # name, host start/end, events

    def _event(self) -> Any:
        if not self.cuda:
            return None
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ev

    def start(self, name: str) -> tuple[str, float, Any]:
        """Open a part that :meth:`stop` closes (for spans that begin and end in different calls)."""
        return name, time.perf_counter(), self._event()

    def stop(self, token: tuple[str, float, Any]) -> None:
        name, h0, e0 = token
        e1 = self._event()
        self._spans.append((name, h0, time.perf_counter(), e0, e1))

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        with torch.profiler.record_function(name):
            token = self.start(name)
            try:
                yield
            finally:
                self.stop(token)

    def host_seconds(self) -> dict[str, float]:
        """Host wall seconds per part (on the CPU, the parts' time)."""
        out: dict[str, float] = {}
        for name, h0, h1, _, _ in self._spans:
            out[name] = out.get(name, 0.0) + (h1 - h0)
        return out

    def seconds(self) -> dict[str, float]:
        """Seconds per part: the CUDA events' device time on CUDA (waits for the last one), else
        the host's."""
        if not self.cuda:
            return self.host_seconds()
        if self._spans:
            self._spans[-1][4].synchronize()
        out: dict[str, float] = {}
        for name, _, _, e0, e1 in self._spans:
            out[name] = out.get(name, 0.0) + e0.elapsed_time(e1) / 1000.0
        return out

    def count(self, name: str) -> int:
        """How many times the part ``name`` ran."""
        return sum(1 for s in self._spans if s[0] == name)
