"""Pick the reader for a path: ``load_run`` (one run) and ``load_runs`` (a sweep).

By suffix: ``.jsonl``/``.ndjson``/``.json`` -> JSONL, ``.csv``/``.tsv`` -> CSV, an event file
(``*tfevents*``) or a directory holding event files -> TensorBoard. Other files are sniffed
(a first character ``{`` means JSONL). A directory of several runs (event-file subdirectories,
JSONL/CSV files) is one run per entry for :func:`load_runs` and an error for :func:`load_run`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from rlvr_schedule.errors import IngestError
from rlvr_schedule.ingest.csv_log import read_csv
from rlvr_schedule.ingest.jsonl import read_jsonl
from rlvr_schedule.ingest.tb import event_files, is_event_file, read_tensorboard
from rlvr_schedule.records import Run

__all__ = ["load_run", "load_runs", "find_runs", "reader_for"]

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
CSV_SUFFIXES = (".csv", ".tsv")

Reader = Callable[..., Run]


def reader_for(path: str | os.PathLike[str]) -> Reader:
    """The reader function for one file or TensorBoard run directory."""
    p = Path(path)
    if not p.exists():
        raise IngestError("no such file or directory", source=str(p))
    if p.is_dir():
        if event_files(p):
            return read_tensorboard
        raise IngestError("directory holds no TensorBoard event files (use load_runs for a directory of "
                          "several runs)", source=str(p))
    suffix = p.suffix.lower()
    if is_event_file(p):
        return read_tensorboard
    if suffix in JSONL_SUFFIXES:
        return read_jsonl
    if suffix in CSV_SUFFIXES:
        return read_csv
    with open(p, "rb") as fh:
        head = fh.read(4096).lstrip()
    if head.startswith(b"{"):
        return read_jsonl
    if not head:
        raise IngestError("empty file", source=str(p))
    raise IngestError(f"unknown log format (suffix {suffix or 'none'!r}; expected JSONL, CSV or TensorBoard)",
                      source=str(p))


def find_runs(path: str | os.PathLike[str]) -> list[Path]:
    """The runs under a directory: event-file directories (at any depth) and JSONL/CSV files."""
    p = Path(path)
    if not p.is_dir():
        return [p]
    if event_files(p):
        return [p]
    found: list[Path] = []
    for root, dirs, files in os.walk(p):
        dirs.sort()
        rp = Path(root)
        if rp != p and any(is_event_file(f) for f in files):
            found.append(rp)
            dirs[:] = []  # a run directory's subdirectories belong to it
            continue
        for f in sorted(files):
            if f.lower().endswith(JSONL_SUFFIXES + CSV_SUFFIXES):
                found.append(rp / f)
    return found


#: File stems that name a log's kind, not its run (``runs/batch64/metrics.jsonl`` is run ``batch64``).
GENERIC_STEMS = frozenset({"metrics", "log", "logs", "train", "training", "progress", "scalars", "events",
                           "trainer_state", "history"})


def _run_name(path: Path, base: Path | None) -> str:
    if base is not None and path != base:
        rel = path.relative_to(base)
        if path.is_file() and path.stem.lower() in GENERIC_STEMS and len(rel.parts) > 1:
            return str(rel.parent)
        return str(rel.with_suffix("") if path.is_file() else rel)
    if path.is_file():
        if is_event_file(path) or path.stem.lower() in GENERIC_STEMS:
            return path.parent.name or path.stem
        return path.stem
    return path.name


def load_run(path: str | os.PathLike[str], *, name: str | None = None,
             aliases: Mapping[str, str] | None = None) -> Run:
    """Read one run from a JSONL, CSV or TensorBoard log (the format picked by suffix/content).

    A directory holding exactly one run (e.g. HF Trainer's ``runs/<date>/``) is read as that run.
    """
    p = Path(path)
    if p.is_dir() and not event_files(p):
        runs = find_runs(p)
        if len(runs) == 1:
            p = runs[0]
        elif runs:
            listed = ", ".join(str(r) for r in runs[:5]) + (" ..." if len(runs) > 5 else "")
            raise IngestError(f"directory holds {len(runs)} runs ({listed}); use load_runs", source=str(path))
    reader = reader_for(p)
    return reader(p, name=name or _run_name(p, None), aliases=aliases)


def load_runs(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], *,
              aliases: Mapping[str, str] | None = None) -> list[Run]:
    """Read several runs (a sweep): each path a run, a directory of runs expanded in name order."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    runs: list[Run] = []
    for path in paths:
        base = Path(path)
        members = find_runs(base)
        if not members:
            raise IngestError("no logs found (JSONL, CSV or TensorBoard event files)", source=str(base))
        for member in members:
            name = _run_name(member, base if base.is_dir() and member != base else None)
            runs.append(reader_for(member)(member, name=name, aliases=aliases))
    return runs
