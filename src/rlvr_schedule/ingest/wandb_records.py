"""The records of a W&B run file (``run-<id>.wandb``), through the wandb package's own reader.

W&B has no public API for reading a local run: the ``.wandb`` file is a LevelDB-style log of
protobuf ``Record`` messages, read here with wandb's internal ``DataStore`` and its
``wandb_internal_pb2`` module, the ones ``wandb sync`` uses. This module is the only place that
touches them (pinned: wandb 0.29.0; 0.30 removed the Python ``DataStore``), imported lazily:
without wandb, :func:`scan` raises an :class:`IngestError` that says what to install.

A file still being written ends in a torn record; :func:`scan` stops before it, so a run can be
followed while it grows.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from rlvr_schedule.errors import IngestError, MissingExtraError

__all__ = ["WandbRecords", "scan", "INSTALL_HINT", "PINNED"]

PINNED = "0.29.0"
INSTALL_HINT = f"pip install 'rlvr-schedule[wandb]' (or: pip install wandb=={PINNED})"


@dataclass
class WandbRecords:
    """What a run file holds that a reader needs, in file order."""

    history: list[dict[str, Any]] = field(default_factory=list)  # one dict per wandb.log step
    config: dict[str, Any] = field(default_factory=dict)  # top-level keys, values decoded from JSON
    output: list[str] = field(default_factory=list)  # console lines the run printed (stdout, stderr)
    run_id: str | None = None
    torn: bool = False  # the file ends inside a record (still being written, or cut)
    torn_at: int = -1  # the byte offset of that record (where known)


def _modules() -> tuple[Any, Any]:
    try:
        from wandb.proto import wandb_internal_pb2
        from wandb.sdk.internal import datastore
    except ImportError:
        raise MissingExtraError("reading W&B run files", "wandb", hint=INSTALL_HINT) from None
    return datastore, wandb_internal_pb2


def _key(item: Any) -> str:
    """An item's metric name: ``key``, or its ``nested_key`` parts joined as W&B shows them."""
    return item.key or ".".join(item.nested_key)


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def scan(path: str | os.PathLike[str]) -> WandbRecords:
    """Read one ``.wandb`` file into :class:`WandbRecords`."""
    datastore, pb = _modules()
    out = WandbRecords()
    ds = datastore.DataStore()
    try:
        ds.open_for_scan(os.fspath(path))
    except (AssertionError, OSError, ValueError) as exc:
        raise IngestError(f"not a W&B run file ({exc})", source=str(path)) from None
    partial = ""

    def _at() -> int:
        fp = getattr(ds, "_fp", None)
        try:
            return int(fp.tell()) if fp is not None else -1
        except (OSError, ValueError):
            return -1

    try:
        while True:
            at = _at()
            try:
                data = ds.scan_data()
            except (AssertionError, ValueError, IndexError):
                out.torn, out.torn_at = True, at
                break
            if data is None:
                break
            rec = pb.Record()
            try:
                rec.ParseFromString(data)
            except Exception:  # protobuf's DecodeError: a record cut short
                out.torn, out.torn_at = True, at
                break
            kind = rec.WhichOneof("record_type")
            if kind == "history":
                out.history.append({_key(i): _value(i.value_json) for i in rec.history.item})
            elif kind == "run":
                out.run_id = rec.run.run_id or out.run_id
                for i in rec.run.config.update:
                    out.config[_key(i)] = _value(i.value_json)
            elif kind == "config":
                for i in rec.config.update:
                    out.config[_key(i)] = _value(i.value_json)
            elif kind in ("output_raw", "output"):
                # console text arrives in pieces ('...' then '\n'); lines end at '\n'
                text = partial + getattr(rec, kind).line
                *lines, partial = text.split("\n")
                out.output.extend(lines)
    finally:
        fp = getattr(ds, "_fp", None)
        if fp is not None:
            fp.close()
    if partial:
        out.output.append(partial)
    return out
