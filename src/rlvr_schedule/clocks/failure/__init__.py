"""The failure clock: detectors of collapse, the samples a run survives, and a forecast.

The failure point is the onset of collapse: the reward fallen from its best and staying down,
entropy exhausted, a sustained blow-up of the gradient norm or the KL. Spikes, KL rising from ~0,
dips the run recovers from, and the length/clip/log-prob-mismatch/zero-variance signals are
warnings, reported with their lead; a run that never progressed and whose reward declined from
the start is diverging, which is no failure-clock reading. Each detector watches one signal in a
record stream (``update(record) -> Alarm | None``, failures and divergences only; warnings in
``detector.warnings``) and counts a condition once it held ``patience`` records and
``patience_samples`` rollouts; the alarm carries the *onset* (first record of that streak) and
says why (signal, value, baseline, threshold, step, rollouts). Thresholds were set on the
calibration half of public real runs (tests/data/real/runs, docs/RESULTS.md section 5).

Warm-ups and smoothing spans are counted in rollouts (``warmup_samples``, ``span_samples``), with
a small floor in records: a warm-up of N records would cover 16x more training at a 16x larger
batch, so only small batches could alarm within a budget and a sweep's fitted failure exponent
would lean towards a step clock (1) even where failure arrives on a sample clock (0).

Modules: ``base`` (Alarm, Detector), ``detectors``, ``clock`` (FailureClock), ``forecast``
(FailureForecast), ``scaling`` (FailureScalingFit); everything is re-exported here.

* :class:`FailureClock` - ``fit(run)``: rollouts consumed before the onset of collapse.
* :class:`FailureForecast` - online: samples left until a signal's trend reaches its threshold.
* :class:`FailureScalingFit` - across a sweep: failure samples ~ B^alpha (0: sample clock,
  1: step clock) and the pooled failure samples.
"""

from rlvr_schedule.clocks.failure.base import (
    Alarm,
    Detector,
    expected_group_variance,
    expected_zero_std_fraction,
)
from rlvr_schedule.clocks.failure.clock import FailureClock
from rlvr_schedule.clocks.failure.detectors import (
    ClipRatioRise,
    EntropyCollapse,
    EntropySurge,
    ForecastWarning,
    GradNormSpike,
    KLBlowup,
    LogProbMismatch,
    ResponseLengthSurge,
    RewardCrash,
    RewardFall,
    ZeroVarianceGroups,
    default_detectors,
)
from rlvr_schedule.clocks.failure.forecast import FailureForecast
from rlvr_schedule.clocks.failure.scaling import FailureScalingFit

__all__ = [
    "Alarm",
    "Detector",
    "EntropyCollapse",
    "RewardCrash",
    "RewardFall",
    "GradNormSpike",
    "KLBlowup",
    "ZeroVarianceGroups",
    "EntropySurge",
    "ResponseLengthSurge",
    "ClipRatioRise",
    "LogProbMismatch",
    "ForecastWarning",
    "default_detectors",
    "expected_group_variance",
    "expected_zero_std_fraction",
    "FailureClock",
    "FailureForecast",
    "FailureScalingFit",
]
