"""JSON-lines logs: one object per line (this library's writers, framework dumps, W&B exports).

A run killed mid-write leaves a truncated last line: it is skipped with an :class:`IngestWarning`.
A bad line anywhere else means the file is damaged: :class:`IngestError` with its line number.
A value nested more deeply than Python's parser goes (about a thousand levels; no log nests more
than a few) is such a bad line, named, not a ``RecursionError``.
Lines with a string ``"kind"`` other than ``"record"`` (the JSONL sink's decisions) are skipped.
A ``.json`` file holding one JSON document is also read: a list of metric dicts, or an object
with a ``log_history`` list (HF Trainer's ``trainer_state.json``).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rlvr_schedule.errors import DamagedLogError, IngestError, IngestWarning
from rlvr_schedule.ingest.options import ReadOptions, apply_options, describe_sources
from rlvr_schedule.ingest.stream import RecordStream
from rlvr_schedule.ingest.textio import LogText, logical_suffix
from rlvr_schedule.records import Run

__all__ = ["read_jsonl", "iter_jsonl_rows", "iter_json_document_rows"]

#: The most characters of a whole-file JSON document (``trainer_state.json``: about 600 bytes an
#: entry, so some 400,000 logged steps); a larger one is refused before it is parsed.
MAX_DOCUMENT_CHARS = 256 * 2**20


def iter_json_document_rows(path: str | os.PathLike[str]) -> list[tuple[str, dict[str, Any]]] | None:
    """``(label, dict)`` rows of a whole-file JSON list / ``log_history``; None if not such a file."""
    with LogText(path) as fh:
        text = fh.read(MAX_DOCUMENT_CHARS)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None
    except RecursionError:
        raise IngestError("JSON nested too deeply to read", source=str(path)) from None
    key = ""
    if isinstance(doc, dict) and isinstance(doc.get("log_history"), list):
        doc, key = doc["log_history"], "log_history"
    if not isinstance(doc, list):
        return None
    rows = []
    for i, obj in enumerate(doc):
        if not isinstance(obj, dict):
            raise IngestError(f"{key}[{i}] is a {type(obj).__name__}, expected an object", source=str(path))
        rows.append((f"{key}[{i}]", obj))
    return rows


def iter_jsonl_rows(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each record line of a JSONL file (1-based line numbers)."""
    source = str(path)
    pending: tuple[int, str] | None = None  # an unparsable line: fatal unless it is the last one
    with LogText(path) as fh:
        for lineno, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            if pending is not None:
                bad_line, err = pending
                raise DamagedLogError(f"not valid JSON ({err})", source=source, line=bad_line)
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                pending = (lineno, exc.msg)
                continue
            except RecursionError:
                raise DamagedLogError("JSON nested too deeply to read", source=source, line=lineno) from None
            if not isinstance(obj, dict):
                raise IngestError(
                    f"expected a JSON object, got {type(obj).__name__}", source=source, line=lineno
                )
            kind = obj.get("kind")
            if isinstance(kind, str) and kind != "record":
                continue
            yield lineno, obj
    if pending is not None:
        warnings.warn(
            f"{source}:{pending[0]}: truncated last line skipped ({pending[1]}; a run killed mid-write?)",
            IngestWarning,
            stacklevel=3,
        )


def _flatten_verl(obj: dict[str, Any]) -> dict[str, Any]:
    """verl's file logger writes ``{"step": N, "data": {...}}``: its metrics one level down."""
    data = obj.get("data")
    if isinstance(data, dict) and "step" in obj and len(obj) <= 3:
        return {**data, "step": obj["step"]}
    return obj


def _stem(path: str | os.PathLike[str]) -> str:
    name = Path(path).name
    for suffix in (".gz", ".jsonl", ".ndjson", ".json"):
        name = name.removesuffix(suffix)
    return name


def read_jsonl(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    aliases: Mapping[str, str] | None = None,
    options: ReadOptions | None = None,
) -> Run:
    """Read a JSONL log into a validated :class:`Run` (framework names mapped by ``aliases``).

    Also a whole-file JSON list of metric dicts or a ``trainer_state.json`` (``log_history``),
    and verl's JSONL file logger (``{"step": N, "data": {...}}``).
    """
    stream = RecordStream(name=name or _stem(path), source=str(path), aliases=aliases)
    fmt = "jsonl"
    doc_rows = iter_json_document_rows(path) if logical_suffix(path) == ".json" else None
    if doc_rows is not None:
        fmt = "trainer-state" if doc_rows and doc_rows[0][0].startswith("log_history") else "json-list"
        for label, obj in doc_rows:
            stream.append(apply_options(obj, options, stream.aliases), label=label)
    else:
        for lineno, obj in iter_jsonl_rows(path):
            flat = _flatten_verl(obj)
            if flat is not obj:
                fmt = "verl-jsonl"
            stream.append(apply_options(flat, options, stream.aliases), line=lineno)
    run = stream.to_run()
    run.meta["format"] = fmt
    describe_sources(run, stream.names, options)
    return run
