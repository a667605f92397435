"""Pick the reader for a path: ``load_run`` (one run) and ``load_runs`` (a sweep).

:data:`FORMATS` names every reader (``--format NAME`` skips detection). Detection: an event file
(``*tfevents*``) or a directory holding event files -> TensorBoard; ``.csv``/``.tsv`` -> CSV (a W&B
chart export holds one run per ``<run> - key`` column group); ``.jsonl``/``.ndjson``/``.json`` ->
JSON(L) (``trainer_state.json``, lists of dicts, verl's file logger); a W&B run directory or
``.wandb`` file -> W&B (:mod:`.wandb_run`); any other file by its content:
verl ``step:N - key:value`` lines, a TRL/transformers console log (``{'loss': ...}`` dicts, the
``***** Running training *****`` header), or JSON lines. ``.gz`` of any file is read compressed.
A directory of several runs (event-file subdirectories, log files) is one run per entry for
:func:`load_runs` and an error for :func:`load_run`. A console log holding several training runs
(:mod:`.runsplit`) is each of them for :func:`load_runs` and its last one (warned) for
:func:`load_run`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rlvr_schedule.errors import IngestError
from rlvr_schedule.ingest.console import (
    looks_like_trl_console,
    looks_like_verl_console,
    read_trl_console,
    read_trl_console_runs,
    read_verl_console,
    read_verl_console_runs,
)
from rlvr_schedule.ingest.csv_log import csv_header, is_wandb_chart_header, read_csv, read_wandb_chart_csv
from rlvr_schedule.ingest.jsonl import read_jsonl
from rlvr_schedule.ingest.options import ReadOptions
from rlvr_schedule.ingest.tb import event_files, is_event_file, read_tensorboard
from rlvr_schedule.ingest.textio import LogText, check_regular, logical_suffix, read_head
from rlvr_schedule.ingest.wandb_run import is_wandb_run, read_wandb_run
from rlvr_schedule.records import Run

__all__ = ["FORMATS", "Format", "detect_format", "load_run", "load_runs", "find_runs", "reader_for"]

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
CSV_SUFFIXES = (".csv", ".tsv")
CONSOLE_SUFFIXES = (".log", ".txt", ".out")

Reader = Callable[..., Run]
RunsReader = Callable[..., list[Run]]


@dataclass(frozen=True)
class Format:
    """A log format: its reader and what one record of it needs (for ``--help`` and errors)."""

    name: str
    reader: Reader
    what: str
    needs: str
    #: reads every run of a file that can hold several (a list of runs); None: one run a file
    runs_reader: RunsReader | None = None


def _read_wandb(path: str | os.PathLike[str], **kw: Any) -> Run:
    """A W&B run, its console output read by :func:`load_run` where it logged no history."""
    return read_wandb_run(path, console=load_run, **kw)


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format(
            "jsonl",
            read_jsonl,
            "JSON lines: this library's records, TRL/OpenRLHF metric dicts, verl's "
            'file logger ({"step": N, "data": {...}})',
            "a reward, and batch or a rollout count (or --batch)",
        ),
        Format(
            "trainer-state",
            read_jsonl,
            "HF Trainer trainer_state.json (log_history) or a JSON list of metric dicts",
            "a reward per entry and --batch (the completions per optimizer update)",
        ),
        Format(
            "csv",
            read_csv,
            "CSV/TSV with a header: W&B run-history export (pandas index column allowed), "
            "spreadsheet exports",
            "a reward column, and batch or a rollout count (or --batch)",
        ),
        Format(
            "wandb-chart",
            read_csv,
            "W&B chart/panel export: Step,<run> - key,<run> - key__MIN,...; one run per <run>",
            "a reward panel and --batch",
        ),
        Format(
            "tensorboard",
            read_tensorboard,
            "TensorBoard event files or a run directory (HF train/*, OpenRLHF, verl, rlvr/* tags)",
            "a reward tag, and batch or a rollout count (or --batch)",
        ),
        Format(
            "verl-console",
            read_verl_console,
            "verl console log (tee train.log): step:N - key:value lines, "
            "Ray prefixes, colour codes; batch = data.train_batch_size x rollout.n from the printed "
            "config or command line",
            "critic/score/mean; the config print or --batch",
            read_verl_console_runs,
        ),
        Format(
            "trl-console",
            read_trl_console,
            "TRL/transformers console log (python train.py > train.log): "
            "{'loss': ...} dicts, tqdm bars, the ***** Running training ***** header",
            "reward; the header (log_level='info') or --batch",
            read_trl_console_runs,
        ),
        Format(
            "wandb",
            _read_wandb,
            "W&B run directory (wandb/run-*, wandb/offline-run-*) or its .wandb file, read with the "
            "wandb package (pip install 'rlvr-schedule[wandb]'); a run with no history is read from "
            "its console output (files/output.log)",
            "a reward metric; the batch from the run's console header or config, or --batch",
        ),
    )
}


def detect_format(path: str | os.PathLike[str]) -> str:
    """The :data:`FORMATS` name for one file or run directory (raises :class:`IngestError`)."""
    p = Path(path)
    check_regular(p)  # missing, a FIFO, a device, a symlink loop: each its own error
    if p.is_dir():
        if event_files(p):
            return "tensorboard"
        if is_wandb_run(p):
            return "wandb"
        raise IngestError(
            "directory holds no TensorBoard event files (use load_runs for a directory of several runs)",
            source=str(p),
        )
    if is_event_file(p):
        return "tensorboard"
    if p.suffix == ".wandb":
        return "wandb"
    suffix = logical_suffix(p)
    if suffix in CSV_SUFFIXES:
        return "wandb-chart" if is_wandb_chart_header(csv_header(p)) else "csv"
    head = read_head(p)
    if suffix in JSONL_SUFFIXES:
        if suffix == ".json" and (head.lstrip().startswith("[") or '"log_history"' in head):
            return "trainer-state"
        return "jsonl"
    if not head.strip():
        _raise_read_fault(p)
        raise IngestError("empty file", source=str(p))
    if _is_record_jsonl(head):
        return "jsonl"
    if looks_like_verl_console(head) or _contains(p, "step:", looks_like_verl_console):
        return "verl-console"
    if looks_like_trl_console(head) or _contains(p, "{'", looks_like_trl_console):
        return "trl-console"
    if head.lstrip().startswith("{"):
        return "jsonl"
    if "," in head.splitlines()[0] and len(head.splitlines()) > 1:
        return "csv"
    _raise_read_fault(p)
    raise IngestError(
        f"unknown log format (suffix {suffix or 'none'!r}); name it with --format ({', '.join(FORMATS)})",
        source=str(p),
    )


def _raise_read_fault(p: Path) -> None:
    """A file no reader recognises: if reading it fails (a cut gzip stream, an endless line, bytes
    that are not UTF-8), that fault is the error, not "unknown format"."""
    with LogText(p) as fh:
        for _ in fh:
            pass


def _is_record_jsonl(head: str) -> bool:
    """JSON lines that carry their own step/rollout counts (this library's logs, any .log name)."""
    first = next((ln for ln in head.splitlines() if ln.strip()), "")
    try:
        obj = json.loads(first)
    except ValueError:
        return False
    return isinstance(obj, dict) and any(
        k in obj for k in ("step", "samples", "batch", "global_step", "kind")
    )


def _contains(p: Path, needle: str, check: Callable[[str], bool]) -> bool:
    """Sniff further than the head: a console log can start with many lines of setup output."""
    try:
        head = read_head(p, 4_000_000)
    except IngestError:
        return False
    i = head.find(needle)
    return i >= 0 and check(head[max(0, i - 200) : i + 2000])


def reader_for(path: str | os.PathLike[str], format: str | None = None) -> Reader:
    """The reader function for one file or TensorBoard run directory."""
    name = format or detect_format(path)
    try:
        return FORMATS[name].reader
    except KeyError:
        raise IngestError(
            f"unknown format {name!r}; formats: {', '.join(FORMATS)}", field="--format"
        ) from None


def find_runs(path: str | os.PathLike[str]) -> list[Path]:
    """The runs under a directory: event-file directories (at any depth) and log files."""
    p = Path(path)
    if not p.is_dir():
        return [p]
    if event_files(p) or is_wandb_run(p):
        return [p]
    found: list[Path] = []
    suffixes = JSONL_SUFFIXES + CSV_SUFFIXES + CONSOLE_SUFFIXES
    for root, dirs, files in os.walk(p):
        dirs.sort()
        rp = Path(root)
        if rp != p and (any(is_event_file(f) for f in files) or is_wandb_run(rp)):
            found.append(rp)
            dirs[:] = []  # a run directory's subdirectories belong to it
            continue
        if RUN_LOG in files and "config.json" in files:  # a trainer's run directory: its config and
            found.append(rp / RUN_LOG)  # decisions are no runs
            continue
        for f in sorted(files):
            link = rp / f
            if link.is_symlink() and _resolves_into(link, p):
                continue  # a link into the tree (W&B's debug.log): its target is found, or not a run
            if f.lower().removesuffix(".gz").endswith(suffixes) and not _is_settings_json(rp / f):
                found.append(rp / f)
    return found


def _resolves_into(link: Path, root: Path) -> bool:
    """A link whose target lies in ``root``; a loop or a dangling link is kept (reading names it)."""
    try:
        return link.resolve(strict=True).is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        return False


#: The log of a run directory as ``rlvr-trainer`` writes it (beside config.json, decisions.jsonl): in a
#: directory holding both it and config.json, the one run.
RUN_LOG = "metrics.jsonl"


def _is_settings_json(path: Path) -> bool:
    """A ``.json`` file holding one indented object (a run's config, a report's summary): no log.
    A JSON-lines log holds an object per line; ``trainer_state.json`` holds ``log_history``."""
    if logical_suffix(path) != ".json":
        return False
    head = read_head(path, 4096)
    return head.lstrip().split("\n", 1)[0].strip() == "{" and '"log_history"' not in head


#: File stems that name a log's kind, not its run (``runs/batch64/metrics.jsonl`` is run ``batch64``).
GENERIC_STEMS = frozenset(
    {
        "metrics",
        "log",
        "logs",
        "train",
        "training",
        "progress",
        "scalars",
        "events",
        "trainer_state",
        "history",
        "output",
        "console",
        "stdout",
    }
)


def _stem(path: Path) -> str:
    name = path.name
    if name.lower().endswith(".gz"):
        name = name[:-3]
    return Path(name).stem


#: A W&B run directory: ``[offline-]run-<date>_<time>-<run id>``.
_WANDB_DIR = re.compile(r"^(?:offline-)?run-\d{8}_\d{6}-(?P<id>[A-Za-z0-9]+)$")


def _wandb_file_run(path: Path) -> str | None:
    """``run-<id>`` (the W&B reader's name) for a file in a W&B run's ``files/`` (its console
    ``output.log``, ``wandb-summary.json``), where every run's file has the same name."""
    if not path.is_file() or path.parent.name != "files":
        return None
    m = _WANDB_DIR.match(path.resolve().parent.parent.name)
    return f"run-{m.group('id')}" if m else None


def _run_name(path: Path, base: Path | None) -> str:
    if path.is_dir() and is_wandb_run(path):
        return path.resolve().name  # wandb/latest-run is offline-run-<date>-<id>
    if _stem(path).lower() in GENERIC_STEMS and (wandb := _wandb_file_run(path)) is not None:
        return wandb
    if base is not None and path != base:
        rel = path.relative_to(base)
        if path.is_file() and _stem(path).lower() in GENERIC_STEMS and len(rel.parts) > 1:
            return str(rel.parent)
        return str(rel.parent / _stem(path)) if path.is_file() else str(rel)
    if path.is_file():
        if is_event_file(path) or _stem(path).lower() in GENERIC_STEMS:
            return path.parent.name or _stem(path)
        return _stem(path)
    return path.name


def _options(options: ReadOptions | None, aliases: Mapping[str, str] | None) -> ReadOptions:
    opts = options or ReadOptions()
    if aliases is not None and opts.aliases is None:
        opts = replace(opts, aliases=aliases)
    return opts


def _read(path: Path, name: str, opts: ReadOptions, every_run: bool = True) -> list[Run]:
    """The runs of one file: every run it holds, or (``every_run=False``) its last one."""
    fmt = opts.format or detect_format(path)
    if fmt not in FORMATS:
        raise IngestError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}", field="--format")
    if fmt == "wandb-chart":
        runs = read_wandb_chart_csv(path, aliases=opts.aliases, options=opts)
        if len(runs) == 1:
            runs[0].name = name
        return runs
    f = FORMATS[fmt]
    if every_run and f.runs_reader is not None:
        runs = f.runs_reader(path, name=name, aliases=opts.aliases, options=opts)
    else:
        runs = [f.reader(path, name=name, aliases=opts.aliases, options=opts)]
    for run in runs:
        run.meta.setdefault("format", fmt)
    return runs


