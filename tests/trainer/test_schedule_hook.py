"""The schedule reaches the trainer through its ScheduleDriver, whose ``apply`` is ``Trainer.set_batch``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rlvr_schedule.driver import ScheduleDriver
from rlvr_schedule.plugins import PluginHost
from rlvr_schedule.policy import StaticSchedule
from rlvr_schedule.records import StepRecord
from rlvr_trainer.train import Trainer


def _fake_trainer(group_size: int = 8) -> SimpleNamespace:
    fake = SimpleNamespace(
        cfg=SimpleNamespace(group_size=group_size),
        batch=16,
        optimizer=SimpleNamespace(param_groups=[{"lr": 1e-3}]),
    )
    fake.set_batch = lambda b, lr: Trainer.set_batch(fake, b, lr)
    return fake


def _records(n: int):
    return [StepRecord(step=i + 1, samples=16 * (i + 1), batch=16, lr=1e-3) for i in range(n)]


def test_the_driver_applies_a_switch_through_set_batch():
    fake = _fake_trainer()
    sched = StaticSchedule([{"batch": 16, "lr": 1e-3, "until_samples": 32}, {"batch": 64, "lr": 2e-3}])
    driver = ScheduleDriver(
        sched, fake.set_batch, PluginHost(load_entrypoints=False, strict=True), in_effect=(16, 1e-3)
    )
    decisions = [driver.observe(r) for r in _records(3)]
    assert [d.switched for d in decisions] == [False, True, False]
    assert fake.batch == 64 and fake.optimizer.param_groups[0]["lr"] == 2e-3


def test_a_batch_the_trainer_cannot_run_is_held_and_logged():
    fake = _fake_trainer()
    sched = StaticSchedule([{"batch": 16, "lr": 1e-3, "until_samples": 32}, {"batch": 12, "lr": 2e-3}])
    host = PluginHost(load_entrypoints=False)
    driver = ScheduleDriver(sched, fake.set_batch, host, in_effect=(16, 1e-3))
    decisions = [driver.observe(r) for r in _records(3)]
    assert not any(d.switched for d in decisions) and fake.batch == 16
    assert "group_size" in str(host.faults[0][2]) and decisions[1].reason.startswith("held")
    strict = ScheduleDriver(
        StaticSchedule([{"batch": 16, "lr": 1e-3, "until_samples": 32}, {"batch": 12, "lr": 1e-3}]),
        fake.set_batch,
        PluginHost(load_entrypoints=False, strict=True),
        in_effect=(16, 1e-3),
    )
    with pytest.raises(ValueError, match="group_size"):
        for r in _records(3):
            strict.observe(r)


def test_the_reference_trainers_timings_change_the_live_price():
    # the reference trainer logs each update's wall time in parts (rollout_s, update_s, push_s); the
    # two-clock policy behind its driver sums them and measures its price once two batches are seen
    from rlvr_schedule.policy import PolicyConfig, TwoClockScheduler

    fake = _fake_trainer()
    sched = TwoClockScheduler(
        PolicyConfig(
            initial_batch=16,
            critical_batch=600,
            base_lr=1e-3,
            base_batch=16,
            detectors=(),
            track_critical_batch=False,
        )
    )
    driver = ScheduleDriver(sched, fake.set_batch, PluginHost(load_entrypoints=False, strict=True))
    samples = 0
    for i, b in enumerate([16] * 4 + [32] * 4):
        samples += b
        parts = {"rollout_s": 0.05 * b, "update_s": 0.05 * b + 0.6, "push_s": 0.2}  # 0.1 s/rollout + 0.8 s
        driver.observe(StepRecord(step=i + 1, samples=samples, batch=b, lr=1e-3, extra=parts))
    assert sched.price.source == "measured" and sched.price.value() == pytest.approx(8.0)
