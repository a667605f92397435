"""The offline failure clock: rollouts a run consumed before the onset of its collapse."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from rlvr_schedule.clocks.failure.base import Alarm, Detector
from rlvr_schedule.clocks.failure.detectors import default_detectors
from rlvr_schedule.records import Run, StepRecord

__all__ = ["FailureClock"]


class FailureClock:
    """``fit(run)``: rollouts consumed before collapse = onset of the first sustained failure alarm.

    The same causal rules as online (each detector sees records up to the current one), so ``fit``,
    a live forecast and a policy agree on where a run failed. Only failure-kind alarms (entropy
    exhausted, reward fallen from its best and staying down, a sustained blow-up) set the clock;
    warnings (spikes, KL rising from ~0, recovered dips, length/clip/mismatch signals) are reported
    in ``warnings_``; ``lead(alarm)`` gives rollouts from an alarm to the failure point.

    Fitted: ``failure_samples_`` (None if no failure, or if the run diverged), ``failure_step_``,
    ``signal_`` (name of the detector that fired first), ``failure_alarm_`` (its :class:`Alarm`,
    which says why: signal, value, baseline, threshold, step, rollouts), ``alarms_`` (first
    failure alarm of every detector that fired), ``warnings_`` (time-ordered), ``diverging_`` and
    ``divergence_``: a run whose reward fell from the start without ever progressing is reported
    as diverging, not as a failure-clock reading (at a batch above 2B* per-rollout progress is
    negative; its early "failure" would drag a sweep's pooled failure samples down and its exponent
    negative). That includes a fall fast enough to raise a failure alarm live (a cliff right after
    the first records): the alarm stays a failure in a live watch, the clock reads a divergence.
    Detectors are copied per fit, so one clock can fit many runs.
    """

    def __init__(self, detectors: Sequence[Detector] | None = None, *, stop_at_failure: bool = True) -> None:
        self.detectors = list(detectors) if detectors is not None else None
        self.stop_at_failure = stop_at_failure

    def detector_set(self) -> list[Detector]:
        """Fresh detectors for one fit: a copy of ``detectors``, else :func:`default_detectors` (the
        set ``watch``, the driver and every adapter run too)."""
        return copy.deepcopy(self.detectors) if self.detectors is not None else default_detectors()

    def fit(self, run: Run | Iterable[StepRecord]) -> FailureClock:
        """With ``stop_at_failure`` (default) reading stops once no later alarm can have an earlier
        onset (``max patience`` records after the first confirmation), so ``alarms_`` and
        ``warnings_`` hold what came up to the failure; False reads the whole run."""
        dets = self.detector_set()
        left = -1
        horizon = max((d.patience for d in dets), default=1)
        first: Alarm | None = None
        for rec in run:
            for d in dets:
                a = d.update(rec)
                if a is not None and a.kind == "failure" and self.stop_at_failure:
                    if left < 0:
                        left = horizon
                    if first is None or a.samples < first.samples:
                        first = a
            if left >= 0:
                left -= 1
                # a streak that began before the first failure's onset may still count: read on
                if left < 0 and not _open_before(dets, first):
                    break
        # a live failure alarm that fell from the start of a run that never progressed (at a batch
        # past 2B* the reward can halve every update) is read here as the divergence it is
        firsts = [
            dataclasses.replace(d.first_alarm, kind="divergence") if d.first_from_start else d.first_alarm
            for d in dets
            if d.first_alarm is not None
        ]
        failures = sorted((a for a in firsts if a.kind == "failure"), key=lambda a: (a.samples, a.step))
        divergences = sorted((a for a in firsts if a.kind == "divergence"), key=lambda a: (a.samples, a.step))
        # a detector whose first alarm was a divergence may have a later failure alarm: only its first
        # alarm is kept, which is what decides here (a run that fell from the start first diverged)
        self.divergence_: Alarm | None = divergences[0] if divergences else None
        first = failures[0] if failures else None
        self.diverging_ = self.divergence_ is not None and (
            first is None or self.divergence_.samples <= first.samples
        )
        self.alarms_ = failures
        self.warnings_ = sorted((w for d in dets for w in d.warnings), key=lambda a: (a.samples, a.step))
        if self.diverging_:
            first = None
        self.failure_alarm_ = first
        self.failure_samples_ = None if first is None else first.samples
        self.failure_step_ = None if first is None else first.step
        self.signal_ = None if first is None else first.name
        return self

    def lead(self, alarm: Alarm) -> float | None:
        """Rollouts from ``alarm``'s onset to the failure point (None without a failure)."""
        if self.failure_samples_ is None:
            return None
        return float(self.failure_samples_ - alarm.samples)

    def report(self) -> dict[str, Any]:
        """What was found and why, JSON-ready: the failure (or divergence) and every warning with
        its lead."""

        def row(a: Alarm) -> dict[str, Any]:
            d = a.to_dict()
            d["lead"] = self.lead(a)
            return d

        return {
            "failure": None if self.failure_alarm_ is None else self.failure_alarm_.to_dict(),
            "diverging": self.diverging_,
            "divergence": None if self.divergence_ is None else self.divergence_.to_dict(),
            "warnings": [row(w) for w in self.warnings_],
        }


def _open_before(dets: Sequence[Detector], first: Alarm | None) -> bool:
    """Whether a failure-kind detector has an unconfirmed streak with an onset before ``first``'s."""
    if first is None:
        return False
    return any(
        d.kind == "failure" and d._onset is not None and not d._fired and d._onset[1] < first.samples
        for d in dets
    )