def load_run(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    aliases: Mapping[str, str] | None = None,
    options: ReadOptions | None = None,
) -> Run:
    """Read one run from any :data:`FORMATS` log (picked by suffix/content, or ``options.format``).

    A directory holding exactly one run (e.g. HF Trainer's ``runs/<date>/``) is read as that run.
    """
    p = Path(path)
    check_regular(p)
    if p.is_dir() and not event_files(p) and not is_wandb_run(p):
        runs = find_runs(p)
        if len(runs) == 1:
            p = runs[0]
        elif runs:
            listed = ", ".join(str(r) for r in runs[:5]) + (" ..." if len(runs) > 5 else "")
            raise IngestError(f"directory holds {len(runs)} runs ({listed}); use load_runs", source=str(path))
    got = _read(p, name or _run_name(p, None), _options(options, aliases), every_run=False)
    if len(got) != 1:
        raise IngestError(
            f"file holds {len(got)} runs ({', '.join(r.name for r in got)}); use load_runs", source=str(path)
        )
    return got[0]


def load_runs(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    aliases: Mapping[str, str] | None = None,
    options: ReadOptions | None = None,
) -> list[Run]:
    """Read several runs (a sweep): each path a run, a directory of runs expanded in name order.

    The same file given twice (also through a directory) is refused: it would count one run twice.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    opts = _options(options, aliases)
    runs: list[Run] = []
    seen: dict[Path, str] = {}
    for path in paths:
        base = Path(path)
        check_regular(base)
        members = find_runs(base)
        if not members:
            raise IngestError(
                "no logs found (JSONL, CSV, console logs or TensorBoard event files)", source=str(base)
            )
        for member in members:
            check_regular(member)
            key = member.resolve()
            if key in seen:
                raise IngestError(
                    f"given twice (also as {seen[key]}): each run once, please", source=str(member)
                )
            seen[key] = str(member)
            name = _run_name(member, base if base.is_dir() and member != base else None)
            runs.extend(_read(member, name, opts))
    return runs
