"""TensorBoard event files: scalars per step, read with tensorboard's own event-file loader.

tensorboard is imported here, lazily (``pip install 'rlvr-schedule[tensorboard]'``); without it a
TensorBoard log is an error that names the extra. A record that fails its checksum is an error
naming the file and the byte offset of the record; a file that ends inside a record (a run still
writing, or a cut copy) keeps the records before it, with a warning naming the offset. Event files of one directory
are read in name order (their names start with the creation time). A later file that logs a tag
at a step seen before (a resumed run) replaces that tag's values from that step on, with one
warning; writers of different tags into one directory (a trainer and this library's sink) merge.
Both legacy ``simple_value`` scalars (``torch.utils.tensorboard``) and TF2 scalar tensors are read.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

from rlvr_schedule.errors import DamagedLogError, IngestError, IngestWarning, MissingExtraError
from rlvr_schedule.ingest.options import ReadOptions, apply_options, describe_sources
from rlvr_schedule.ingest.stream import RecordStream
from rlvr_schedule.records import Run

__all__ = ["read_tensorboard", "event_files", "is_event_file", "read_scalars"]

_EXACT_FLOAT32 = 2**24  # integers above this are not exact in TensorBoard's float32 scalars


def is_event_file(path: str | os.PathLike[str]) -> bool:
    """True for names like ``events.out.tfevents.<time>.<host>`` (not ``.profile-empty``)."""
    name = Path(path).name
    return "tfevents" in name and not name.endswith(".profile-empty")


def event_files(path: str | os.PathLike[str]) -> list[Path]:
    """The event files of one run: the file itself, or those directly inside a directory, by name."""
    p = Path(path)
    if p.is_file():
        return [p]
    return sorted(f for f in p.iterdir() if f.is_file() and is_event_file(f))


def _loader(path: Path):
    try:
        from tensorboard.backend.event_processing import event_file_loader
        from tensorboard.util import tensor_util
    except ImportError:
        raise MissingExtraError("reading TensorBoard event files", "tensorboard", source=str(path)) from None
    return event_file_loader, tensor_util


def _events(path: Path, event_file_loader) -> Iterator:
    """The events of one file; damage named with the byte offset of the record it hits.

    tensorboard's own loader stops silently at a bad record (it is made to tail live files), which
    would read a corrupt file as a short one: its record iterator is used directly instead."""
    make = getattr(event_file_loader, "_make_tf_record_iterator", None)
    if make is None:  # pragma: no cover - another tensorboard: its loader, without damage reports
        yield from event_file_loader.LegacyEventFileLoader(str(path)).Load()
        return
    from tensorboard.compat.proto import event_pb2

    size = path.stat().st_size
    offset = 0  # each record: 8-byte length, 4-byte CRC, data, 4-byte CRC
    it = make(str(path))
    while True:
        try:
            data = next(it)
        except StopIteration:
            return
        except Exception as exc:  # noqa: BLE001 - tensorboard's DataLossError (no stable import path)
            if "DataLoss" not in type(exc).__name__:
                raise
            if "truncat" in str(exc).lower() or size - offset < 16:
                warnings.warn(
                    f"{path}: truncated: the file ends inside the record at byte {offset} (of {size}; a run "
                    "still writing, or a cut copy): read the records before it",
                    IngestWarning,
                    stacklevel=4,
                )
                return
            raise DamagedLogError(
                f"corrupt event record at byte {offset} of {size} (failed its checksum)", source=str(path)
            ) from None
        try:
            event = event_pb2.Event.FromString(data)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError
            raise DamagedLogError(
                f"corrupt event record at byte {offset} (not an event)", source=str(path)
            ) from None
        offset += len(data) + 16
        yield event


def _file_scalars(path: Path) -> Iterator[tuple[str, int, float]]:
    """``(tag, step, value)`` for every scalar in one event file, in file order."""
    event_file_loader, tensor_util = _loader(path)
    scalar_tags: set[str] = set()  # TF2 writers put the plugin name on a tag's first value only
    for event in _events(path, event_file_loader):
        if not event.HasField("summary"):
            continue
        for value in event.summary.value:
            kind = value.WhichOneof("value")
            if kind == "simple_value":
                yield value.tag, int(event.step), float(value.simple_value)
            elif kind == "tensor":
                if value.metadata.plugin_data.plugin_name == "scalars":
                    scalar_tags.add(value.tag)
                if value.tag not in scalar_tags:
                    continue
                arr = tensor_util.make_ndarray(value.tensor)
                if arr.size == 1:
                    yield value.tag, int(event.step), float(arr.reshape(-1)[0])


def read_scalars(path: str | os.PathLike[str]) -> dict[int, dict[str, float]]:
    """``{step: {tag: value}}`` of a run's event files, resumed-run overlaps resolved (later wins)."""
    files = event_files(path)
    if not files:
        raise IngestError("no TensorBoard event files (events.out.tfevents.*)", source=str(path))
    by_tag: dict[str, dict[int, float]] = {}
    for f in files:
        first_in_file: dict[str, int] = {}
        for tag, step, value in _file_scalars(f):
            series = by_tag.setdefault(tag, {})
            if tag not in first_in_file:
                first_in_file[tag] = step
                stale = [s for s in series if s >= step]
                if stale:
                    warnings.warn(
                        f"{f}: field {tag!r}: steps {min(stale)}..{max(stale)} logged again from step {step} "
                        "(a resumed run?): keeping the later values",
                        IngestWarning,
                        stacklevel=3,
                    )
                    for s in stale:
                        del series[s]
            series[step] = value  # within one file the last value of a step wins
    rows: dict[int, dict[str, float]] = {}
    for tag, series in by_tag.items():
        for step, value in series.items():
            rows.setdefault(step, {})[tag] = value
    return dict(sorted(rows.items()))


def read_tensorboard(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    aliases: Mapping[str, str] | None = None,
    options: ReadOptions | None = None,
) -> Run:
    """Read a TensorBoard event file or run directory into a validated :class:`Run`.

    The event step is the record's step (a logged step tag such as ``training/global_step``
    stays in ``extra``). Errors and warnings name the directory and the step.
    """
    p = Path(path)
    source = str(p)
    rows = read_scalars(p)
    if not rows:
        raise IngestError("no scalar summaries in the event files", source=source)
    stream = RecordStream(
        name=name or (p.name if p.is_dir() else p.parent.name or p.name), source=source, aliases=aliases
    )
    for step, values in rows.items():
        stream.append(apply_options({**values, "step": step}, options, stream.aliases), label=f"step {step}")
    run = stream.to_run()
    run.meta["format"] = "tensorboard"
    describe_sources(run, stream.names, options)
    hits = (stream.aliases.resolve(tag) for tag in rows[max(rows)])
    if run.records[-1].samples > _EXACT_FLOAT32 and any(h is not None and h[0] == "samples" for h in hits):
        warnings.warn(
            f"{source}: samples above 2**24 are rounded by TensorBoard's float32 scalars; "
            "prefer a JSONL log for exact sample counts",
            IngestWarning,
            stacklevel=2,
        )
    return run
