"""The schedule reaches the trainer through the adapters' hook (rlvr_schedule_apply_decision)."""

from __future__ import annotations

import pytest

from rlvr_schedule.plugins import PluginHost
from rlvr_schedule.records import Decision
from rlvr_trainer.train import TrainerControl


class _FakeTrainer:
    def __init__(self):
        self.calls = []

    def set_batch(self, batch, lr):
        self.calls.append((batch, lr))


def test_trainer_control_applies_switched_decisions_through_the_host():
    fake = _FakeTrainer()
    host = PluginHost(load_entrypoints=False, strict=True)
    host.register(TrainerControl(fake))
    d = Decision(step=3, samples=96, batch=64, lr=2e-4, stage=1, switched=True, reason="test")
    assert host.call("rlvr_schedule_apply_decision", decision=d) == [True]
    assert fake.calls == [(64, 2e-4)]


def test_a_failing_apply_is_isolated_by_the_host():
    class Broken:
        def set_batch(self, batch, lr):
            raise ValueError("batch 12 is not a positive multiple of group_size 8")

    host = PluginHost(load_entrypoints=False)
    host.register(TrainerControl(Broken()))
    d = Decision(step=1, samples=8, batch=12, lr=1e-3, stage=1, switched=True)
    assert host.call("rlvr_schedule_apply_decision", decision=d) == []
    assert host.faults and "group_size" in str(host.faults[0][2])
    strict = PluginHost(load_entrypoints=False, strict=True)
    strict.register(TrainerControl(Broken()))
    with pytest.raises(ValueError, match="group_size"):
        strict.call("rlvr_schedule_apply_decision", decision=d)
