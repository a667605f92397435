"""TwoClockScheduler driven by a ScheduleDriver with a PluginHost: hooks called, a raising observer
is only logged, a refusing host or a raising plugin detector holds the stage, strict re-raises."""

from __future__ import annotations

import pytest

from rlvr_schedule.driver import ScheduleDriver
from rlvr_schedule.plugins import PluginHost, hookimpl
from rlvr_schedule.policy import PolicyConfig, TwoClockScheduler
from rlvr_schedule.records import StepRecord

# hysteresis_samples 1 and an absolute threshold: the first record with entropy <= 0.5 triggers a switch
# (failure_exponent > 0: growing the batch postpones the failure, so the failure trigger grows it)
CFG = dict(
    forecast="on",  # the live forecast switches (default: advisory)
    initial_batch=8,
    hysteresis_samples=1,
    failure_threshold=0.5,  # an absolute collapse level
    forecast_samples=8,
    max_stages=3,
    min_stage_samples=0,
    detectors=(),
    failure_exponent=0.5,
    growth=2.0,
)


def records(n=12, drop_at=6):
    return [
        StepRecord(step=i, samples=8 * (i + 1), batch=8, lr=1e-6, entropy=1.0 if i < drop_at else 0.2)
        for i in range(n)
    ]


class Recorder:
    def __init__(self):
        self.records, self.decisions, self.applied = [], [], []

    @hookimpl
    def rlvr_schedule_on_record(self, record):
        self.records.append(record.step)

    @hookimpl
    def rlvr_schedule_on_decision(self, decision, record):
        self.decisions.append((decision.step, decision.switched))

    def apply(self, batch, lr):
        self.applied.append((batch, lr))
        return True


def driver(host, apply=None, **cfg):
    """The policy under a driver whose host runs at the initial stage already."""
    s = TwoClockScheduler(PolicyConfig(**{**CFG, **cfg}), detectors=host.failure_detectors())
    cur = s.current
    return ScheduleDriver(s, apply or (lambda b, lr: True), host, in_effect=(cur.batch, cur.lr))


class RaiseOnRecord:
    def __init__(self, at):
        self.at = at

    @hookimpl
    def rlvr_schedule_on_record(self, record):
        if record.step in self.at:
            raise RuntimeError("sink down")


class RaiseOnApply:
    def __init__(self, times):
        self.times = times

    def __call__(self, batch, lr):
        if self.times:
            self.times -= 1
            raise RuntimeError("host refused")
        return True


def first_switch(sched, recs):
    for r in recs:
        d = sched.step(r)
        if d.switched:
            return d
    return None


def test_hooks_see_every_record_and_decision_and_apply_switches():
    host = PluginHost(load_entrypoints=False)
    rec = Recorder()
    host.register(rec)
    d = driver(host, rec.apply)
    decs = [d.observe(r) for r in records()]
    assert rec.records == list(range(12))
    assert rec.decisions == [(x.step, x.switched) for x in decs]
    assert [b for b, _ in rec.applied] == [x.batch for x in decs if x.switched]
    assert len(rec.applied) >= 1


def test_without_plugins_the_switch_comes_at_the_drop():
    d = first_switch(TwoClockScheduler(PolicyConfig(**CFG)), records())
    assert d is not None and d.step == 6


def test_raising_observer_on_record_does_not_hold_the_switch():
    # changed deliberately (v2): a sink that lost its file used to hold the stage on that record
    host = PluginHost(load_entrypoints=False)
    host.register(RaiseOnRecord(at={6}))
    s = driver(host)
    d = first_switch(s, records())
    assert d.step == 6 and s.schedule.current.batch == 16
    assert host.faults and host.faults[0][1] == "rlvr_schedule_on_record"


class RaiseOnDecision:
    @hookimpl
    def rlvr_schedule_on_decision(self, decision, record):
        raise OSError("sink file gone")


def test_raising_observer_on_decision_is_logged_and_decisions_unchanged(caplog):
    host = PluginHost(load_entrypoints=False)
    host.register(RaiseOnDecision())
    rec = Recorder()
    host.register(rec)
    s = driver(host, rec.apply)
    with caplog.at_level("ERROR"):
        decs = [s.observe(r) for r in records()]
    plain = TwoClockScheduler(PolicyConfig(**CFG))
    assert decs == [plain.step(r) for r in records()]
    # 8 -> 16 -> 32 as entropy stays low; the forecast restarts at a failure switch and refits on the
    # later half of the new stage's rollouts (3 records there: step 10)
    assert [d.step for d in decs if d.switched] == [6, 10]
    assert len(host.faults) == 12 and {f[1] for f in host.faults} == {"rlvr_schedule_on_decision"}
    assert [b for b, _ in rec.applied] == [16, 32]
    assert "sink file gone" in caplog.text


