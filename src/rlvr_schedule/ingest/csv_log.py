"""CSV/TSV logs with a header row (spreadsheet exports, W&B/TensorBoard CSV downloads).

Empty or missing cells mean "not logged at this step"; more cells than header names is an error
naming the line. ``.tsv`` files are tab-separated; ``.gz`` files are read compressed.

W&B exports come in two layouts: the run-history export (one column per metric, ``_step`` and
``_runtime``; written through pandas it may lead with an unnamed index column, which is dropped),
and the chart/panel export (``Step,<run> - <key>,<run> - <key>__MIN,<run> - <key>__MAX``), which
can hold several runs: :func:`read_wandb_chart_csv` returns one run per ``<run>``.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from rlvr_schedule.errors import IngestError
from rlvr_schedule.ingest.options import ReadOptions, apply_options, describe_sources
from rlvr_schedule.ingest.stream import RecordStream
from rlvr_schedule.ingest.textio import logical_suffix, open_text
from rlvr_schedule.records import Run

__all__ = ["read_csv", "iter_csv_rows", "read_wandb_chart_csv", "is_wandb_chart_header", "csv_header"]

_CHART_COL = re.compile(r"^(?P<run>.+?) - (?P<key>.+?)(?P<agg>__MIN|__MAX)?$")
_INDEX = "\x00index"  # the unnamed index column pandas writes first


def iter_csv_rows(
    path: str | os.PathLike[str], *, delimiter: str | None = None
) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line number, {column: cell})`` per data row; empty cells are left out."""
    source = str(path)
    if delimiter is None:
        delimiter = "\t" if logical_suffix(path) == ".tsv" else ","
    header: list[str] | None = None
    try:
        with open_text(path, newline="") as fh:
            reader = csv.reader(fh, delimiter=delimiter)
            for row in reader:
                if not any(cell.strip() for cell in row):
                    continue
                if header is None:
                    header = [c.strip() for c in row]
                    if header and header[0] == "" and "" not in header[1:]:
                        header[0] = _INDEX  # pandas' index column: not a metric
                    dup = sorted({c for c in header if header.count(c) > 1})
                    if dup:
                        raise IngestError(
                            f"duplicate column(s) {', '.join(map(repr, dup))} in the header",
                            source=source,
                            line=reader.line_num,
                        )
                    if "" in header:
                        raise IngestError(
                            f"empty column name in the header (column {header.index('') + 1})",
                            source=source,
                            line=reader.line_num,
                        )
                    continue
                if len(row) > len(header):
                    raise IngestError(
                        f"{len(row)} cells but the header names {len(header)} columns",
                        source=source,
                        line=reader.line_num,
                    )
                yield (
                    reader.line_num,
                    {k: c for k, c in zip(header, row, strict=False) if c.strip() and k != _INDEX},
                )
    except UnicodeDecodeError as exc:
        raise IngestError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", source=source) from exc
    except csv.Error as exc:
        raise IngestError(f"malformed CSV: {exc}", source=source) from exc
    if header is None:
        raise IngestError("empty file: no header row", source=source)


def csv_header(path: str | os.PathLike[str]) -> list[str]:
    """The header row's names (empty list for an empty file)."""
    delimiter = "\t" if logical_suffix(path) == ".tsv" else ","
    try:
        with open_text(path, newline="") as fh:
            for row in csv.reader(fh, delimiter=delimiter):
                if any(c.strip() for c in row):
                    return [c.strip() for c in row]
    except (UnicodeDecodeError, csv.Error):
        return []
    return []


def is_wandb_chart_header(header: list[str]) -> bool:
    """True for a W&B chart export: ``Step`` then ``<run> - <key>`` columns."""
    return (
        bool(header)
        and header[0] == "Step"
        and len(header) > 1
        and all(_CHART_COL.match(h) for h in header[1:])
    )


def _stem(path: str | os.PathLike[str]) -> str:
    name = Path(path).name
    for suffix in (".gz", ".csv", ".tsv"):
        name = name.removesuffix(suffix)
    return name


def read_csv(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    aliases: Mapping[str, str] | None = None,
    options: ReadOptions | None = None,
) -> Run:
    """Read a CSV/TSV log into a validated :class:`Run` (framework names mapped by ``aliases``).

    A W&B chart export holding exactly one run is read as that run.
    """
    if is_wandb_chart_header(csv_header(path)):
        runs = read_wandb_chart_csv(path, aliases=aliases, options=options)
        if len(runs) > 1:
            raise IngestError(
                f"W&B chart export with {len(runs)} runs ({', '.join(r.name for r in runs)}); use load_runs",
                source=str(path),
            )
        if name:
            runs[0].name = name
        return runs[0]
    stream = RecordStream(name=name or _stem(path), source=str(path), aliases=aliases)
    for lineno, row in iter_csv_rows(path):
        stream.append(apply_options(row, options, stream.aliases), line=lineno)
    run = stream.to_run()
    run.meta["format"] = "csv"
    describe_sources(run, stream.names, options)
    return run


def read_wandb_chart_csv(
    path: str | os.PathLike[str],
    *,
    aliases: Mapping[str, str] | None = None,
    options: ReadOptions | None = None,
) -> list[Run]:
    """One run per ``<run>`` of a W&B chart export; ``__MIN``/``__MAX`` columns are left out."""
    header = csv_header(path)
    if not is_wandb_chart_header(header):
        raise IngestError("not a W&B chart export (expected 'Step,<run> - <key>,...')", source=str(path))
    names: list[str] = []
    for h in header[1:]:
        m = _CHART_COL.match(h)
        assert m is not None
        if m.group("agg") is None and m.group("run") not in names:
            names.append(m.group("run"))
    streams = {n: RecordStream(name=n, source=f"{path} ({n})", aliases=aliases) for n in names}
    for lineno, row in iter_csv_rows(path):
        step = row.get("Step")
        per_run: dict[str, dict[str, str]] = {}
        for col, cell in row.items():
            m = _CHART_COL.match(col)
            if m is None or m.group("agg") is not None or m.group("run") not in streams:
                continue
            per_run.setdefault(m.group("run"), {})[m.group("key")] = cell
        for run_name, metrics in per_run.items():
            if step is not None:
                metrics["step"] = step
            stream = streams[run_name]
            stream.append(apply_options(metrics, options, stream.aliases), line=lineno)
    runs = []
    for stream in streams.values():
        run = stream.to_run()
        run.meta["format"] = "wandb-chart-csv"
        describe_sources(run, stream.names, options)
        runs.append(run)
    return runs
