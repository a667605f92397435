"""One framework metrics dict -> canonical fields: :func:`map_metrics` and :func:`canonicalize`.

:func:`map_metrics` only renames and coerces (readers and :class:`RecordStream` add the checks
that need neighbouring records); :func:`canonicalize` builds one :class:`StepRecord` from it, which
is what adapters call online from a framework's logging hook.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlvr_schedule.bounds import MAX_ABS_REWARD, MAX_LR, WHY
from rlvr_schedule.errors import IngestError, IngestWarning
from rlvr_schedule.ingest.aliases import as_table, is_known_extra
from rlvr_schedule.records import METRIC_FIELDS, StepRecord

__all__ = ["INT_FIELDS", "MappedMetrics", "canonicalize", "map_metrics", "to_number"]

#: Fields stored as integers; a non-finite or fractional value there is an error, not a warning.
INT_FIELDS: tuple[str, ...] = ("step", "samples", "batch", "micro_batch")


def to_number(value: Any) -> float | None:
    """A float for numbers, numpy/torch scalars and numeric strings; None for anything else.

    bools are not numbers here (a flag is not a metric).
    """
    t = type(value)
    if t is float or t is int:
        return float(value)
    if t is bool or value is None:
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str):
        s = value.strip()
        if not s:
            return None
        try:
            return float(s)
        except ValueError:
            return None
    item = getattr(value, "item", None)  # numpy / torch one-element values
    if callable(item):
        try:
            inner = item()
        except (ValueError, RuntimeError, TypeError):  # more than one element
            return None
        if inner is not value:
            return to_number(inner)
    return None


@dataclass
class MappedMetrics:
    """A metrics dict split into canonical fields and ``extra``.

    ``values`` maps canonical fields to floats (NaN where a non-finite value was logged);
    ``names`` says which logged name filled each field; ``unknown`` lists names neither an
    alias nor a known framework metric (kept in ``extra``); ``nonfinite`` the
    ``(logged name, value)`` pairs that were set to NaN (a null of a float field is one: null and
    NaN are read alike); ``implausible`` the ``(logged name, value, why)`` of values beyond
    :mod:`rlvr_schedule.bounds` (a reward or LR), also set to NaN; ``non_numeric`` unknown names
    whose value was not a number (dropped).
    """

    values: dict[str, float] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    nonfinite: list[tuple[str, float | None]] = field(default_factory=list)
    implausible: list[tuple[str, float, str]] = field(default_factory=list)
    non_numeric: list[str] = field(default_factory=list)


def map_metrics(
    metrics: Mapping[str, Any],
    aliases: Mapping[str, str] | None = None,
    *,
    source: str | None = None,
    line: int | None = None,
) -> MappedMetrics:
    """Rename ``metrics`` onto canonical fields by alias priority; the rest goes to ``extra``.

    When two logged names map to one field the higher-priority name fills it and the other is
    kept in ``extra`` under its logged name. A known field with a non-numeric value raises
    :class:`IngestError` naming ``source:line`` and the logged name.
    """
    table = as_table(aliases)
    out = MappedMetrics()
    best: dict[str, tuple[float, str]] = {}  # field -> (rank, logged name)
    numeric: dict[str, float] = {}
    for raw_name, raw in metrics.items():
        name = str(raw_name)
        value = to_number(raw)
        hit = table.resolve(name)
        if value is None:
            if raw is None and hit is not None and hit[0] not in INT_FIELDS:
                out.nonfinite.append((name, None))  # a null metric: missing, as NaN is
                value = math.nan
            else:
                if hit is not None and raw is not None and not (isinstance(raw, str) and not raw.strip()):
                    raise IngestError(f"value {raw!r} is not a number", source=source, line=line, field=name)
                if (
                    hit is None
                    and raw is not None
                    and not (isinstance(raw, str) and not raw.strip())
                    and not is_known_extra(name)
                ):
                    out.non_numeric.append(name)
                continue
        elif not math.isfinite(value):
            out.nonfinite.append((name, value))
            value = math.nan
        numeric[name] = value
        if hit is None:
            out.extra[name] = value
            if not is_known_extra(name):
                out.unknown.append(name)
            continue
        fld, rank = hit
        prev = best.get(fld)
        if prev is None or rank < prev[0]:
            if prev is not None:
                out.extra[prev[1]] = numeric[prev[1]]
            best[fld] = (rank, name)
        else:
            out.extra[name] = value
    for fld, (_, name) in best.items():
        out.values[fld] = numeric[name]
        out.names[fld] = name
    values = out.values  # the plausibility bounds; NaN compares false: not implausible
    r = values.get("reward_mean")
    if r is not None and not -MAX_ABS_REWARD <= r <= MAX_ABS_REWARD and r == r:
        out.implausible.append((out.names["reward_mean"], r, WHY["reward"]))
        values["reward_mean"] = math.nan
    lr = values.get("lr")
    if lr is not None and not 0.0 <= lr <= MAX_LR and lr == lr:
        out.implausible.append((out.names["lr"], lr, WHY["lr"] + " and not negative"))
        values["lr"] = math.nan
    return out


def _as_int(value: float, fld: str, *, source: str | None, line: int | None, minimum: int) -> int:
    if not math.isfinite(value) or value != int(value):
        raise IngestError(f"{fld} must be a whole number, got {value!r}", source=source, line=line, field=fld)
    if value < minimum:
        raise IngestError(
            f"{fld} must be >= {minimum}, got {int(value)}", source=source, line=line, field=fld
        )
    return int(value)


def warn_nonfinite(
    pairs: list[tuple[str, float | None]],
    *,
    source: str | None = None,
    line: int | None = None,
    stacklevel: int = 3,
) -> None:
    """One :class:`IngestWarning` per non-finite value, naming where and which field."""
    for name, value in pairs:
        if source:
            where = f"{source}:{line}" if line is not None else source
        else:
            where = f"line {line}" if line is not None else ""
        prefix = f"{where}: " if where else ""
        warnings.warn(
            f"{prefix}field {name!r}: non-finite value {value!r} set to NaN",
            IngestWarning,
            stacklevel=stacklevel,
        )


def build_record(
    values: Mapping[str, float],
    extra: Mapping[str, float],
    *,
    step: Any,
    samples: Any,
    batch: Any,
    lr: Any,
    source: str | None = None,
    line: int | None = None,
    names: Mapping[str, str] | None = None,
) -> StepRecord:
    """A :class:`StepRecord` from canonical values; integer fields are checked (errors say where)."""
    names = names or {}

    def num(v: Any, fld: str) -> float:
        x = to_number(v)
        if x is None:
            raise IngestError(
                f"{fld} must be a number, got {v!r}", source=source, line=line, field=names.get(fld, fld)
            )
        return x

    kw: dict[str, Any] = {
        "step": _as_int(num(step, "step"), "step", source=source, line=line, minimum=0),
        "samples": _as_int(num(samples, "samples"), "samples", source=source, line=line, minimum=0),
        "batch": _as_int(num(batch, "batch"), "batch", source=source, line=line, minimum=1),
        "lr": math.nan if lr is None else num(lr, "lr"),
    }
    for fld in METRIC_FIELDS:
        if fld in values:
            kw[fld] = float(values[fld])
    mb = values.get("micro_batch")
    if mb is not None and not math.isnan(mb):
        kw["micro_batch"] = _as_int(mb, "micro_batch", source=source, line=line, minimum=1)
    return StepRecord(**kw, extra=dict(extra))


def canonicalize(
    metrics: Mapping[str, Any],
    *,
    step: int,
    samples: int | None = None,
    batch: int | None = None,
    lr: float | None = None,
    aliases: Mapping[str, str] | None = None,
) -> StepRecord:
    """One framework metrics dict (TRL ``on_log`` logs, verl/OpenRLHF step metrics) -> a record.

    ``samples``/``batch``/``lr`` given here win over logged values (adapters know them exactly;
    verl does not log samples at all). Unknown numeric keys land in ``extra``; a non-finite
    metric becomes NaN with an :class:`IngestWarning`. ``aliases=None`` uses the built-in table
    plus entry-point plugins (:func:`default_aliases`). Raises :class:`IngestError` when samples
    or batch is neither given nor logged (use :class:`RecordStream` to derive one from the other).
    """
    m = map_metrics(metrics, aliases)
    warn_nonfinite(m.nonfinite)
    for fld, given in (("samples", samples), ("batch", batch)):
        if given is None and fld not in m.values:
            raise IngestError(
                f"no {fld}: pass {fld}= or log it (RecordStream derives samples from batch "
                "and batch from samples)",
                field=fld,
            )
    if lr is None:
        lr = m.values.get("lr")
    # explicit arguments win: keep the logged value in extra so nothing is lost
    extra = dict(m.extra)
    for fld, given in (("step", step), ("samples", samples), ("batch", batch)):
        if given is not None and fld in m.values and m.values[fld] != given:
            extra.setdefault(m.names[fld], m.values[fld])
    return build_record(
        m.values,
        extra,
        step=step,
        samples=samples if samples is not None else m.values["samples"],
        batch=batch if batch is not None else m.values["batch"],
        lr=lr,
        names=m.names,
    )
