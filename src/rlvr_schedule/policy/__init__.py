"""Batch schedules: the two-clock policy, static multi-step schedules, their config files, and the
baselines it is measured against (a linear ramp-up, a Pollux-style noise-scale rule).

Hosts drive any of them the same way (``step(record) -> Decision``, ``state_dict()``), see
:class:`rlvr_schedule.records.BatchSchedule`.
"""

from rlvr_schedule.policy.baselines import LinearRampSchedule, NoiseScaleAdaptiveSchedule
from rlvr_schedule.policy.config import load_schedule, read_config, schedule_from_dict
from rlvr_schedule.policy.constraints import BatchConstraints
from rlvr_schedule.policy.scheduler import PolicyConfig, TwoClockScheduler
from rlvr_schedule.policy.static import StaticSchedule

__all__ = [
    "BatchConstraints",
    "LinearRampSchedule",
    "NoiseScaleAdaptiveSchedule",
    "PolicyConfig",
    "StaticSchedule",
    "TwoClockScheduler",
    "load_schedule",
    "read_config",
    "schedule_from_dict",
]
