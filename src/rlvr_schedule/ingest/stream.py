"""RecordStream: records appended one by one, validated against their predecessors.

Every reader feeds its rows through a stream, so all formats share one set of rules:

- ``samples`` absent: derived from ``batch`` (cumulative; ``batch x steps`` across unlogged steps);
  ``batch`` absent: derived from sample differences (``/ steps`` across a gap); neither: error.
- a step logged again (a resumed run re-logs the steps after its checkpoint): warning, the
  later records win and the earlier ones from that step on are dropped;
- a step or sample count going backwards without such a repeat: :class:`IngestError`;
- a row at the last step with no metric (TRL's end-of-training summary, eval lines): merged into
  that record's ``extra``;
- non-finite metrics: NaN with one warning per field; unknown names: one warning at the end;
- no finite reward anywhere: :class:`IngestError` when the run is built.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rlvr_schedule.bounds import MAX_BATCH, MAX_SAMPLES, WHY
from rlvr_schedule.errors import IngestError, IngestWarning
from rlvr_schedule.ingest.aliases import FIELD_ALIASES, as_table
from rlvr_schedule.ingest.canonical import INT_FIELDS, build_record, map_metrics
from rlvr_schedule.records import METRIC_FIELDS, Run, StepRecord

__all__ = ["RecordStream"]


def _where(source: str | None, line: int | None) -> str:
    if source:
        return f"{source}:{line}" if line is not None else str(source)
    return f"line {line}" if line is not None else "<stream>"


class RecordStream:
    """An in-memory run under construction: ``append(dict_or_record)`` validates order.

    ``source`` (a file name) and each row's ``line`` go into every error and warning.
    ``aliases=None`` uses the built-in names plus entry-point plugins. :meth:`to_run` checks the
    run as a whole (records present, some reward logged) and returns the :class:`Run`.
    """

    def __init__(
        self, *, name: str = "run", source: str | None = None, aliases: Mapping[str, str] | None = None
    ) -> None:
        self.name = name
        self.source = None if source is None else str(source)
        self.aliases = as_table(aliases)
        self.records: list[StepRecord] = []
        self.lines: list[int | None] = []
        self.dropped = 0  # records replaced by a resumed run's re-logged steps
        self._step_mode: str | None = None  # "logged" or "auto" (no step column at all)
        self._unknown: dict[str, None] = {}
        self._non_numeric: dict[str, None] = {}
        self._nonfinite: dict[str, list[Any]] = {}  # name -> [first line, count]
        self._gap_derived: str | None = None
        self._skipped: list[str] = []  # rows without any canonical metric, not at the last step
        self._warned = False
        self._undo: dict[str, Any] | None = None  # a rewind not yet said (see _settle_rewind)
        self.restarted_at: int | None = None  # the line where the run started over from its first step
        self._rewinds: list[Any] | None = None  # after the first re-logged step: [more, last line, dropped]
        self._loc: str | None = self.source  # source of the row being appended (with its label)
        self.names: dict[str, str] = {}  # canonical field -> the logged name that first filled it

    # -- container protocol --------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[StepRecord]:
        return iter(self.records)

    @property
    def last(self) -> StepRecord | None:
        return self.records[-1] if self.records else None

    def extend(self, items: Iterable[Mapping[str, Any] | StepRecord]) -> RecordStream:
        for item in items:
            self.append(item)
        return self

    # -- appending -----------------------------------------------------------------------
    def _error(self, message: str, line: int | None, fld: str | None) -> IngestError:
        return IngestError(message, source=self._loc, line=line, field=fld)

    def append(
        self, item: Mapping[str, Any] | StepRecord, *, line: int | None = None, label: str | None = None
    ) -> StepRecord | None:
        """Add one record (a :class:`StepRecord` or a framework metrics dict); returns it.

        ``line`` (or, for sources without lines, ``label`` such as ``"step 5"``) says where the
        row came from in errors and warnings. A row without any canonical metric (an eval or
        end-of-training summary line) is not an update: at the last step its values join that
        record's ``extra`` (that record is returned); elsewhere it is skipped (None), with one
        warning at the end.
        """
        self._loc = self.source if label is None else f"{self.source or '<stream>'} ({label})"
        if isinstance(item, StepRecord):
            self._admit(item, line, step_field="step", samples_field="samples")
            return item
        m = map_metrics(item, self.aliases, source=self._loc, line=line)
        self._note(m, line)
        for fld, logged in m.names.items():
            self.names.setdefault(fld, logged)
        v, names = m.values, m.names
        step_field = names.get("step", "step")

        # step: logged, or numbered when the log has no step column at all
        if "step" in v:
            if self._step_mode == "auto":
                raise self._error("step appears here but earlier rows had none", line, step_field)
            self._step_mode = "logged"
            step = self._as_int(v["step"], line, step_field, minimum=0)
        else:
            if self._step_mode == "logged":
                raise self._error("row has no step (earlier rows had one)", line, "step")
            self._step_mode = "auto"
            step = self.records[-1].step + 1 if self.records else 1

        last = self.last
        if not any(f in v for f in METRIC_FIELDS + ("samples", "batch", "lr")):
            if last is not None and step == last.step:
                last.extra.update(m.extra)  # an annotation row (summary, eval) at the last step
                return last
            self._skipped.append(_where(self._loc, line))
            return None
        self._rewind_or_check(step, line, step_field)
        prev = self.last
        prev_step = prev.step if prev is not None else 0
        prev_samples = prev.samples if prev is not None else 0
        gap = step - prev_step if prev is not None else max(step, 1)

        samples = batch = None
        if "samples" in v:
            samples = self._as_int(v["samples"], line, names["samples"], minimum=0)
        if "batch" in v:
            batch = self._as_int(v["batch"], line, names["batch"], minimum=1)
        if samples is None and batch is None:
            raise self._error(
                "neither samples nor batch is logged (looked for "
                f"{', '.join(FIELD_ALIASES['samples'] + FIELD_ALIASES['batch'])}): pass the rollouts "
                "per update with --batch N (or --alias NAME=samples / NAME=batch)",
                line,
                "samples",
            )
        if samples is None:
            assert batch is not None
            samples = prev_samples + batch * gap
            if gap > 1:
                self._gap_derived = (
                    f"{_where(self._loc, line)}: samples derived from batch assuming "
                    f"batch {batch} over the {gap - 1} unlogged step(s) before step {step}"
                )
        elif batch is None:
            diff = samples - prev_samples
            if diff > 0 and diff % gap:
                raise self._error(
                    f"cannot derive batch: {diff} samples over {gap} step(s) is not a whole batch per "
                    "step; log batch",
                    line,
                    names["samples"],
                )
            batch = max(diff // gap, 1) if diff > 0 else 1  # diff <= 0 is reported just below
            if gap > 1:
                self._gap_derived = (
                    f"{_where(self._loc, line)}: batch derived from samples over "
                    f"{gap} steps assuming a constant batch"
                )
        record = build_record(
            v,
            m.extra,
            step=step,
            samples=samples,
            batch=batch,
            lr=v.get("lr"),
            source=self._loc,
            line=line,
            names=names,
        )
        self._admit(
            record,
            line,
            step_field=step_field,
            samples_field=names.get("samples", "samples"),
            checked_step=True,
        )
        return record

    def _as_int(self, value: float, line: int | None, fld: str, *, minimum: int) -> int:
        if not math.isfinite(value) or value != int(value):
            raise self._error(f"must be a whole number, got {value!r}", line, fld)
        if value < minimum:
            raise self._error(f"must be >= {minimum}, got {int(value)}", line, fld)
        if value > MAX_BATCH and (minimum == 1 or value > MAX_SAMPLES):
            kind = "batch" if minimum == 1 else "samples"
            raise self._error(f"must be {WHY[kind]}, got {value!r}", line, fld)
        return int(value)

    def _at(self, i: int) -> str:
        line = self.lines[i]
        return f" at line {line}" if line is not None else ""

    def _rewind_or_check(self, step: int, line: int | None, step_field: str) -> None:
        """Drop the records a resumed run re-logs; a step going back to an unseen value is an error."""
        if self._undo is not None:
            self._settle_rewind(step)
        last = self.last
        if last is None or step > last.step:
            return
        idx = next(i for i, r in enumerate(self.records) if r.step >= step)
        if self.records[idx].step != step:
            raise self._error(
                f"step {step} comes after step {last.step}{self._at(-1)} and was never logged "
                "before: steps must increase",
                line,
                step_field,
            )
        n = len(self.records) - idx
        self._settle_rewind(None)
        msg = (
            f"{_where(self._loc, line)}: field {step_field!r}: step {step} logged again "
            f"(first{self._at(idx)}; a resumed run?): keeping the later record(s), "
            f"dropping {n} earlier one(s)"
        )
        # said once the next record shows what it was: a resumed run, or one stray record (the steps
        # then go on past those dropped, which are put back)
        self._undo = {
            "records": self.records[idx:],
            "lines": self.lines[idx:],
            "idx": idx,
            "line": line,
            "step": step,
            "msg": msg,
            "n": n,
            "last": last.step,
        }
        del self.records[idx:]
        del self.lines[idx:]
        self.dropped += n

    def _settle_rewind(self, next_step: int | None) -> None:
        """Decide a pending rewind: ``next_step`` past the dropped records' last step, one record after
        it, means that record was a stray (skipped, the dropped records put back); else a resumed or
        restarted run (warned, or counted after the first)."""
        u, self._undo = self._undo, None
        if u is None:
            return
        stray = next_step is not None and next_step > u["last"] and u["n"] > 1
        if stray and len(self.records) == u["idx"] + 1:
            self.records.pop()
            self.lines.pop()
            self.records.extend(u["records"])
            self.lines.extend(u["lines"])
            self.dropped -= u["n"]
            warnings.warn(
                f"{_where(self._loc, u['line'])}: a stray record: step {u['step']} between steps {u['last']} "
                f"and {next_step} (the steps go on): skipped, the {u['n']} record(s) before it kept",
                IngestWarning,
                stacklevel=5,
            )
            return
        if u["idx"] == 0:  # every record before logged again: the run restarted (a resumed run keeps some)
            self.restarted_at = u["line"]
        if self._rewinds is None:
            self._rewinds = [0, u["line"], 0]
            warnings.warn(u["msg"], IngestWarning, stacklevel=5)
        else:  # counted, said once at the end: a log written twice would warn once a record
            self._rewinds[0] += 1
            self._rewinds[1] = u["line"]
            self._rewinds[2] += u["n"]

    def _admit(
        self,
        record: StepRecord,
        line: int | None,
        *,
        step_field: str,
        samples_field: str,
        checked_step: bool = False,
    ) -> None:
        if not checked_step:
            self._rewind_or_check(record.step, line, step_field)
        prev = self.last
        if prev is not None and record.samples <= prev.samples:
            raise self._error(
                f"samples {record.samples} at step {record.step} do not exceed samples {prev.samples} of "
                f"step {prev.step}{self._at(-1)}: samples are cumulative and must increase",
                line,
                samples_field,
            )
        self.records.append(record)
        self.lines.append(line)

    def _note(self, m: Any, line: int | None) -> None:
        int_names = {m.names[f] for f in INT_FIELDS if f in m.names}
        for name, value in m.nonfinite:
            if name in int_names:
                continue  # an error follows when the integer is read
            what = "null value read as NaN" if value is None else f"non-finite value {value!r} set to NaN"
            self._count_nonfinite(name, line, what)
        for name, value, why in m.implausible:
            self._count_nonfinite(name, line, f"implausible value {value!r} set to NaN (must be {why})")
        for name in m.unknown:
            self._unknown.setdefault(name)
        for name in m.non_numeric:
            self._non_numeric.setdefault(name)

    def _count_nonfinite(self, name: str, line: int | None, what: str) -> None:
        """The first missing (null, NaN, implausible) value of a field warned, the rest counted."""
        seen = self._nonfinite.get(name)
        if seen is None:
            self._nonfinite[name] = [line, 1]
            warnings.warn(f"{_where(self._loc, line)}: field {name!r}: {what}", IngestWarning, stacklevel=5)
        else:
            seen[1] += 1

    # -- finishing -----------------------------------------------------------------------
    def warn_pending(self) -> None:
        """Emit the once-per-run warnings (unknown names, repeated non-finite values, gaps)."""
        self._settle_rewind(None)
        if self._warned:
            return
        self._warned = True
        where = self.source or "<stream>"
        if self._unknown:
            warnings.warn(
                f"{where}: unknown metrics kept in extra: {', '.join(self._unknown)}",
                IngestWarning,
                stacklevel=3,
            )
        if self._non_numeric:
            warnings.warn(
                f"{where}: non-numeric columns dropped: {', '.join(self._non_numeric)}",
                IngestWarning,
                stacklevel=3,
            )
        for name, (first, count) in self._nonfinite.items():
            if count > 1:
                warnings.warn(
                    f"{where}: field {name!r}: {count} non-finite values set to NaN (nulls and implausible "
                    f"values counted with them; first at line {first})",
                    IngestWarning,
                    stacklevel=3,
                )
        if self._skipped:
            warnings.warn(
                f"{self._skipped[0]}: {len(self._skipped)} row(s) without any reward, samples, "
                "batch or other canonical metric skipped (eval or summary lines?)",
                IngestWarning,
                stacklevel=3,
            )
        if self._gap_derived:
            warnings.warn(self._gap_derived, IngestWarning, stacklevel=3)
        if self._rewinds is not None and self._rewinds[0]:
            more, last, dropped = self._rewinds
            warnings.warn(
                f"{_where(self.source, last)}: {more} more step(s) logged again after the first (the last "
                f"here): each time the later record(s) kept, {dropped} earlier one(s) dropped",
                IngestWarning,
                stacklevel=3,
            )

    def to_run(self, *, name: str | None = None, require_reward: bool = True) -> Run:
        """The validated :class:`Run`; errors when empty or (``require_reward``) without any reward."""
        if not self.records:
            if self._skipped:
                seen = ", ".join(list(self._unknown)[:12]) or "none"
                raise IngestError(
                    f"{len(self._skipped)} row(s) but none with a known metric (unknown names: {seen}); "
                    "name yours with --alias KEY=FIELD (e.g. --alias acc=reward_mean)",
                    source=self.source or "<stream>",
                )
            raise IngestError("no records (empty log)", source=self.source or "<stream>")
        if require_reward and not any(math.isfinite(r.reward_mean) for r in self.records):
            raise IngestError(
                "no reward metric: none of "
                + ", ".join(FIELD_ALIASES["reward_mean"])
                + " has a finite value (name yours with --alias NAME=reward_mean)",
                source=self.source or "<stream>",
                field="reward_mean",
            )
        self.warn_pending()
        run = Run(list(self.records), name=name or self.name, source=self.source)
        if self.restarted_at is not None:
            run.meta["restarted_at_line"] = self.restarted_at
        return run

    def __repr__(self) -> str:
        return f"RecordStream({self.name!r}, {len(self.records)} records, source={self.source!r})"
