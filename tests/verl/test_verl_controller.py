"""The framework-free controller on the ScheduleDriver: both schedule kinds, plugin hooks, faults,
state files, advisory mode."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from rlvr_schedule.errors import ConfigError
from rlvr_schedule.plugins import PluginHost, hookimpl
from rlvr_schedule.policy import BatchConstraints, PolicyConfig, StaticSchedule, TwoClockScheduler
from rlvr_schedule_adapters.verl.controller import ScheduleController
from rlvr_schedule_adapters.verl.state import STATE_FILE, checkpoint_folder, load_state, save_state


def metrics(step: int, reward: float = 0.5, entropy: float = 1.0) -> dict:
    return {
        "training/global_step": step,
        "critic/score/mean": reward,
        "actor/entropy": entropy,
        "actor/grad_norm": 1.0,
        "actor/lr": 1e-6,
    }


class Recorder:
    def __init__(self) -> None:
        self.records, self.decisions = [], []

    @hookimpl
    def rlvr_schedule_on_record(self, record):
        self.records.append(record)

    @hookimpl
    def rlvr_schedule_on_decision(self, decision, record):
        self.decisions.append(decision)


class ToggleAlarm:
    """A plugin failure detector that alarms while ``on``."""

    name = "toggle"

    def __init__(self) -> None:
        self.on = False

    def update(self, record):
        return SimpleNamespace(name=self.name, message="test alarm") if self.on else None

    def state_dict(self):
        return {"on": self.on}

    def load_state_dict(self, state):
        self.on = state["on"]


class DetectorPlugin:
    def __init__(self, det) -> None:
        self.det = det

    @hookimpl
    def rlvr_schedule_failure_detectors(self):
        return [self.det]


def two_clock(host):
    cfg = PolicyConfig(
        initial_batch=32,
        base_lr=1e-6,
        hysteresis_samples=1,
        min_stage_samples=0,
        max_stages=3,
        failure_exponent=0.5,
        failure_lr_exponent=0.5,  # a square-root switch (policy v3 knob)
        growth=2.0,
        constraints=BatchConstraints(group_size=4),
    )
    return TwoClockScheduler(cfg, detectors=host.failure_detectors())


def test_two_clock_applies_through_the_driver():
    host = PluginHost(load_entrypoints=False)
    det, rec = ToggleAlarm(), Recorder()
    host.register(DetectorPlugin(det))
    host.register(rec)
    applied = []
    ctl = ScheduleController(
        two_clock(host),
        group_size=4,
        running=(32, 1e-6),
        plugins=host,
        apply_fn=lambda b, lr: applied.append((b, lr)),
    )
    for s in (1, 2):
        ctl.observe(metrics(s), s)
    assert applied == []
    det.on = True
    d = ctl.observe(metrics(3), 3)
    assert d.switched and d.batch == 64
    assert applied == [(64, pytest.approx(d.lr))] and ctl.running == (64, pytest.approx(d.lr))
    assert d.lr > 1e-6  # sqrt rule: a bigger batch gets a bigger LR
    assert len(rec.records) == 3 and len(rec.decisions) == 3  # the driver called the observers once each
    assert ctl.faults == []


def test_two_clock_holds_when_applying_fails():
    host = PluginHost(load_entrypoints=False)
    det = ToggleAlarm()
    host.register(DetectorPlugin(det))

    def fail(b, lr):
        raise RuntimeError("worker group gone")

    ctl = ScheduleController(two_clock(host), group_size=4, running=(32, 1e-6), plugins=host, apply_fn=fail)
    det.on = True
    d = ctl.observe(metrics(1), 1)
    assert not d.switched and d.batch == 32 and "held" in d.reason
    assert ctl.running == (32, 1e-6) and ctl.schedule.current.batch == 32
    assert host.faults and host.faults[-1][:2] == ("<host>", "apply")
    ctl.apply_fn = lambda b, lr: None  # the workers are back: the scheduler switches on the next alarm
    assert ctl.observe(metrics(2), 2).batch == 64 and ctl.running[0] == 64


def test_static_schedule_gets_observer_hooks_from_the_driver(tmp_path):
    from rlvr_schedule.plugins.sinks import JsonlSink

    host = PluginHost(load_entrypoints=False)
    rec = Recorder()
    host.register(rec)
    sink = JsonlSink(tmp_path / "records.jsonl")
    host.register(sink)
    sched = StaticSchedule([{"batch": 32, "lr": 1e-6, "until_samples": 64}, {"batch": 64, "lr": 2e-6}])
    ctl = ScheduleController(
        sched, group_size=4, running=(32, 1e-6), plugins=host, apply_fn=lambda b, lr: None
    )
    for s in (1, 2, 3):
        ctl.observe(metrics(s), s)
    sink.close()
    assert [r.samples for r in rec.records] == [32, 64, 128]
    assert [d.switched for d in rec.decisions] == [False, True, False]
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    assert len(lines) == 6  # a record and a decision per step


def test_apply_rejects_a_batch_that_is_not_whole_groups():
    sched = StaticSchedule([{"batch": 32, "lr": 1e-6, "until_samples": 32}, {"batch": 42, "lr": 1e-6}])
    ctl = ScheduleController(sched, group_size=4, running=(32, 1e-6), apply_fn=lambda b, lr: None)
    ctl.observe(metrics(1), 1)
    assert ctl.running == (32, 1e-6)
    assert ctl.faults[-1][1] == "apply" and "not a multiple of the group size" in str(ctl.faults[-1][2])


def test_bad_metric_value_is_survived():
    sched = StaticSchedule([{"batch": 32, "lr": 1e-6}])
    ctl = ScheduleController(sched, group_size=4, running=(32, 1e-6), apply_fn=lambda b, lr: None)
    bad = metrics(1)
    bad["critic/score/mean"] = "n/a"
    assert ctl.observe(bad, 1) is None
    assert ctl.samples == 32 and ctl.faults[-1][1] == "observe"
    assert ctl.observe(metrics(2), 2).samples == 64


def _run(ctl, steps, start=1):
    return [ctl.observe(metrics(s, reward=0.1 * s), s) for s in range(start, start + steps)]


def test_state_round_trip_continues_like_the_uninterrupted_run(tmp_path):
    def make(applied):
        s = StaticSchedule(
            [
                {"batch": 32, "lr": 1e-6, "until_samples": 64},
                {"batch": 64, "lr": 2e-6, "until_samples": 256},
                {"batch": 128, "lr": 3e-6},
            ]
        )
        return ScheduleController(
            s, group_size=4, running=(32, 1e-6), apply_fn=lambda b, lr: applied.append((b, lr))
        )

    full_applied: list = []
    full = make(full_applied)
    want = _run(full, 8)

    first_applied: list = []
    first = make(first_applied)
    got = _run(first, 3)
    save_state(tmp_path / "global_step_3", first.state_dict())
    state = load_state(tmp_path / "global_step_3")
    assert json.loads(json.dumps(state)) == state  # plain JSON

    resumed_applied: list = []
    resumed = make(resumed_applied)  # relaunched: the config runs 32 rollouts again
    resumed.load_state_dict(state)
    assert resumed.running == (32, 1e-6) and resumed.start()
    assert resumed_applied == [(64, 2e-6)]  # the stage that was running is re-applied
    got += _run(resumed, 5, start=4)

    def key(ds):
        return [(d.batch, d.lr, d.samples, d.stage) for d in ds]

    assert key(got) == key(want)


def test_advisory_decides_and_logs_but_never_applies(caplog):
    sched = StaticSchedule([{"batch": 32, "lr": 1e-6, "until_samples": 64}, {"batch": 64, "lr": 2e-6}])
    applied: list = []
    ctl = ScheduleController(
        sched, group_size=4, running=(32, 1e-6), advisory=True, apply_fn=lambda b, lr: applied.append((b, lr))
    )
    with caplog.at_level("INFO", logger="rlvr_schedule.driver"):
        decisions = [ctl.observe(metrics(s), s) for s in (1, 2, 3)]
    assert [d.switched for d in decisions] == [False, True, False] and decisions[1].batch == 64
    assert applied == [] and ctl.running == (32, 1e-6) and ctl.start() and applied == []
    assert ctl.samples == 96  # rollouts counted at the batch that really ran
    assert "advisory, not applied" in caplog.text and "until_samples 64 reached" in caplog.text


def test_state_version_is_checked():
    ctl = ScheduleController(
        StaticSchedule([{"batch": 32, "lr": 1e-6}]),
        group_size=4,
        running=(32, 1e-6),
        apply_fn=lambda b, lr: None,
    )
    state = ctl.state_dict()
    state["version"] = 99
    with pytest.raises(ValueError, match="version 99"):
        ctl.load_state_dict(state)


def test_state_file_is_atomic_and_errors_name_the_file(tmp_path, monkeypatch):
    folder = tmp_path / "global_step_7"
    save_state(folder, {"a": 1})
    path = folder / STATE_FILE

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        save_state(folder, {"a": 2})
    monkeypatch.undo()
    assert load_state(folder) == {"a": 1}  # the old version survives a failed write
    assert [p.name for p in folder.iterdir()] == [STATE_FILE]  # no temporary left behind

    path.write_text('{"a": ')
    with pytest.raises(ConfigError, match=str(path)):
        load_state(folder)
    path.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="JSON object"):
        load_state(folder)
    assert load_state(tmp_path / "nowhere") is None


def test_checkpoint_folder_follows_verl(verl_config, tmp_path, monkeypatch):
    verl_config.trainer.default_local_dir = "ckpts/run"
    monkeypatch.chdir(tmp_path)
    assert checkpoint_folder(verl_config, 0) is None
    assert checkpoint_folder(verl_config, 12) == os.path.join(str(tmp_path), "ckpts/run", "global_step_12")
    verl_config.trainer.resume_mode = "resume_path"
    verl_config.trainer.resume_from_path = "/x/global_step_5"
    assert checkpoint_folder(verl_config, 5) == "/x/global_step_5"
    verl_config.trainer.resume_mode = "disable"
    assert checkpoint_folder(verl_config, 5) is None
