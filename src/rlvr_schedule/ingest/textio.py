"""Opening logs as text: plain or gzip (``train.log.gz``), and cleaning console lines.

Console logs carry terminal colour codes (``ESC[36m``) and Ray's worker prefixes
(``(TaskRunner pid=2664304)``, ``(main_task pid=54569)``); :func:`clean_line` removes both so a
reader sees what the trainer printed.
"""

from __future__ import annotations

import gzip
import io
import os
import re
from pathlib import Path
from typing import IO

from rlvr_schedule.errors import IngestError

__all__ = ["open_text", "read_head", "is_gzip", "logical_suffix", "clean_line", "split_ray_prefix"]

_GZIP_MAGIC = b"\x1f\x8b"

#: ANSI escape sequences (colours, cursor moves); also their remains when ESC itself was lost.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|(?<![\w\[])\[(?:[0-9]{1,3};)*[0-9]{1,3}m")
#: Ray's line prefix: ``(TaskRunner pid=1)``, ``(WorkerDict pid=2, ip=10.0.0.1)``, ``(pid=3)``.
_RAY_PREFIX = re.compile(r"^\((?:[\w.:-]+ )*(?:[\w.:-]+ )?pid=\d+(?:, ip=[\d.]+)?\)\s?")


def is_gzip(path: str | os.PathLike[str]) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == _GZIP_MAGIC
    except (IsADirectoryError, FileNotFoundError):
        return False


def logical_suffix(path: str | os.PathLike[str]) -> str:
    """The suffix that names the format: ``train.jsonl.gz`` -> ``.jsonl``; lower case."""
    p = Path(path)
    suffixes = [s.lower() for s in p.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


def open_text(path: str | os.PathLike[str], *, newline: str | None = None) -> IO[str]:
    """A text handle on a plain or gzip-compressed file (UTF-8); decoding errors raise later."""
    if is_gzip(path):
        try:
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline=newline)
        except OSError as exc:  # pragma: no cover - gzip.open is lazy
            raise IngestError(f"cannot read gzip file ({exc})", source=str(path)) from exc
    return open(path, encoding="utf-8", newline=newline)


def read_head(path: str | os.PathLike[str], n: int = 65536) -> str:
    """The first ``n`` characters (decompressed), undecodable bytes replaced: for sniffing formats."""
    try:
        if is_gzip(path):
            with gzip.open(path, "rb") as fh:
                raw = fh.read(n)
        else:
            with open(path, "rb") as fh:
                raw = fh.read(n)
    except (OSError, EOFError) as exc:
        raise IngestError(f"cannot read ({exc})", source=str(path)) from exc
    return raw.decode("utf-8", errors="replace")


def split_ray_prefix(line: str) -> tuple[str, str]:
    """``(prefix, rest)`` of a colour-stripped line; prefix '' when the line has none."""
    m = _RAY_PREFIX.match(line)
    if not m:
        return "", line
    return m.group(0).strip(), line[m.end() :]


def clean_line(line: str) -> str:
    """A console line without colour codes, Ray prefix or trailing newline."""
    text = _ANSI.sub("", line.rstrip("\r\n"))
    return split_ray_prefix(text)[1]
