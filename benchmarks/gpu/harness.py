"""The GPU check's part API: a registry of named parts, each a function run in its own process.

A parts module (``parts_trainer.py``, ``parts_adapters.py``, ...) declares its parts with
:func:`part`; ``check.py`` imports the modules named in ``check.MODULES``, runs each selected
part in a child process under its own time limit, and appends the part's result to one JSON
file. A part is ``fn(ctx: Context) -> dict``: plain JSON-able data (numbers, strings, lists,
dicts). It may print progress (the child's output is kept in the result's ``log_tail``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Part", "Context", "REGISTRY", "part", "project_root", "sync", "peak_memory"]


@dataclass
class Context:
    """What a part gets: ``device`` ("cuda" where available, else "cpu"), ``small`` (CPU-sized
    shapes, to test the check without a GPU), ``workdir`` (a fresh directory of its own),
    ``project`` (the repository root), ``seconds`` (its time limit)."""

    device: str
    small: bool
    workdir: Path
    project: Path
    seconds: float
    partial: Path | None = None  # where report() keeps the results so far

    @property
    def cuda(self) -> bool:
        return self.device.startswith("cuda")

    def report(self, **values: Any) -> None:
        """Keep results as they come: a part killed at its time limit (or failing later) still
        returns what it reported, under ``partial``."""
        import json

        print("[part] " + json.dumps(values, default=str)[:2000], flush=True)
        if self.partial is None:
            return
        old = json.loads(self.partial.read_text()) if self.partial.exists() else {}
        tmp = self.partial.with_name(self.partial.name + ".tmp")
        tmp.write_text(json.dumps({**old, **values}, default=str))
        os.replace(tmp, self.partial)


@dataclass
class Part:
    name: str  # "<group>.<what>", e.g. "trainer.tiny_run"
    fn: Callable[[Context], dict[str, Any]]
    seconds: float  # its time limit on a GPU (the child is killed after it)
    doc: str = ""
    small_seconds: float | None = None  # its limit with --small (default: 3 x seconds)
    tags: list[str] = field(default_factory=list)

    @property
    def group(self) -> str:
        return self.name.split(".", 1)[0]


REGISTRY: dict[str, Part] = {}


def part(name: str, *, seconds: float, small_seconds: float | None = None):
    """Register ``fn`` as the part ``name`` with a time limit of ``seconds``."""

    def deco(fn: Callable[[Context], dict[str, Any]]) -> Callable[[Context], dict[str, Any]]:
        if name in REGISTRY:
            raise ValueError(f"GPU check part {name!r} registered twice")
        doc = (fn.__doc__ or "").strip().split("\n\n")[0]
        REGISTRY[name] = Part(name, fn, seconds, " ".join(doc.split()), small_seconds)
        return fn

    return deco


def project_root() -> Path:
    return Path(__file__).resolve().parents[2]


def sync(device: str) -> None:
    """Wait for the device (before reading a clock)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def peak_memory(device: str, *, reset: bool = False) -> float | None:
    """Peak allocated GiB since the last reset on CUDA (None on the CPU)."""
    if not device.startswith("cuda"):
        return None
    import torch

    gib = torch.cuda.max_memory_allocated() / 2**30
    if reset:
        torch.cuda.reset_peak_memory_stats()
    return round(gib, 3)


def env_paths() -> None:
    """The project's source directories on ``sys.path`` (the check runs from a plain checkout)."""
    import sys

    root = project_root()
    for sub in ("reference_trainer", "adapters", "src", "benchmarks", "."):
        p = str((root / sub).resolve())
        if p not in sys.path:
            sys.path.insert(0, p)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
