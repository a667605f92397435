"""rlvr-schedule: progress and failure clocks for RL with verifiable rewards.

The core imports with numpy alone; pluggy, pyyaml, matplotlib and the frameworks are
imported lazily where they are used.
"""

from rlvr_schedule.driver import ScheduleDriver
from rlvr_schedule.records import BatchSchedule, Decision, Run, Stage, StepRecord

__version__ = "0.1.0"
__all__ = ["StepRecord", "Run", "Stage", "Decision", "BatchSchedule", "ScheduleDriver", "__version__"]
