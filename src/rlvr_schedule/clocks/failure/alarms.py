"""The collapse watch: which detector signs are raised to the user, once each, as they come.

A host acts on an alarm (a checkpoint before the fall, a plugin's ``rlvr_schedule_on_alarm``, the
``--on-alarm`` command of ``rlvr-schedule watch``), so an alarm must be rare on healthy runs and come
before the collapse. :class:`CollapseWatch` runs the default detectors over the record stream and
raises, once per detector and kind:

- every failure (the failure clock's reading: the collapse has begun);
- a warning of a kind in :data:`RAISED_WARNINGS` (a precursor that fires on few healthy runs;
  the other kinds are diagnostics: kept in ``diagnostics_`` and shown in reports, never raised);
  the live failure forecast (:class:`ForecastWarning`) is one where a host opts in to it
  (``default_detectors(forecast=True)``), judged like the others;
- the sweep's failure clock reaching its lower bound (``clock_spent`` >= 1: the rollouts spent,
  counted at each stage's batch and LR, reach the lower end of the failure interval), when the
  schedule carries one.

Numpy only; a host feeds it from :class:`~rlvr_schedule.driver.ScheduleDriver`, the CLI from the
records it reads.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rlvr_schedule.clocks.failure.base import Alarm, Detector
from rlvr_schedule.clocks.failure.detectors import ForecastWarning, default_detectors
from rlvr_schedule.records import StepRecord, WatchAlarm

__all__ = [
    "RAISED_WARNINGS",
    "DIAGNOSTIC_WARNINGS",
    "ForecastWarning",
    "WatchAlarm",
    "CollapseWatch",
    "watch_detectors",
    "logging_gap_note",
]

#: Warning kinds raised to the user (an alarm: checkpoint, hook, ``--on-alarm``): on the calibration
#: half of each source of labelled runs (the reference trainer's, the public real runs, the
#: synthetic ones; docs/RESULTS.md section 5) each fired on at most 10% of the healthy runs. The
#: failure forecast (``failure_forecast``, raised where a host opts in to it:
#: ``default_detectors(forecast=True)``) comes before most synthetic collapses, none of the recorded ones.
RAISED_WARNINGS: frozenset[str] = frozenset(
    {
        "entropy_surge",
        "clip_ratio_rise",
        "logprob_mismatch",
        "failure_forecast",
    }
)
#: Warning kinds kept as diagnostics (shown in reports, never raised): each fired on more than 10%
#: of the healthy calibration runs of some source (entropy below 10% of its early level: 1 of 4
#: trainer runs; KL rising, responses at the length cap, zero-variance groups: most trainer or
#: synthetic runs; the reward crash's early warning: 7 of 30 healthy runs of the watch's own
#: synthetic set, whose dips below half recover, while ``reward_fall`` raises the fall itself within
#: a few records), too often to act on; and where the raised kinds together fired on more than 10%
#: of a source's healthy calibration runs, the kind that came before no collapse of any source
#: (gradient-norm spikes: 1 of 31 healthy real runs, a lead on none of the 119 calibration collapses). A failure of any
#: detector is always raised.
DIAGNOSTIC_WARNINGS: frozenset[str] = frozenset(
    {
        "entropy_collapse",
        "kl_blowup",
        "response_length",
        "zero_variance_groups",
        "reward_crash",
        "grad_norm_spike",
    }
)


def logging_gap_note(every: int) -> str:
    """The set-up warning for a log (or a host) that hands the watch a record every ``every`` updates:
    what it costs in latency, and how to log every update."""
    return (
        f"a record every {every} updates: the collapse watch needs 2-4 records after a collapse to "
        f"raise it (measured on public TRL logs kept every 5 updates: 10-20 updates late), so here "
        f"{2 * every}-{4 * every} updates; log every update (TRL: logging_steps=1) to raise it within a "
        f"few updates"
    )


#: The name of the alarm raised when the sweep's failure clock reaches its lower bound.
CLOCK_ALARM = "failure_clock"


def watch_detectors() -> list[Detector]:
    """The watch's detectors: :func:`default_detectors`, the one set every entry point runs."""
    return default_detectors()


