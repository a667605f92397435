"""Following a log that is still being written: :class:`LogFollower`.

Each :meth:`LogFollower.poll` reads the log up to its last complete line (a line still being
written is left for the next poll), with the same readers as finished logs, and returns the
records that are new since the previous poll. What a poll returns therefore uses only the lines
written so far: reading a finished log poll by poll gives what a live watch would have seen.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from dataclasses import replace
from pathlib import Path

from rlvr_schedule.errors import DamagedLogError, IngestError
from rlvr_schedule.ingest.load import detect_format, load_run
from rlvr_schedule.ingest.options import ReadOptions
from rlvr_schedule.ingest.tb import event_files, is_event_file
from rlvr_schedule.ingest.textio import check_regular, is_gzip
from rlvr_schedule.ingest.wandb_run import wandb_run_file
from rlvr_schedule.records import Run, StepRecord

__all__ = ["LogFollower"]


class LogFollower:
    """Re-reads ``path`` as it grows; ``poll()`` -> the new records (possibly none).

    ``run`` is the run as read at the last poll; ``error`` the reader's complaint about the
    current snapshot (a log that does not yet hold a complete record, or a config not yet
    printed); ``warnings`` every distinct ingest warning so far, in order.
    """

    def __init__(self, path: str | os.PathLike[str], options: ReadOptions | None = None) -> None:
        self.path = Path(path)
        self.options = options or ReadOptions()
        self.run: Run | None = None
        self.error: str | None = None
        self.warnings: list[str] = []
        self.lines = 0  # complete lines read so far (files)
        self._size = -1
        self._samples = -1
        self._tmp = Path(tempfile.mkdtemp(prefix="rlvr-watch-"))

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> LogFollower:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _size_now(self) -> int:
        run_file = wandb_run_file(self.path)
        if run_file is not None:
            return run_file.stat().st_size
        if self.path.is_dir():
            return sum(f.stat().st_size for f in event_files(self.path))
        if not os.path.lexists(self.path):
            return -1
        return check_regular(self.path).st_size

    def _snapshot(self) -> Path:
        """The log up to its last complete line, as a file of the same name (for format detection)."""
        if (
            self.path.is_dir()
            or is_gzip(self.path)
            or self.path.suffix == ".wandb"
            or is_event_file(self.path)
        ):
            return self.path  # event files, W&B run files and .gz are read whole (readers skip a torn tail)
        with open(self.path, "rb") as fh:
            data = fh.read()
        cut = data.rfind(b"\n")
        data = data[: cut + 1] if cut >= 0 else b""
        self.lines = data.count(b"\n")
        snap = self._tmp / self.path.name
        snap.write_bytes(data)
        return snap

    def poll(self) -> list[StepRecord]:
        """Read what has been written since the last poll; the records that are new."""
        size = self._size_now()
        if size == self._size:
            return []
        self._size = size
        if size < 0:
            self.error = f"{self.path}: no such file (yet)"
            return []
        snap = self._snapshot()
        opts = self.options
        try:
            if opts.format is None and snap.stat().st_size > 0:
                opts = replace(opts, format=detect_format(snap))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                run = load_run(snap, name=self._name(), options=opts)
        except DamagedLogError as exc:  # appending cannot mend it: stop, do not wait
            raise DamagedLogError(str(exc).replace(str(snap), str(self.path))) from None
        except IngestError as exc:
            self.error = str(exc).replace(str(snap), str(self.path))
            return []
        except (OSError, EOFError) as exc:
            self.error = f"{self.path}: {exc}"
            return []
        self.options = opts
        self.error = None
        for w in caught:
            msg = str(w.message).replace(str(snap), str(self.path))
            if msg not in self.warnings:
                self.warnings.append(msg)
        run.source = str(self.path)
        self.run = run
        new = [r for r in run.records if r.samples > self._samples]
        if new:
            self._samples = new[-1].samples
        return new

    def _name(self) -> str:
        name = self.path.name
        for suffix in (".gz", ".log", ".txt", ".jsonl", ".json", ".csv"):
            name = name.removesuffix(suffix)
        return name or self.path.name
