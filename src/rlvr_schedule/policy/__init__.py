"""Batch schedules: the two-clock policy, static multi-step schedules, their config files, and the
baselines it is measured against (a linear ramp-up, a Pollux-style noise-scale rule).

All subclass :class:`~rlvr_schedule.policy.base.Schedule` (``propose``/``commit``/``hold``,
``step``, ``state_dict``); hosts run them through :class:`rlvr_schedule.driver.ScheduleDriver`.
"""

from rlvr_schedule.policy.base import Schedule
from rlvr_schedule.policy.baselines import LinearRampSchedule, NoiseScaleAdaptiveSchedule
from rlvr_schedule.policy.config import load_schedule, read_config, schedule_from_dict
from rlvr_schedule.policy.constraints import BatchConstraints
from rlvr_schedule.policy.policy_config import PolicyConfig
from rlvr_schedule.policy.scheduler import TwoClockScheduler
from rlvr_schedule.policy.static import StaticSchedule

__all__ = [
    "BatchConstraints",
    "LinearRampSchedule",
    "NoiseScaleAdaptiveSchedule",
    "PolicyConfig",
    "Schedule",
    "StaticSchedule",
    "TwoClockScheduler",
    "load_schedule",
    "read_config",
    "schedule_from_dict",
]
