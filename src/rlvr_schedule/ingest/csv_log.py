"""CSV/TSV logs with a header row (spreadsheet exports, W&B/TensorBoard CSV downloads).

Empty or missing cells mean "not logged at this step"; more cells than header names is an error
naming the line. ``.tsv`` files are tab-separated.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from rlvr_schedule.errors import IngestError
from rlvr_schedule.ingest.stream import RecordStream
from rlvr_schedule.records import Run

__all__ = ["read_csv", "iter_csv_rows"]


def iter_csv_rows(path: str | os.PathLike[str], *,
                  delimiter: str | None = None) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line number, {column: cell})`` per data row; empty cells are left out."""
    source = str(path)
    if delimiter is None:
        delimiter = "\t" if Path(path).suffix.lower() == ".tsv" else ","
    header: list[str] | None = None
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh, delimiter=delimiter)
            for row in reader:
                if not any(cell.strip() for cell in row):
                    continue
                if header is None:
                    header = [c.strip() for c in row]
                    dup = sorted({c for c in header if header.count(c) > 1})
                    if dup:
                        raise IngestError(f"duplicate column(s) {', '.join(map(repr, dup))} in the header",
                                          source=source, line=reader.line_num)
                    if "" in header:
                        raise IngestError(f"empty column name in the header (column {header.index('') + 1})",
                                          source=source, line=reader.line_num)
                    continue
                if len(row) > len(header):
                    raise IngestError(f"{len(row)} cells but the header names {len(header)} columns",
                                      source=source, line=reader.line_num)
                yield reader.line_num, {k: c for k, c in zip(header, row, strict=False) if c.strip()}
    except UnicodeDecodeError as exc:
        raise IngestError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", source=source) from exc
    except csv.Error as exc:
        raise IngestError(f"malformed CSV: {exc}", source=source) from exc
    if header is None:
        raise IngestError("empty file: no header row", source=source)


def read_csv(path: str | os.PathLike[str], *, name: str | None = None,
             aliases: Mapping[str, str] | None = None) -> Run:
    """Read a CSV/TSV log into a validated :class:`Run` (framework names mapped by ``aliases``)."""
    stream = RecordStream(name=name or Path(path).stem, source=str(path), aliases=aliases)
    for lineno, row in iter_csv_rows(path):
        stream.append(row, line=lineno)
    return stream.to_run()
