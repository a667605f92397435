"""StaticSchedule: switches at until_samples, `switched` exactly on change, state round trip."""

from __future__ import annotations

import json

import pytest

from rlvr_schedule.errors import ConfigError
from rlvr_schedule.policy import BatchConstraints, StaticSchedule
from rlvr_schedule.records import BatchSchedule, Stage, StepRecord


def _drive(sched, steps):
    samples, out = 0, []
    for i in range(steps):
        b = sched.current.batch
        samples += b
        out.append(sched.step(StepRecord(step=i, samples=samples, batch=b, lr=sched.current.lr)))
    return out


def test_switches_at_until_samples():
    s = StaticSchedule(
        [Stage(64, 1e-6, until_samples=640), Stage(256, 2e-6, until_samples=2176), Stage(512, 3e-6)]
    )
    assert isinstance(s, BatchSchedule)
    ds = _drive(s, 20)
    switched = [d for d in ds if d.switched]
    assert [(d.samples, d.batch, d.lr, d.stage) for d in switched] == [
        (640, 256, 2e-6, 1),
        (2176, 512, 3e-6, 2),
    ]
    assert all(d.batch == 64 for d in ds[:9]) and ds[9].batch == 256
    assert s.stages[1].start_samples == 640 and s.stages[2].start_samples == 2176
    assert "640" in switched[0].reason


def test_equal_consecutive_stages_are_not_a_switch():
    s = StaticSchedule(
        [
            {"batch": 8, "lr": 1e-6, "until_samples": 16},
            {"batch": 8, "lr": 1e-6, "until_samples": 40},
            {"batch": 8, "lr": 2e-6, "until_samples": None},
        ]
    )
    ds = _drive(s, 8)
    assert [d.switched for d in ds] == [False, False, False, False, True, False, False, False]
    assert [d.stage for d in ds] == [0, 1, 1, 1, 2, 2, 2, 2]


def test_jumps_over_several_boundaries_in_one_record():
    s = StaticSchedule([Stage(8, 1.0, until_samples=10), Stage(16, 2.0, until_samples=20), Stage(32, 3.0)])
    d = s.step(StepRecord(step=0, samples=100, batch=8, lr=1.0))
    assert (d.batch, d.stage, d.switched) == (32, 2, True)


def test_state_round_trip_gives_same_decisions():
    stages = [Stage(64, 1e-6, until_samples=640), Stage(128, 1.4e-6, until_samples=1500), Stage(256, 2e-6)]
    a = StaticSchedule(stages)
    recs = [StepRecord(step=i, samples=64 * (i + 1), batch=64, lr=1e-6) for i in range(30)]
    full = [a.step(r) for r in recs]
    b = StaticSchedule(stages)
    first = [b.step(r) for r in recs[:12]]
    c = StaticSchedule(stages)
    c.load_state_dict(json.loads(json.dumps(b.state_dict())))
    assert first + [c.step(r) for r in recs[12:]] == full


def test_load_state_of_other_schedule_is_refused():
    a = StaticSchedule([Stage(8, 1.0, until_samples=10), Stage(16, 1.0)])
    b = StaticSchedule([Stage(8, 1.0, until_samples=99), Stage(16, 1.0)])
    with pytest.raises(ConfigError, match="different schedule"):
        b.load_state_dict(a.state_dict())


@pytest.mark.parametrize(
    "stages, field",
    [
        ([], "stages"),
        ([Stage(8, 1.0, until_samples=100), Stage(16, 1.0, until_samples=100)], "stages[1].until_samples"),
        ([Stage(8, 1.0, until_samples=None), Stage(16, 1.0)], "stages[0].until_samples"),
        ([Stage(8, -1.0)], "stages[0].lr"),
        ([Stage(0, 1.0)], "stages[0].batch"),
        ([Stage(12, 1.0)], "stages[0].batch"),  # not a multiple of group size 8
    ],
)
def test_invalid_stages_name_the_field(stages, field):
    with pytest.raises(ConfigError) as err:
        StaticSchedule(stages, BatchConstraints(group_size=8), source="plan.yaml")
    assert err.value.field == field
    assert "plan.yaml" in str(err.value)
