"""Errors and warnings that name where bad input came from (file, line, field)."""

from __future__ import annotations

__all__ = [
    "RlvrScheduleError",
    "IngestError",
    "DamagedLogError",
    "IngestWarning",
    "ConfigError",
    "MissingExtraError",
]


class RlvrScheduleError(Exception):
    """Base class of the library's errors."""


def _where(source: str | None, line: int | None, field: str | None) -> str:
    parts = []
    if source:
        parts.append(str(source) + (f":{line}" if line is not None else ""))
    elif line is not None:
        parts.append(f"line {line}")
    if field:
        parts.append(f"field {field!r}")
    return ", ".join(parts)


class IngestError(RlvrScheduleError, ValueError):
    """A log that cannot be read into a correct run; says where."""

    def __init__(
        self, message: str, *, source: str | None = None, line: int | None = None, field: str | None = None
    ) -> None:
        self.source, self.line, self.field = source, line, field
        where = _where(source, line, field)
        super().__init__(f"{where}: {message}" if where else message)


class DamagedLogError(IngestError):
    """A log whose written part is damaged (a corrupt line, a line too long, a FIFO or device, a
    symlink loop): appending cannot mend it, so ``watch`` stops at once instead of waiting."""


class IngestWarning(UserWarning):
    """Something in a log was skipped or repaired; the message says where and what."""


class MissingExtraError(IngestError, ImportError):
    """An optional reader's package is not installed; the message names the extra to install."""

    def __init__(self, what: str, extra: str, *, source: str | None = None, hint: str | None = None) -> None:
        hint = hint or f"pip install 'rlvr-schedule[{extra}]'"
        IngestError.__init__(self, f"{what} needs the {extra} extra: {hint}", source=source)


class ConfigError(RlvrScheduleError, ValueError):
    """An invalid schedule or policy configuration; names the file and field."""

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None) -> None:
        self.source, self.field = source, field
        where = _where(source, None, field)
        super().__init__(f"{where}: {message}" if where else message)
