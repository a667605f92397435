"""Atomic, safe checkpoints: model, optimizer, schedule state, RNG streams and the sample counter.

One file, written to ``<path>.tmp`` and moved into place with ``os.replace``: a crash while
saving leaves the previous checkpoint intact. The logs are truncated to the checkpoint's step
on resume, so the resumed run appends exactly the records an uninterrupted one would have.

Loading never runs code from the file: it is read with ``torch.load(weights_only=True)``, which
accepts tensors, numbers, strings, lists, tuples and dicts only. Everything that is not a tensor
state (schedule state, counters, config, the Python and NumPy RNG states) travels as one JSON
text; tensor states (model, optimizer, torch RNG, and on CUDA every device's RNG) as tensors. A checkpoint from someone else is
therefore data, not a program: a pickle that would call anything is refused.
"""

from __future__ import annotations

import json
import os
import pickle
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlvr_schedule.errors import RlvrScheduleError

__all__ = [
    "save_checkpoint",
    "load_checkpoint",
    "truncate_jsonl",
    "rng_state",
    "set_rng_state",
    "CheckpointError",
    "convert_legacy_checkpoint",
]

FORMAT = 2


class CheckpointError(RlvrScheduleError, ValueError):
    """A checkpoint that cannot be loaded safely or is not ours; names the file."""


def rng_state() -> dict[str, Any]:
    """Python and NumPy streams as JSON-able lists, torch's as its byte tensor."""
    version, internal, gauss = random.getstate()
    key, keys, pos, has_gauss, cached = np.random.get_state()
    out = {
        "python": [version, list(internal), gauss],
        "numpy": [key, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = torch.cuda.get_rng_state_all()  # one byte tensor per device
    return out


def set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    key, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((key, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(list(state["cuda"]))


def _has_tensor(obj: Any) -> bool:
    if isinstance(obj, torch.Tensor):
        return True
    if isinstance(obj, dict):
        return any(_has_tensor(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return any(_has_tensor(v) for v in obj)
    return False


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` (plus the format version and RNG streams) atomically.

    Values holding tensors (state dicts) are stored as such; every other value must be
    JSON-able (``TypeError`` otherwise, before anything is written).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = rng_state()
    tensors = {k: v for k, v in state.items() if _has_tensor(v)}
    tensors["rng_torch"] = rng.pop("torch")
    if "cuda" in rng:
        tensors["rng_cuda"] = rng.pop("cuda")
    plain = {k: v for k, v in state.items() if k not in tensors}
    text = json.dumps({"rng": rng, **plain})  # TypeError on anything that is not plain data
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"format": FORMAT, "json": text, "tensors": tensors}, tmp)
    with open(tmp, "rb") as fh:  # make the bytes durable before the rename publishes them
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` without running code from it."""
    path = Path(path)
    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"{path}: refused to load: the file asks to run code or build objects other than tensors and "
            f"plain data ({str(exc).splitlines()[-1] if str(exc) else type(exc).__name__}). Checkpoints "
            "written before the safe format (format 1) can be converted, if you trust the file, with "
            "rlvr_trainer.checkpoint.convert_legacy_checkpoint"
        ) from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("json"), str):
        got = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
        raise CheckpointError(f"{path}: unsupported checkpoint format {got!r} (expected {FORMAT})")
    state = json.loads(raw["json"])
    tensors = dict(raw["tensors"])
    state["rng"]["torch"] = tensors.pop("rng_torch")
    if "rng_cuda" in tensors:
        state["rng"]["cuda"] = tensors.pop("rng_cuda")
    state.update(tensors)
    return state


def convert_legacy_checkpoint(path: str | Path, out: str | Path | None = None) -> Path:
    """Rewrite a format-1 checkpoint (full pickle) in the safe format. Unpickles ``path`` with
    ``weights_only=False``: only for files you wrote yourself."""
    path = Path(path)
    old = torch.load(path, map_location="cpu", weights_only=False)
    if old.get("format") != 1:
        raise CheckpointError(f"{path}: not a format-1 checkpoint (format {old.get('format')!r})")
    rng = old.pop("rng")
    old.pop("format")
    with torch.random.fork_rng():
        state_py, state_np = random.getstate(), np.random.get_state()
        random.setstate(rng["python"]), np.random.set_state(rng["numpy"]), torch.set_rng_state(rng["torch"])
        try:
            return save_checkpoint(out or path, old)
        finally:
            random.setstate(state_py), np.random.set_state(state_np)


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
