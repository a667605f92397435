"""ScheduleDriver: the one loop (observers, propose, apply, commit or hold, observers), its state,
the advisory mode, and faults kept out of the host."""

from __future__ import annotations

import json
import logging

import pytest

from rlvr_schedule.driver import ScheduleDriver
from rlvr_schedule.plugins import PluginHost, hookimpl
from rlvr_schedule.policy import PolicyConfig, StaticSchedule, TwoClockScheduler
from rlvr_schedule.records import StepRecord
from rlvr_schedule.synthetic import SyntheticEnvironment

# failure_exponent > 0 with an absolute threshold: the first record with entropy <= 0.5 grows the batch
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


class Host:
    """A host that runs at whatever it was last told (refusing the batches in ``refuse``)."""

    def __init__(self, refuse=()):
        self.refuse, self.calls = set(refuse), []

    def apply(self, batch, lr):
        self.calls.append((batch, lr))
        return batch not in self.refuse


def test_the_first_decision_is_applied_when_the_host_state_is_unknown_then_only_changes():
    host = Host()
    d = ScheduleDriver(TwoClockScheduler(PolicyConfig(**CFG)), host.apply)
    decs = [d.observe(r) for r in records()]
    assert [b for b, _ in host.calls] == [8, 16, 32]  # the initial stage once, then the two switches
    assert [x.step for x in decs if x.switched] == [
        6,
        10,
    ]  # v3: the forecast restarts at a failure switch (3 records in the later half)
    assert d.in_effect == (32, decs[-1].lr) and d.samples == 96


def test_a_refused_switch_is_held_and_the_schedule_keeps_its_stage():
    host = Host(refuse={16})
    sched = TwoClockScheduler(PolicyConfig(**CFG))
    d = ScheduleDriver(sched, host.apply, in_effect=(8, sched.current.lr))
    decs = [d.observe(r) for r in records()]
    assert not any(x.switched for x in decs) and sched.current.batch == 8 and sched.switches == 0
    assert all(x.reason == "held: the host refused it" for x in decs[6:])
    assert d.in_effect[0] == 8


def test_a_static_schedule_left_behind_by_a_failed_apply_is_retried():
    sched = StaticSchedule([{"batch": 8, "lr": 1e-3, "until_samples": 16}, {"batch": 16, "lr": 2e-3}])
    answers = iter([RuntimeError("busy"), True, True])

    def apply(b, lr):
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a

    d = ScheduleDriver(sched, apply, in_effect=(8, 1e-3))
    got = [d.observe(StepRecord(step=i, samples=8 * (i + 1), batch=8, lr=1e-3)) for i in range(4)]
    assert [x.switched for x in got] == [False, False, True, False]
    assert got[1].reason.startswith("held: the host could not apply it (RuntimeError: busy)")
    assert d.in_effect == (16, 2e-3) and sched.index == 1
    assert [f[:2] for f in d.faults] == [("<host>", "apply")]


def test_advisory_mode_decides_and_logs_but_applies_nothing(caplog):
    plain = TwoClockScheduler(PolicyConfig(**CFG))
    want = [plain.step(r) for r in records()]
    d = ScheduleDriver(TwoClockScheduler(PolicyConfig(**CFG)), advisory=True)
    with caplog.at_level(logging.INFO, logger="rlvr_schedule.driver"):
        got = [d.observe(r) for r in records()]
    assert got == want and d.in_effect is None and d.start()
    assert caplog.text.count("advisory, not applied") == 2 and "failure forecast" in caplog.text


def test_a_raising_schedule_holds_the_stage_in_effect():
    class Broken(StaticSchedule):
        def propose(self, record):
            raise ZeroDivisionError("bug")

    host = PluginHost(load_entrypoints=False)
    d = ScheduleDriver(Broken([{"batch": 8, "lr": 1e-3}]), Host().apply, host, in_effect=(8, 1e-3))
    x = d.observe(records()[0])
    assert not x.switched and x.batch == 8 and x.reason.startswith("held: the schedule raised")
    assert host.faults[0][:2] == ("<schedule>", "propose") and d.faults is host.faults
    with pytest.raises(ZeroDivisionError):
        ScheduleDriver(Broken([{"batch": 8, "lr": 1e-3}]), Host().apply, strict=True).observe(records()[0])


def test_observers_see_held_decisions_too():
    seen = []

    class Obs:
        @hookimpl
        def rlvr_schedule_on_decision(self, decision, record):
            seen.append(decision.reason)

    host = PluginHost(load_entrypoints=False)
    host.register(Obs())
    sched = TwoClockScheduler(PolicyConfig(**CFG))
    d = ScheduleDriver(sched, Host(refuse={16}).apply, host, in_effect=(8, sched.current.lr))
    for r in records(8):
        d.observe(r)
    assert seen[6] == "held: the host refused it" and len(seen) == 8


