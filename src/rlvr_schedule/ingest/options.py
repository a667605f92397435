"""What the user tells the readers where a log is silent: ``--batch``, ``--base-lr``, ``--alias``.

:class:`ReadOptions` travels from the CLI (or :func:`~rlvr_schedule.ingest.load_runs`) to every
reader. :func:`apply_options` puts the batch/LR into a metrics dict before it is mapped, and
:func:`describe_sources` writes the run's ``meta`` entries that say where its batch and LR came
from (the ``fit`` table shows them).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlvr_schedule.errors import IngestError, IngestWarning
from rlvr_schedule.records import METRIC_FIELDS

__all__ = ["ReadOptions", "apply_options", "describe_sources", "parse_alias_options"]


@dataclass(frozen=True)
class ReadOptions:
    """Reader options. ``batch``: rollouts per optimizer update (wins over the log, with a warning
    when the log says otherwise); ``base_lr``: the LR where the log has none (or prints it as 0);
    ``aliases``: extra ``{logged name: field}``; ``format``: a reader name (skips detection);
    ``logging_steps``: optimizer steps between two console dicts when no progress counter shows."""

    batch: int | None = None
    base_lr: float | None = None
    aliases: Mapping[str, str] | None = None
    format: str | None = None
    logging_steps: int | None = None

    def __post_init__(self) -> None:
        if self.batch is not None and (not isinstance(self.batch, int) or self.batch < 1):
            raise IngestError(f"batch must be a whole number >= 1, got {self.batch!r}", field="--batch")
        if self.base_lr is not None and not (math.isfinite(self.base_lr) and self.base_lr > 0):
            raise IngestError(f"base LR must be a positive number, got {self.base_lr!r}", field="--base-lr")
        if self.logging_steps is not None and self.logging_steps < 1:
            raise IngestError(
                f"logging steps must be >= 1, got {self.logging_steps!r}", field="--logging-steps"
            )


def parse_alias_options(items: list[str] | None) -> dict[str, str]:
    """``["my_reward=reward_mean", ...]`` -> ``{"my_reward": "reward_mean"}`` (``KEY=FIELD``)."""
    from rlvr_schedule.ingest.aliases import CANONICAL_FIELDS

    out: dict[str, str] = {}
    for item in items or []:
        key, sep, fld = item.partition("=")
        key, fld = key.strip(), fld.strip()
        if not sep or not key or not fld:
            raise IngestError(
                f"--alias takes KEY=FIELD (the logged name, then a field), got {item!r}", field="--alias"
            )
        if fld not in CANONICAL_FIELDS:
            raise IngestError(
                f"--alias {item!r}: unknown field {fld!r}; fields are {', '.join(sorted(CANONICAL_FIELDS))}",
                field="--alias",
            )
        out[key] = fld
    return out


def apply_options(row: Mapping[str, Any], opts: ReadOptions | None, table: Any) -> dict[str, Any]:
    """``row`` with ``--batch`` (always) and ``--base-lr`` (when the row has no LR) put in.

    ``table`` is the reader's :class:`~rlvr_schedule.ingest.aliases.AliasTable`.
    """
    if opts is None or (opts.batch is None and opts.base_lr is None):
        return dict(row) if not isinstance(row, dict) else row
    fields = set()
    for k in row:
        hit = table.resolve(str(k))
        if hit is not None:
            fields.add(hit[0])
    if not fields & (set(METRIC_FIELDS) | {"samples", "batch", "lr"}):
        return dict(row)  # a summary or eval row: no update to give a batch to
    out = dict(row)
    if opts.batch is not None:
        out["batch"] = opts.batch
    if opts.base_lr is not None and "lr" not in fields:
        out["lr"] = opts.base_lr
    return out


def describe_sources(
    run: Any,
    names: Mapping[str, str],
    opts: ReadOptions | None,
    *,
    batch_source: str | None = None,
    lr_source: str | None = None,
) -> None:
    """Fill ``run.meta['batch_source']`` / ``['lr_source']`` (unless a reader already did)."""
    meta = run.meta
    if batch_source is not None:
        meta.setdefault("batch_source", batch_source)
    if lr_source is not None:
        meta.setdefault("lr_source", lr_source)
    if opts is not None and opts.batch is not None:
        meta.setdefault("batch_source", "option --batch")
    elif "batch" in names:
        meta.setdefault("batch_source", f"logged ({names['batch']})")
    elif "samples" in names:
        meta.setdefault("batch_source", f"from logged rollout counts ({names['samples']})")
    if "lr" in names and names["lr"] == "lr" and opts is not None and opts.base_lr is not None:
        meta.setdefault("lr_source", "option --base-lr")
    elif "lr" in names:
        meta.setdefault("lr_source", f"logged ({names['lr']})")
    else:
        meta.setdefault("lr_source", "none (pass --base-lr)")


def warn_batch_conflict(source: str, logged: int | None, given: int | None, what: str) -> None:
    """One warning when ``--batch`` differs from what the log says (the option wins)."""
    if logged is not None and given is not None and logged != given:
        warnings.warn(
            f"{source}: --batch {given} differs from the log's {what} ({logged}); using {given}",
            IngestWarning,
            stacklevel=3,
        )
