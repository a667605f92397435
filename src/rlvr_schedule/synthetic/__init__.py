"""Synthetic runs with known clocks: sweeps for fits, a closed-loop task for schedules, pytest helpers.

For users who test a schedule before spending GPU hours (see :mod:`rlvr_schedule.synthetic.testing`).
"""

from rlvr_schedule.synthetic.environment import SyntheticEnvironment
from rlvr_schedule.synthetic.generator import (
    FRAMEWORK_KEYS,
    NAME_STYLES,
    make_run,
    make_sweep,
    to_framework_dict,
    write_run_log,
)
from rlvr_schedule.synthetic.model import ClockModel
from rlvr_schedule.synthetic.testing import (
    ConstantComparison,
    SwitchCheck,
    assert_beats_constant,
    assert_switches_before_failure,
    samples_to_target,
)

__all__ = [
    "FRAMEWORK_KEYS",
    "NAME_STYLES",
    "ClockModel",
    "ConstantComparison",
    "SwitchCheck",
    "SyntheticEnvironment",
    "assert_beats_constant",
    "assert_switches_before_failure",
    "make_run",
    "make_sweep",
    "samples_to_target",
    "to_framework_dict",
    "write_run_log",
]
