"""The failure clock: detectors of collapse, the samples a run survives, and a forecast.

GRPO-style training fails in a few recognisable ways: policy entropy collapses, the reward
crashes from its best, the gradient norm or the KL to the reference spikes, or most groups stop
carrying signal because every rollout of a prompt gets the same reward. Each detector watches one
of these in a record stream (``update(record) -> Alarm | None``) and raises an alarm only once the
condition held for ``patience`` consecutive records; the alarm carries the *onset* (first record
of that streak) so the measured failure point is not delayed by the confirmation.

Warm-ups and smoothing spans are counted in rollouts (``warmup_samples``, ``span_samples``), with
a small floor in records: a warm-up of N records would cover 16x more training at a 16x larger
batch, so only small batches could alarm within a budget and a sweep's fitted failure exponent
would lean towards a step clock (1) even where failure arrives on a sample clock (0).

Modules: ``base`` (Alarm, Detector), ``detectors``, ``clock`` (FailureClock), ``forecast``
(FailureForecast), ``scaling`` (FailureScalingFit); everything is re-exported here.

* :class:`FailureClock` - ``fit(run)``: rollouts consumed before the first sustained alarm.
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
    GradNormSpike,
    KLBlowup,
    LogProbMismatch,
    ResponseLengthSurge,
    RewardCrash,
    ZeroVarianceGroups,
    _RobustSpike,  # noqa: F401  (kept importable from here)
    default_detectors,
)
from rlvr_schedule.clocks.failure.forecast import FailureForecast
from rlvr_schedule.clocks.failure.scaling import FailureScalingFit

__all__ = [
    "Alarm",
    "Detector",
    "EntropyCollapse",
    "RewardCrash",
    "GradNormSpike",
    "KLBlowup",
    "ZeroVarianceGroups",
    "EntropySurge",
    "ResponseLengthSurge",
    "ClipRatioRise",
    "LogProbMismatch",
    "default_detectors",
    "expected_group_variance",
    "expected_zero_std_fraction",
    "FailureClock",
    "FailureForecast",
    "FailureScalingFit",
]
