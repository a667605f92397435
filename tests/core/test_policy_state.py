"""The two-clock policy's state: saved checkpoints of an earlier state version still resume.

``tests/data/policy_state/v3_states.json`` holds states that version 3 of the state (a list of
named counters) wrote after 60 and 150 records of a synthetic run; loaded into the policy built
from the same config, each continues as the uninterrupted run, decision for decision.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvr_schedule.policy import PolicyConfig, TwoClockScheduler
from rlvr_schedule.synthetic import SyntheticEnvironment

DATA = Path(__file__).resolve().parents[1] / "data" / "policy_state" / "v3_states.json"
CASES = json.loads(DATA.read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_a_version_3_state_resumes_as_the_uninterrupted_run(case):
    cfg = PolicyConfig.from_dict(case["config"])
    env_kw = dict(case["env"])
    samples = env_kw.pop("samples")
    env = SyntheticEnvironment(**env_kw)
    run = env.run(TwoClockScheduler(cfg), samples)
    full = env.decisions
    assert sum(d.switched for d in full) == case["switches"] >= 3
    for k, state in case["states"].items():
        assert state["version"] == 3
        b = TwoClockScheduler(cfg)
        b.load_state_dict(state)
        k = int(k)
        assert b.current.batch == full[k - 1].batch
        rest = [b.step(r) for r in run.records[k:]]
        assert [(d.step, d.batch, d.lr, d.switched) for d in rest] == [
            (d.step, d.batch, d.lr, d.switched) for d in full[k:]
        ]


def test_a_state_round_trips_through_json_and_carries_its_version():
    cfg = PolicyConfig.from_dict(CASES[1]["config"])
    env = SyntheticEnvironment(critical_batch=256, failure_samples=20_000, drift=3.0, seed=1)
    run = env.run(TwoClockScheduler(cfg), 30_000)
    a = TwoClockScheduler(cfg)
    for r in run.records[:120]:
        a.step(r)
    state = json.loads(json.dumps(a.state_dict(), allow_nan=False))
    assert state["version"] == TwoClockScheduler.version
    b = TwoClockScheduler(cfg)
    b.load_state_dict(state)
    assert json.loads(json.dumps(b.state_dict(), allow_nan=False)) == state
    assert [b.step(r) for r in run.records[120:]] == [a.step(r) for r in run.records[120:]]


def test_a_failure_clock_shorter_than_a_stage_is_a_set_up_warning(caplog):
    """A failure clock whose first stage would be shorter than min_stage_samples can never be
    switched ahead of: the schedule says so at set-up, and the driver logs it."""
    from rlvr_schedule.driver import ScheduleDriver

    short = PolicyConfig(initial_batch=64, failure_samples=200.0, min_stage_samples=160)
    assert any("never switch" in w for w in TwoClockScheduler(short).setup_warnings())
    with caplog.at_level("WARNING", logger="rlvr_schedule"):
        driver = ScheduleDriver(TwoClockScheduler(short), advisory=True)
    assert driver.setup_warnings and "never switch" in caplog.text
    long = PolicyConfig(initial_batch=64, failure_samples=20_000.0, min_stage_samples=160)
    assert TwoClockScheduler(long).setup_warnings() == []