def test_sample_clock_failure_holds_the_batch_and_says_so():
    cfg = dict(CFG, failure_exponent=0.0, failure_lr_exponent=0.5)  # a square-root switch: nothing gained
    s = TwoClockScheduler(PolicyConfig(**cfg))
    decs = [s.step(r) for r in records()]
    assert not any(d.switched for d in decs) and s.current.batch == 8
    assert all(d.reason.startswith("failure forecast: hold") for d in decs[6:])


def test_raising_apply_holds_and_retries():
    host = PluginHost(load_entrypoints=False)
    s = driver(host, RaiseOnApply(times=2))
    seen = [s.observe(r) for r in records()[:9]]
    assert [d.switched for d in seen[6:9]] == [False, False, True]
    assert "held" in seen[6].reason and s.schedule.current.batch == 16
    assert s.in_effect == (16, s.schedule.current.lr)
    assert [f[:2] for f in host.faults] == [("<host>", "apply")] * 2


def test_refusing_apply_holds_without_a_fault():
    host = PluginHost(load_entrypoints=False)
    answers = iter([False, True])
    s = driver(host, lambda b, lr: next(answers))
    seen = [s.observe(r) for r in records()[:8]]
    assert seen[6].reason == "held: the host refused it" and not seen[6].switched
    assert seen[7].switched and seen[7].batch == 16 and not host.faults


def test_strict_host_reraises():
    host = PluginHost(strict=True, load_entrypoints=False)
    host.register(RaiseOnRecord(at={3}))
    s = driver(host)
    with pytest.raises(RuntimeError, match="sink down"):
        for r in records():
            s.observe(r)


class ToyDetector:
    """Alarms once reward falls below 0.1; counts its updates in its state."""

    name = "toy_reward_floor"

    def __init__(self):
        self.n = 0

    def update(self, record):
        self.n += 1
        if record.reward_mean >= 0.1:
            return None
        from rlvr_schedule.clocks.failure.base import Alarm

        return Alarm(self.name, record.step, record.samples, record.reward_mean, "")  # None or an alarm

    def state_dict(self):
        return {"n": self.n}

    def load_state_dict(self, state):
        self.n = state["n"]


class DetectorPlugin:
    def __init__(self, det):
        self.det = det

    @hookimpl
    def rlvr_schedule_failure_detectors(self):
        return [self.det]


def reward_records():
    return [
        StepRecord(
            step=i, samples=8 * (i + 1), batch=8, lr=1e-6, entropy=1.0, reward_mean=0.5 if i < 4 else 0.05
        )
        for i in range(8)
    ]


def test_plugin_detector_alarm_triggers_a_switch_and_is_checkpointed():
    host = PluginHost(load_entrypoints=False)
    det = ToyDetector()
    host.register(DetectorPlugin(det))
    s = TwoClockScheduler(PolicyConfig(**CFG), detectors=host.failure_detectors())
    d = first_switch(s, reward_records())
    assert d.step == 4 and d.reason.startswith("alarm toy_reward_floor: batch x 2")
    state = s.state_dict()
    assert list(state["detectors"].values()) == [{"n": 5}]
    det2 = ToyDetector()
    host2 = PluginHost(load_entrypoints=False)
    host2.register(DetectorPlugin(det2))
    TwoClockScheduler(PolicyConfig(**CFG), detectors=host2.failure_detectors()).load_state_dict(state)
    assert det2.n == 5


class BoomDetector(ToyDetector):
    name = "boom"

    def update(self, record):
        if record.step == 4:
            raise ValueError("detector bug")


def test_raising_detector_holds_the_stage():
    host = PluginHost(load_entrypoints=False)
    host.register(DetectorPlugin(BoomDetector()), name="boom")
    host.register(DetectorPlugin(ToyDetector()), name="toy")
    s = driver(host)
    d = first_switch(s, reward_records())
    assert d.step == 5  # the alarm at step 4 came with another detector's fault: held one record
    assert [f[0] for f in host.faults] == ["boom"]
