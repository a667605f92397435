"""The host's grid of runnable batches: the merge into a schedule's constraints, its set-up
warnings, the snap of the stage in effect, and the driver's gate (only batches on the grid reach the
host, the reason saying when one was snapped)."""

from __future__ import annotations

import pytest

from rlvr_schedule.driver import ScheduleDriver
from rlvr_schedule.errors import ConfigError
from rlvr_schedule.policy import BatchConstraints, PolicyConfig, StaticSchedule, TwoClockScheduler
from rlvr_schedule.records import StepRecord


def test_merge_without_a_user_divisor_takes_the_hosts_grid_silently():
    merged, notes = BatchConstraints(group_size=8).with_host_grid(32)
    assert notes == []
    assert merged.multiple == 32 and merged.divisor == 32 and merged.group_size == 8


def test_a_user_divisor_on_the_grid_is_kept_and_a_conflicting_one_warns():
    kept, notes = BatchConstraints(group_size=8, divisor=96).with_host_grid(48)
    assert notes == [] and kept.multiple == 96
    merged, notes = BatchConstraints(group_size=8, divisor=32).with_host_grid(48)
    assert merged.multiple == 96
    assert len(notes) == 1 and "divisor 32 conflicts" in notes[0] and "multiples of 48" in notes[0]


def test_a_max_batch_below_the_grid_is_raised_with_a_warning():
    merged, notes = BatchConstraints(group_size=8, max_batch=40).with_host_grid(48)
    assert merged.highest == 48 and any("max_batch becomes 48" in n for n in notes)


def test_bad_host_grid_is_a_config_error():
    with pytest.raises(ConfigError, match="divisor"):
        BatchConstraints().with_host_grid(0)


def _auto(**kw):
    base = dict(initial_batch="auto", critical_batch=1024, sample_tolerance=0.10, base_lr=1e-6, growth=2.0)
    base.update(kw)
    return TwoClockScheduler(PolicyConfig(**base))


def test_the_online_stage_in_effect_is_snapped_with_its_lr_by_the_rule_and_the_reason_says_so():
    s = _auto(constraints={"group_size": 16}, lr_rule="sqrt", base_batch=176, critical_batch=960)
    assert s.current.batch == 176  # 0.18 x 960 = 174.5, the nearest whole groups of 16
    notes = s.set_host_grid(BatchConstraints(divisor=48))
    assert s.current.batch == 192  # the nearest multiple of 48
    assert s.current.lr == pytest.approx(1e-6 * (192 / 176) ** 0.5)
    assert "snapped to the host's grid (multiples of 48): 176 -> 192" in s.current.reason
    assert any("176 -> 192" in n for n in notes)
    # the policy's own snaps now land on the grid: its growth step
    assert s._next_stage(s.current)[0] == 384


def test_republishing_merges_into_the_users_constraints_not_the_last_grid():
    s = _auto(constraints={"group_size": 8, "divisor": 32})
    assert s.set_host_grid(BatchConstraints(divisor=48))  # conflict: multiples of 96
    assert s.constraints.multiple == 96
    notes = s.set_host_grid(BatchConstraints(divisor=16))  # a resume on fewer ranks: 32 is on it
    assert s.constraints.multiple == 32 and not any("conflicts" in n for n in notes)


def test_a_fixed_schedule_keeps_its_stages_and_the_driver_snaps_what_the_host_runs():
    s = StaticSchedule([{"batch": 128, "lr": 1e-3, "until_samples": 256}, {"batch": 256, "lr": 2e-3}])
    ran = []
    d = ScheduleDriver(s, lambda b, lr: ran.append((b, lr)))
    notes = d.set_host_grid(BatchConstraints(divisor=48))
    assert [st.batch for st in s.stages] == [128, 256]
    assert notes == [
        "stage 0 (128 rollouts) is off the host's grid (multiples of 48): the host runs 144",
        "stage 1 (256 rollouts) is off the host's grid (multiples of 48): the host runs 240",
    ]
    assert d.start() and ran == [(144, 1e-3)]
    dec = None
    for i in range(4):
        dec = d.observe(StepRecord(step=i + 1, samples=144 * (i + 1), batch=144, lr=1e-3))
        if dec.switched:
            break
    assert dec is not None and dec.switched and dec.batch == 240
    assert "snapped to the host's grid (multiples of 48): 256 -> 240" in dec.reason
    assert ran[-1] == (240, 2e-3) and d.in_effect == (240, 2e-3)
    # the schedule's own bookkeeping stays in its terms: no switch proposed again
    nxt = d.observe(StepRecord(step=9, samples=2000, batch=240, lr=2e-3))
    assert not nxt.switched and nxt.batch == 240 and len(ran) == 2


def test_a_saved_stage_off_a_new_grid_is_snapped_at_resume_with_a_warning():
    s = _auto(constraints={"group_size": 8})
    d = ScheduleDriver(s, lambda b, lr: True)
    d.resume_target = (96, 1e-6)  # saved on 2 ranks x 48
    notes = d.set_host_grid(BatchConstraints(divisor=72))  # resumed on 3 ranks x 24
    assert d.resume_target == (72, 1e-6)
    assert any("saved in the checkpoint (96 rollouts)" in n and "snapped to 72" in n for n in notes)
