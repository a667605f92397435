"""The offline failure clock: rollouts a run consumed before its first sustained alarm."""

from __future__ import annotations

import copy
from typing import Iterable, Sequence

from rlvr_schedule.clocks.failure.base import Detector
from rlvr_schedule.clocks.failure.detectors import default_detectors
from rlvr_schedule.records import Run, StepRecord

__all__ = ["FailureClock"]

class FailureClock:
    """``fit(run)``: rollouts consumed before collapse = onset of the first sustained alarm.

    Fitted: ``failure_samples_`` (None if no detector fired), ``failure_step_``, ``signal_``
    (name of the detector that fired first), ``alarms_`` (first alarm of every detector that fired).
    Detectors are copied per fit, so one clock can fit many runs.
    """

    def __init__(self, detectors: Sequence[Detector] | None = None, *, stop_at_failure: bool = True) -> None:
        self.detectors = list(detectors) if detectors is not None else None
        self.stop_at_failure = stop_at_failure

    def fit(self, run: Run | Iterable[StepRecord]) -> "FailureClock":
        """With ``stop_at_failure`` (default) reading stops once no later alarm can have an earlier
        onset (``max patience`` records after the first confirmation), so ``alarms_`` holds the
        alarms up to the failure; False reads the whole run."""
        dets = copy.deepcopy(self.detectors) if self.detectors is not None else default_detectors()
        left = -1
        horizon = max((d.patience for d in dets), default=1)
        for rec in run:
            for d in dets:
                if d.update(rec) is not None and left < 0 and self.stop_at_failure:
                    left = horizon
            if left >= 0:
                left -= 1
                if left < 0:
                    break
        alarms = sorted((d.first_alarm for d in dets if d.first_alarm is not None),
                        key=lambda a: (a.samples, a.step))
        self.alarms_ = alarms
        first = alarms[0] if alarms else None
        self.failure_samples_ = None if first is None else first.samples
        self.failure_step_ = None if first is None else first.step
        self.signal_ = None if first is None else first.name
        return self
