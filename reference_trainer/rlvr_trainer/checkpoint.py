"""Atomic checkpoints: model, optimizer, schedule state, RNG streams and the sample counter.

One file, written to ``<path>.tmp`` and moved into place with ``os.replace``: a crash while
saving leaves the previous checkpoint intact. The logs are truncated to the checkpoint's step
on resume, so the resumed run appends exactly the records an uninterrupted one would have.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["save_checkpoint", "load_checkpoint", "truncate_jsonl", "rng_state", "set_rng_state"]

FORMAT = 1


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` (plus the format version and RNG streams) atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"format": FORMAT, "rng": rng_state(), **state}, tmp)
    with open(tmp, "rb") as fh:  # make the bytes durable before the rename publishes them
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (our own file: full unpickling)."""
    state = torch.load(Path(path), map_location="cpu", weights_only=False)
    if state.get("format") != FORMAT:
        raise ValueError(f"{path}: unsupported checkpoint format {state.get('format')!r} (expected {FORMAT})")
    return state


def truncate_jsonl(path: str | Path, last_step: int) -> None:
    """Keep the lines with ``step <= last_step`` (and drop a truncated last line)."""
    path = Path(path)
    if not path.exists():
        return
    keep = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if int(row.get("step", 0)) <= last_step:
            keep.append(line)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(k + "\n" for k in keep))
    os.replace(tmp, path)