class CollapseWatch:
    """``update(record) -> [WatchAlarm]``: the alarms this record raised (usually none).

    ``detectors``: default :func:`watch_detectors`; ``raised``: the
    warning kinds raised (default :data:`RAISED_WARNINGS`). ``clock``: an object with ``used_`` (the
    part of a failure clock's lower bound spent, e.g. the two-clock policy's
    :class:`~rlvr_schedule.policy.triggers.FailureClockTrigger`), read after each record; None: no
    clock alarm. Fitted: ``alarms_`` (every raised alarm, in order), ``diagnostics_`` (the first
    warning of each diagnostic kind, as :class:`~rlvr_schedule.clocks.failure.Alarm`).
    """

    def __init__(
        self,
        detectors: Sequence[Detector] | None = None,
        *,
        raised: Iterable[str] | None = None,
        clock: Any = None,
    ) -> None:
        self.detectors = list(detectors) if detectors is not None else watch_detectors()
        self.raised = frozenset(RAISED_WARNINGS if raised is None else raised)
        self.clock = clock
        self.alarms_: list[WatchAlarm] = []
        self.diagnostics_: list[Alarm] = []
        self._seen: set[tuple[str, str]] = set()

    @property
    def clock_spent(self) -> float:
        """The part of the failure clock's lower bound spent (NaN without a clock)."""
        used = getattr(self.clock, "used_", None)
        return float(used) if used is not None else math.nan

    def update(self, record: StepRecord) -> list[WatchAlarm]:
        new: list[WatchAlarm] = []
        for det in self.detectors:
            n_warn = len(det.warnings)
            alarm = det.update(record)
            for w in det.warnings[n_warn:]:
                self._raise(w, "warning", record, new)
            if alarm is not None and alarm.kind == "failure":
                self._raise(alarm, "failure", record, new)
        if self.clock_spent >= 1.0 and (CLOCK_ALARM, "warning") not in self._seen:
            self._seen.add((CLOCK_ALARM, "warning"))
            new.append(
                WatchAlarm(
                    "warning",
                    CLOCK_ALARM,
                    int(record.step),
                    int(record.samples),
                    int(record.step),
                    int(record.samples),
                    "the failure clock reached its lower bound (the sweep's earliest collapse)",
                )
            )
        self.alarms_ += new
        return new

    def _raise(self, a: Alarm, kind: str, record: StepRecord, out: list[WatchAlarm]) -> None:
        key = (a.name, kind)
        if key in self._seen:
            return
        if kind == "warning" and a.name not in self.raised:
            self._seen.add(key)
            self.diagnostics_.append(a)
            return
        self._seen.add(key)
        out.append(
            WatchAlarm(kind, a.name, int(record.step), int(record.samples), a.step, a.samples, a.message)
        )

    def fit(self, records: Iterable[StepRecord]) -> CollapseWatch:
        """Feed a whole run (offline: what the watch would have raised, and when)."""
        for rec in records:
            self.update(rec)
        return self

    def copy(self) -> CollapseWatch:
        return copy.deepcopy(self)

    # --- state ----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "detectors": [d.state_dict() for d in self.detectors],
            "seen": sorted([list(k) for k in self._seen]),
            "alarms": [a.to_dict() for a in self.alarms_],
            "diagnostics": [a.to_dict() for a in self.diagnostics_],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        # by name: a detector this watch has and the state lacks starts fresh (a watch configured
        # differently from the saved one still resumes)
        saved = {st.get("name"): st for st in state.get("detectors", [])}
        for det in self.detectors:
            if det.name in saved:
                det.load_state_dict(saved[det.name])
        self._seen = {(str(k[0]), str(k[1])) for k in state.get("seen", [])}
        self.alarms_ = [WatchAlarm.from_dict(a) for a in state.get("alarms", [])]
        self.diagnostics_ = [Alarm.from_dict(a) for a in state.get("diagnostics", [])]
