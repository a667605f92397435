"""Following a log that is still being written: :class:`LogFollower`.

Each :meth:`LogFollower.poll` reads the log up to its last complete line (a line still being
written is left for the next poll), with the same readers as finished logs, and returns the
records that are new since the previous poll. What a poll returns therefore uses only the lines
written so far: reading a finished log poll by poll gives what a live watch would have seen.

A text log is read through one open file, not by its name, so log rotation loses nothing:

- renamed away (``mv train.log train.log.1``, a new ``train.log`` in its place): the old file is read
  to its end first, then the new one is followed, as the same run;
- truncated in place (copy-truncate): the bytes written between the last read and the truncation
  are read from the copy beside it (``train.log.1``, ``train.log-<date>``) when one holds them; if
  not, their count, where it is known, is reported as lost;
- a run restarted from step 1 in the same file: read as a new run (:attr:`LogFollower.new_runs`);
- deleted (and not replaced by the next poll): :attr:`LogFollower.deleted`, which ``watch`` reports
  once and exits on with status 4.

Each is said once, in :attr:`LogFollower.warnings`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

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
        self.new_runs = 0  # restarts from step 1 seen (each read as a new run)
        self.deleted = False  # the log was deleted and not replaced
        self._size = -1
        self._samples = -1
        self._first: tuple | None = None  # the current run's first record (step, samples)
        self._tmp = Path(tempfile.mkdtemp(prefix="rlvr-watch-"))
        self._fh: Any = None  # the text log being followed, open (rotation cannot take it away)
        self._ino: tuple[int, int] | None = None
        self._buf = bytearray()  # what was read of it
        self._missing = 0  # polls in a row that found no file at the path
        self._pending_switch = False  # rotated: the old file's last records go out before switching
        self._prefix = b""  # records from before a truncation in place (still this run's)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _say(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def _text_mode(self) -> bool:
        p = self.path
        return not (p.is_dir() or is_gzip(p) or p.suffix == ".wandb" or is_event_file(p))

    def _open(self) -> None:
        self._fh = open(self.path, "rb")  # noqa: SIM115 - kept open across polls, closed by close()
        st = os.fstat(self._fh.fileno())
        self._ino = (st.st_dev, st.st_ino)
        self._buf = bytearray()

    def _drain(self) -> None:
        while True:
            chunk = self._fh.read(1 << 20)
            if not chunk:
                return
            self._buf += chunk

    def _follow_text(self) -> int:
        """Read what the open file gained, handling rotation, truncation and deletion; the size read
        (-1: no file yet, or deleted)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            st = None
        if self._fh is None:
            if st is None:
                return -1
            check_regular(self.path)
            self._open()
        elif st is None or (st.st_dev, st.st_ino) != self._ino:  # renamed away, or deleted
            before = len(self._buf)
            self._drain()  # the old file to its end: nothing written before the rotation is lost
            if st is None:
                self._missing += 1
                if self._missing >= 2 and not self.deleted:
                    self.deleted = True
                    self._say(f"{self.path}: deleted: the watch stops (status 4)")
                return len(self._buf)
            if self._run_pending(before):
                return len(self._buf)  # the old file's last records first; the new file next poll
            self._say(
                f"{self.path}: rotated (renamed away, a new file in its place): read the old file to its "
                "end, following the new one as the same run"
            )
            self._fh.close()
            self._prefix = b""
            check_regular(self.path)
            self._open()
        elif st.st_size < len(self._buf):  # truncated in place (copy-truncate)
            self._truncated(len(self._buf))
        self._missing = 0
        self._drain()
        return len(self._buf)

    def _run_pending(self, before: int) -> bool:
        """The old file gained complete lines in its final read that no poll has returned yet."""
        if len(self._buf) == before:
            return False
        self._pending_switch = True
        return True

    def _truncated(self, read: int) -> None:
        """Copy-truncate: recover what was written after our last read from the copy, if one holds it."""
        partial = read - (self._buf.rfind(b"\n") + 1)
        copy = self._copy_of(bytes(self._buf))
        if copy is not None:
            data = copy.read_bytes()
            extra = data[read:]
            self._say(
                f"{self.path}: truncated in place (copy-truncate): {len(extra)} byte(s) written after the last "
                f"read recovered from its copy {copy.name}; following the file from its start"
            )
            old = bytes(self._buf) + extra
        else:
            self._say(
                f"{self.path}: truncated in place at byte {read} (copy-truncate?) and no copy beside it holds "
                f"what came after: {partial} byte(s) of an unfinished line lost, and any line written after "
                "the last read"
            )
            old = bytes(self._buf)
        cut = old.rfind(b"\n") + 1
        self._prefix = old[:cut]  # the records before the truncation stay part of the run
        self._fh.seek(0)
        self._buf = bytearray()

    def _copy_of(self, head: bytes) -> Path | None:
        """A file beside the log whose content starts with what was read (its rotated copy)."""
        best = None
        for f in self.path.parent.iterdir():
            if f == self.path or not f.name.startswith(self.path.stem) or not f.is_file():
                continue
            try:
                if f.stat().st_size >= len(head) and f.read_bytes()[: len(head)] == head:
                    best = f if best is None or f.stat().st_mtime > best.stat().st_mtime else best
            except OSError:
                continue
        return best

    def __enter__(self) -> LogFollower:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _size_now(self) -> int:
        if self._text_mode() or self._fh is not None:
            return self._follow_text() + len(self._prefix)
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
        if self._fh is None:
            return self.path  # event files, W&B run files and .gz are read whole (readers skip a torn tail)
        data = self._prefix + bytes(self._buf)
        cut = data.rfind(b"\n")
        data = data[: cut + 1] if cut >= 0 else b""
        self.lines = data.count(b"\n")
        snap = self._tmp / self.path.name
        snap.write_bytes(data)
        return snap

    def poll(self) -> list[StepRecord]:
        """Read what has been written since the last poll; the records that are new."""
        if self._pending_switch:  # the rotated file's last records were returned: follow the new one
            self._pending_switch = False
            self._say(
                f"{self.path}: rotated (renamed away, a new file in its place): read the old file to its "
                "end, following the new one as the same run"
            )
            self._fh.close()
            self._prefix = b""
            check_regular(self.path)
            self._open()
        size = self._size_now()
        if self.deleted:
            return []
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
        first = (run.records[0].step, run.records[0].samples) if run.records else None
        if self._first is not None and first is not None and run.records[-1].samples < self._samples:
            if first != self._first or run.meta.get("restarted_at_line"):  # a new run from step 1
                self.new_runs += 1
                at = run.meta.get("restarted_at_line")
                self._say(
                    f"{self.path}{':' + str(at) if at else ''}: the run restarted from step {first[0]}: read "
                    "as a new run"
                )
                self._samples = -1
        self._first = first
        new = [r for r in run.records if r.samples > self._samples]
        if new:
            self._samples = new[-1].samples
        return new

    def _name(self) -> str:
        name = self.path.name
        for suffix in (".gz", ".log", ".txt", ".jsonl", ".json", ".csv"):
            name = name.removesuffix(suffix)
        return name or self.path.name
