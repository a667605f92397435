"""Batch schedules: the two-clock policy, static multi-step schedules and their config files.

Hosts drive any of them the same way (``step(record) -> Decision``, ``state_dict()``), see
:class:`rlvr_schedule.records.BatchSchedule`.
"""

from rlvr_schedule.policy.config import load_schedule, read_config, schedule_from_dict
from rlvr_schedule.policy.constraints import BatchConstraints
from rlvr_schedule.policy.scheduler import PolicyConfig, TwoClockScheduler
from rlvr_schedule.policy.static import StaticSchedule

__all__ = [
    "BatchConstraints",
    "PolicyConfig",
    "StaticSchedule",
    "TwoClockScheduler",
    "load_schedule",
    "read_config",
    "schedule_from_dict",
]
