"""Atomic, safe checkpoints: model, optimizer, schedule state, RNG streams and the sample counter.

One file, written to ``<path>.tmp``, made durable, then published with ``os.replace``; the checkpoint
it replaces is kept as ``<path>.prev`` until the next save, so there is always one whole checkpoint:
a crash while saving leaves the previous one intact, and a checkpoint damaged later (cut by a full
disk or a bad copy, zero bytes) is named and :func:`load_latest_checkpoint` falls back to the one
before it. The logs are cut back to the loaded checkpoint's step on resume (a torn last line, what a
power cut leaves, dropped with a warning that counts its bytes), so the resumed run appends exactly
the records an uninterrupted one would have.

Loading never runs code from the file: it is read with ``torch.load(weights_only=True)``, which
accepts tensors, numbers, strings, lists, tuples and dicts only. Everything that is not a tensor
state (schedule state, counters, config, the Python and NumPy RNG states) travels as one JSON
text; tensor states (model, optimizer, torch RNG, and on CUDA every device's RNG) as tensors. A checkpoint from someone else is
therefore data, not a program: a pickle that would call anything is refused.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import random
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlvr_schedule.errors import RlvrScheduleError

__all__ = [
    "save_checkpoint",
    "load_checkpoint",
    "load_latest_checkpoint",
    "previous_path",
    "repair_torn_tail",
    "truncate_jsonl",
    "rng_state",
    "set_rng_state",
    "CheckpointError",
    "convert_legacy_checkpoint",
]

FORMAT = 2

log = logging.getLogger(__name__)


def previous_path(path: str | Path) -> Path:
    """Where the checkpoint before ``path`` is kept (``checkpoint.pt.prev``)."""
    path = Path(path)
    return path.with_name(path.name + ".prev")


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
    if path.exists():  # the last good one stays until the new one is whole and in place
        os.replace(path, previous_path(path))
    os.replace(tmp, path)
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` without running code from it."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read checkpoint ({exc.strerror or exc})") from None
    if size == 0:
        raise CheckpointError(f"{path}: empty checkpoint (0 bytes; a save cut short?)")
    with open(path, "rb") as fh:
        is_zip = fh.read(4) == b"PK\x03\x04"  # torch.save's format: a zip archive
    if is_zip and not zipfile.is_zipfile(path):
        raise CheckpointError(
            f"{path}: damaged checkpoint: truncated or corrupt ({size} bytes, its zip directory missing; a "
            "save cut short or a bad copy?)"
        )
    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if not is_zip or "weights only" not in str(exc).lower():
            raise CheckpointError(
                f"{path}: not a checkpoint: neither torch's zip format nor readable "
                f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
            ) from None
        raise CheckpointError(
            f"{path}: refused to load: the file asks to run code or build objects other than tensors and "
            f"plain data ({str(exc).splitlines()[-1] if str(exc) else type(exc).__name__}). Checkpoints "
            "written before the safe format (format 1) can be converted, if you trust the file, with "
            "rlvr_trainer.checkpoint.convert_legacy_checkpoint"
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile) as exc:  # a damaged archive
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CheckpointError(f"{path}: damaged checkpoint ({size} bytes): {msg}") from None
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


def load_latest_checkpoint(path: str | Path) -> tuple[dict[str, Any], Path]:
    """``(state, file read)``: ``path``, or, if it is missing or damaged, the one saved before it
    (``<path>.prev``) with a warning naming the damage; :class:`CheckpointError` naming both files
    when neither loads."""
    path = Path(path)
    prev = previous_path(path)
    try:
        return load_checkpoint(path), path
    except CheckpointError as exc:
        if not prev.exists():
            raise
        first = str(exc)
    try:
        state = load_checkpoint(prev)
    except CheckpointError as exc:
        raise CheckpointError(f"{first}; and the one before it: {exc}") from None
    log.warning("%s; resuming from the checkpoint before it, %s (step %s)", first, prev, state.get("step"))
    return state, prev


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


def repair_torn_tail(path: str | Path) -> int:
    """Cut a torn last line (no newline, or not JSON: a disk-full or power cut mid-write) from a
    JSONL log, with a warning that counts the bytes dropped; the bytes dropped (0: none)."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError:
        return 0
    if size == 0:
        return 0
    with open(path, "rb+") as fh:
        fh.seek(max(0, size - (1 << 20)))
        tail = fh.read()
        body = tail[:-1] if tail.endswith(b"\n") else tail
        start = body.rfind(b"\n") + 1  # the last line (within the last MiB)
        last = body[start:]
        torn = not tail.endswith(b"\n")
        if not torn and last.strip():
            try:
                json.loads(last)
            except ValueError:
                torn = True
        if not torn:
            return 0
        cut = size - len(tail) + start
        fh.truncate(cut)
    dropped = size - cut
    log.warning("%s: cut a torn last line (%d bytes dropped; a write cut short)", path, dropped)
    return dropped


def truncate_jsonl(path: str | Path, last_step: int) -> None:
    """Keep the lines with ``step <= last_step`` (a torn last line is cut first, with a warning)."""
    path = Path(path)
    if not path.exists():
        return
    repair_torn_tail(path)
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
