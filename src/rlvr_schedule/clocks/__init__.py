"""The two clocks: progress (samples to make progress; the critical batch) and failure (samples
consumed before collapse), offline from logs and online from a record stream."""

from rlvr_schedule.clocks.ceiling import RewardCeilingFit
from rlvr_schedule.clocks.failure import (
    Alarm,
    ClipRatioRise,
    Detector,
    EntropyCollapse,
    EntropySurge,
    FailureClock,
    FailureForecast,
    FailureScalingFit,
    GradNormSpike,
    KLBlowup,
    LogProbMismatch,
    ResponseLengthSurge,
    RewardCrash,
    ZeroVarianceGroups,
    default_detectors,
    expected_group_variance,
    expected_zero_std_fraction,
)
from rlvr_schedule.clocks.online import GradientNoiseScale, OnlineProgress, two_batch_estimate
from rlvr_schedule.clocks.progress import (
    EVAL_METRIC,
    CriticalBatchFit,
    ProgressClock,
    default_target,
    progress_metric,
    reward_curve,
)
from rlvr_schedule.clocks.sweep import RunFit, SweepFit, fit_sweep

__all__ = [
    "ProgressClock",
    "CriticalBatchFit",
    "default_target",
    "reward_curve",
    "progress_metric",
    "EVAL_METRIC",
    "fit_sweep",
    "SweepFit",
    "RunFit",
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
    "RewardCeilingFit",
    "OnlineProgress",
    "GradientNoiseScale",
    "two_batch_estimate",
]
