"""Append-safe JSONL writing: one whole, flushed line per record.

Each line goes out in a single ``write`` on a file opened for appending, so a killed run leaves
at most one truncated last line (the reader skips it with a warning) and reopening a log after
such a crash first cuts that partial line, so the next record does not glue onto it.
"""

from __future__ import annotations

import json
import math
import os
import threading
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from rlvr_schedule.errors import IngestWarning
from rlvr_schedule.records import StepRecord

__all__ = ["JsonlWriter", "write_jsonl", "record_line"]


def record_line(record: StepRecord | Mapping[str, Any]) -> str:
    """One JSON line (with newline) for a record; non-finite floats are left out (not logged)."""
    d = record.to_dict() if isinstance(record, StepRecord) else dict(record)
    d = {k: v for k, v in d.items() if not (isinstance(v, float) and not math.isfinite(v))}
    return json.dumps(d, allow_nan=False) + "\n"


def _cut_partial_last_line(path: Path) -> None:
    """Truncate a trailing line without newline (a crash mid-write), with a warning."""
    size = path.stat().st_size
    if size == 0:
        return
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        # find the last newline, reading backwards in blocks
        pos, block, cut = size, 65536, 0
        while pos > 0:
            start = max(0, pos - block)
            fh.seek(start)
            chunk = fh.read(pos - start)
            i = chunk.rfind(b"\n")
            if i >= 0:
                cut = start + i + 1
                break
            pos = start
        fh.seek(0)
        nlines = fh.read(cut).count(b"\n")
        fh.truncate(cut)
    warnings.warn(
        f"{path}:{nlines + 1}: cut a truncated last line ({size - cut} bytes) before appending",
        IngestWarning,
        stacklevel=3,
    )


class JsonlWriter:
    """Append :class:`StepRecord` s to a JSONL file, one flushed line each.

    ``fsync=True`` also syncs each line to disk (survives a power loss, costs a syscall per
    record). Usable as a context manager; safe to share between threads.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        if self.path.exists():
            _cut_partial_last_line(self.path)
        self._fh = open(self.path, "ab", buffering=0)
        self._lock = threading.Lock()

    def write(self, record: StepRecord | Mapping[str, Any]) -> None:
        data = record_line(record).encode("utf-8")
        with self._lock:
            self._fh.write(data)  # unbuffered: one write(2) per line, O_APPEND
            if self.fsync:
                os.fsync(self._fh.fileno())

    append = write

    def write_all(self, records: Iterable[StepRecord | Mapping[str, Any]]) -> None:
        for r in records:
            self.write(r)

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    @property
    def closed(self) -> bool:
        return self._fh.closed

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JsonlWriter({str(self.path)!r})"


def write_jsonl(
    path: str | os.PathLike[str],
    records: Iterable[StepRecord | Mapping[str, Any]],
    *,
    append: bool = False,
    fsync: bool = False,
) -> Path:
    """Write records as JSON lines (replacing the file unless ``append``); returns the path."""
    p = Path(path)
    if not append and p.exists():
        p.unlink()
    with JsonlWriter(p, fsync=fsync) as w:
        w.write_all(records)
    return p
