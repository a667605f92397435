"""Opening logs as text: plain or gzip (``train.log.gz``), and cleaning console lines.

Every log is read through :func:`open_text`, which holds a reader to what a log can be: a regular
file (a FIFO or a device is refused by type before it is opened: a read would block or never end),
lines of at most :data:`MAX_LINE_CHARS` characters (a longer one, e.g. a decompression bomb with no
newline, is an error naming its line, after reading at most that much), and gzip damage (a cut
stream, a garbage member) named with the compressed byte offset where decompression failed.

Console logs carry terminal colour codes (``ESC[36m``) and Ray's worker prefixes
(``(TaskRunner pid=2664304)``, ``(main_task pid=54569)``); :func:`clean_line` removes both so a
reader sees what the trainer printed.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import re
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlvr_schedule.errors import DamagedLogError, IngestError

__all__ = [
    "open_text",
    "read_head",
    "is_gzip",
    "logical_suffix",
    "clean_line",
    "split_ray_prefix",
    "check_regular",
    "MAX_LINE_CHARS",
    "LogText",
]

#: The longest line a log may hold (characters). Trainer logs write lines of a few kB (a record of
#: a few hundred metrics is under 64 kB); 8 MiB leaves room for anything a trainer prints while
#: keeping one line's cost to tens of MB, so an endless line (a bomb, ``/dev/zero``) fails fast.
MAX_LINE_CHARS = 8 * 2**20

_GZIP_MAGIC = b"\x1f\x8b"

#: ANSI escape sequences (colours, cursor moves); also their remains when ESC itself was lost.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|(?<![\w\[])\[(?:[0-9]{1,3};)*[0-9]{1,3}m")
#: Ray's line prefix: ``(TaskRunner pid=1)``, ``(WorkerDict pid=2, ip=10.0.0.1)``, ``(pid=3)``.
_RAY_PREFIX = re.compile(r"^\((?:[\w.:-]+ )*(?:[\w.:-]+ )?pid=\d+(?:, ip=[\d.]+)?\)\s?")


def check_regular(path: str | os.PathLike[str], what: str = "log") -> os.stat_result:
    """``os.stat`` of a path that must be a regular file or a directory, else :class:`IngestError`:
    a FIFO (reading one blocks until a writer comes), a device (``/dev/zero`` never ends), a socket,
    a symlink loop, a missing file, each with its own message."""
    src = str(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DamagedLogError("too many levels of symbolic links (a symlink loop)", source=src) from None
        if exc.errno == errno.ENOENT:
            raise IngestError("no such file or directory", source=src) from None
        raise IngestError(f"cannot read ({exc.strerror or exc})", source=src) from None
    mode = st.st_mode
    if stat.S_ISFIFO(mode):
        raise DamagedLogError(
            f"is a FIFO (named pipe), not a {what} file: write the {what} to a file", source=src
        )
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        raise DamagedLogError(f"is a device, not a {what} file", source=src)
    if stat.S_ISSOCK(mode):
        raise DamagedLogError(f"is a socket, not a {what} file", source=src)
    return st


def is_gzip(path: str | os.PathLike[str]) -> bool:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as fh:
            return fh.read(2) == _GZIP_MAGIC
    except OSError:
        return False


def logical_suffix(path: str | os.PathLike[str]) -> str:
    """The suffix that names the format: ``train.jsonl.gz`` -> ``.jsonl``; lower case."""
    p = Path(path)
    suffixes = [s.lower() for s in p.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return suffixes[-1] if suffixes else ""


class LogText:
    """A text handle on a plain or gzip-compressed log (UTF-8) whose reads name their faults.

    Iterating yields lines of at most :data:`MAX_LINE_CHARS` characters; a gzip stream cut short or
    holding garbage, a line too long and bytes that are not UTF-8 raise :class:`IngestError` naming
    the file, the line and (gzip) the compressed byte offset. ``lineno`` is the last line yielded.
    """

    def __init__(self, path: str | os.PathLike[str], newline: str | None = None) -> None:
        self.source = str(path)
        check_regular(path)
        self._raw = open(path, "rb")  # noqa: SIM115 - closed by close()
        self.gzip = self._raw.read(2) == _GZIP_MAGIC
        self._raw.seek(0)
        binary: Any = gzip.GzipFile(fileobj=self._raw, mode="rb") if self.gzip else self._raw
        self._fh = io.TextIOWrapper(binary, encoding="utf-8", newline=newline)
        self.lineno = 0

    def __enter__(self) -> LogText:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._fh.close()
        self._raw.close()

    def fault(self, exc: BaseException) -> IngestError:
        """The :class:`IngestError` for an exception raised while reading: a cut gzip stream (which a
        log still being compressed also is), or :class:`DamagedLogError` for damage."""
        line = self.lineno + 1
        if isinstance(exc, UnicodeDecodeError):
            return DamagedLogError(
                f"not UTF-8 text ({exc.reason} at byte {exc.start} of a read)", source=self.source, line=line
            )
        try:
            at = self._raw.tell()
        except (OSError, ValueError):
            at = -1
        if isinstance(exc, EOFError):
            return IngestError(
                f"truncated gzip stream: it ends at byte {at} before its end-of-stream marker (a copy or write "
                "cut short?)",
                source=self.source,
                line=line,
            )
        if isinstance(exc, (zlib.error, gzip.BadGzipFile)):
            return DamagedLogError(f"corrupt gzip data near byte {at} ({exc})", source=self.source, line=line)
        return IngestError(
            f"cannot read ({getattr(exc, 'strerror', None) or exc})", source=self.source, line=line
        )

    def __iter__(self) -> Iterator[str]:
        readline = self._fh.readline
        limit = MAX_LINE_CHARS
        try:
            while True:
                text = readline(limit)
                if not text:
                    return
                if len(text) == limit and not text.endswith(("\n", "\r")):
                    raise DamagedLogError(
                        f"line longer than {limit} characters (a binary file or an endless line?)",
                        source=self.source,
                        line=self.lineno + 1,
                    )
                self.lineno += 1
                yield text
        except (UnicodeDecodeError, EOFError, zlib.error, OSError) as exc:
            raise self.fault(exc) from None

    def read(self, limit: int) -> str:
        """The whole text, if it has at most ``limit`` characters (a whole-file JSON document)."""
        try:
            text = self._fh.read(limit + 1)
        except (UnicodeDecodeError, EOFError, zlib.error, OSError) as exc:
            raise self.fault(exc) from None
        if len(text) > limit:
            raise IngestError(
                f"larger than {limit} characters, the most read as one document", source=self.source
            )
        return text


def open_text(path: str | os.PathLike[str], *, newline: str | None = None) -> Any:
    """A :class:`LogText` on a plain or gzip-compressed file (refused if not a regular file)."""
    return LogText(path, newline=newline)


def read_head(path: str | os.PathLike[str], n: int = 65536) -> str:
    """The first ``n`` characters (decompressed), undecodable bytes replaced: for sniffing formats.

    A gzip stream cut short within the head is read as far as it goes (the reader names the fault)."""
    check_regular(path)
    try:
        if is_gzip(path):
            with gzip.open(path, "rb") as fh:
                raw = b""
                try:
                    while len(raw) < n:
                        chunk = fh.read(min(n - len(raw), 65536))
                        if not chunk:
                            break
                        raw += chunk
                except (EOFError, zlib.error, gzip.BadGzipFile):
                    pass
        else:
            with open(path, "rb") as fh:
                raw = fh.read(n)
    except OSError as exc:
        raise IngestError(f"cannot read ({exc.strerror or exc})", source=str(path)) from exc
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