def test_state_dict_round_trip_continues_exactly_and_start_reapplies_the_stage():
    recs = records(12)
    full = ScheduleDriver(TwoClockScheduler(PolicyConfig(**CFG)), Host().apply)
    want = [full.observe(r) for r in recs]
    first = ScheduleDriver(TwoClockScheduler(PolicyConfig(**CFG)), Host().apply)
    for r in recs[:7]:
        first.observe(r)
    state = json.loads(json.dumps(first.state_dict()))  # strict JSON
    host = Host()
    resumed = ScheduleDriver(TwoClockScheduler(PolicyConfig(**CFG)), host.apply, in_effect=(8, 1e-6))
    resumed.load_state_dict(state)
    assert resumed.start() and host.calls == [(16, want[6].lr)] and resumed.samples == 56
    assert [resumed.observe(r) for r in recs[7:]] == want[7:]


def test_a_step_only_schedule_is_driven_too():
    class StepOnly:
        def __init__(self):
            self.inner = StaticSchedule(
                [{"batch": 8, "lr": 1e-3, "until_samples": 16}, {"batch": 16, "lr": 1e-3}]
            )

        @property
        def current(self):
            return self.inner.current

        def step(self, record):
            return self.inner.step(record)

        def state_dict(self):
            return self.inner.state_dict()

    host = Host()
    d = ScheduleDriver(StepOnly(), host.apply, in_effect=(8, 1e-3))
    for i in range(3):
        d.observe(StepRecord(step=i, samples=8 * (i + 1), batch=8, lr=1e-3))
    assert host.calls == [(16, 1e-3)]


def test_the_driver_runs_the_synthetic_task_like_the_schedule_alone():
    cfg = PolicyConfig(initial_batch="auto", fallback_batch=32, base_batch=64, base_lr=1e-6)
    env = SyntheticEnvironment(critical_batch=256, failure_samples=20_000, drift=3.0, seed=3)
    env.run(TwoClockScheduler(cfg), 20_000)
    alone = env.decisions
    sched = TwoClockScheduler(cfg)
    env.run(
        ScheduleDriver(sched, lambda b, lr: True, in_effect=(sched.current.batch, sched.current.lr)), 20_000
    )
    assert env.decisions == alone and sum(d.switched for d in alone) >= 1


def test_the_driver_needs_an_apply_unless_advisory():
    with pytest.raises(TypeError, match="apply"):
        ScheduleDriver(StaticSchedule([{"batch": 8, "lr": 1e-3}]))


def test_the_loop_exists_once_no_host_calls_hooks_or_steps_a_schedule_itself():
    """Adapters and the reference trainer hand records to a ScheduleDriver; none calls the observer
    hooks, steps a schedule or routes decisions through a hook of its own."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sources = [p for d in ("adapters", "reference_trainer") for p in (root / d).rglob("*.py")]
    assert len(sources) > 20
    for path in sources:
        text = path.read_text(encoding="utf-8")
        for needle in (
            "rlvr_schedule_on_record",
            "rlvr_schedule_on_decision",
            "rlvr_schedule_apply_decision",
            "schedule.step(",
            ".propose(",
        ):
            assert needle not in text, f"{path.relative_to(root)} uses {needle!r}"
    drivers = [p for p in sources if "ScheduleDriver(" in p.read_text(encoding="utf-8")]
    names = sorted(str(p.relative_to(root)) for p in drivers)
    assert names == [
        "adapters/rlvr_schedule_adapters/openrlhf/controller.py",
        "adapters/rlvr_schedule_adapters/trl/callback.py",
        "adapters/rlvr_schedule_adapters/verl/controller.py",
        "reference_trainer/rlvr_trainer/train.py",
    ]


def test_the_driver_keeps_the_live_progress_rate_and_feeds_plugin_estimators():
    class Counter:
        name = "counter"

        def __init__(self, fail_at=None):
            self.n, self.fail_at = 0, fail_at

        def update(self, record):
            self.n += 1
            if record.step == self.fail_at:
                raise ValueError("estimator bug")
            return self.n

        def state_dict(self):
            return {"n": self.n}

        def load_state_dict(self, state):
            self.n = state["n"]

    class Plugin:
        def __init__(self, est):
            self.est = est

        @hookimpl
        def rlvr_schedule_progress_estimators(self):
            return [self.est]

    host = PluginHost(load_entrypoints=False)
    est = Counter(fail_at=3)
    host.register(Plugin(est))
    # no tracking move within the run (the estimate needs its 100 records first)
    cfg = PolicyConfig(initial_batch=32, base_lr=1e-6, detectors=())
    env = SyntheticEnvironment(critical_batch=256, failure_samples=50_000, drift=0.0, seed=0)
    sched = TwoClockScheduler(cfg)
    d = ScheduleDriver(sched, lambda b, lr: True, host, in_effect=(32, sched.current.lr))
    run = env.run(d, 3_200)
    assert est.n == len(run) == 100 and [f[:2] for f in host.faults] == [("counter", "update")]
    assert d.progress.rate > 0  # reward per rollout climbs on the synthetic task
    state = json.loads(json.dumps(d.state_dict()))
    host2 = PluginHost(load_entrypoints=False)
    est2 = Counter()
    host2.register(Plugin(est2))
    d2 = ScheduleDriver(TwoClockScheduler(cfg), lambda b, lr: True, host2)
    d2.load_state_dict(state)
    assert est2.n == 100 and d2.progress.rate == pytest.approx(d.progress.rate)
