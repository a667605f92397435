"""The live failure forecast is a warning kind of the collapse watch, judged like the others: it is
raised once, ahead of a collapse its trend points at, and says nothing of a collapse "now" on a run
whose entropy has settled low (healthy runs end at a few percent of their early entropy)."""

from __future__ import annotations

import json
import logging

import pytest

from rlvr_schedule.clocks.failure import default_detectors
from rlvr_schedule.clocks.failure.alarms import RAISED_WARNINGS, CollapseWatch, ForecastWarning
from rlvr_schedule.clocks.failure.forecast import policy_forecast
from rlvr_schedule.policy import PolicyConfig, TwoClockScheduler
from rlvr_schedule.records import StepRecord

BATCH = 64


def _settled(n: int = 120) -> list[StepRecord]:
    """Healthy: the entropy falls to 5% of its start within 1,000 rollouts and stays there (still
    above the entropy detector's 4%), the reward rises and holds."""
    out = []
    for i in range(1, n + 1):
        s = i * BATCH
        ent = 0.05 + 0.95 * max(0.0, 1 - s / 1000) ** 2
        out.append(
            StepRecord(
                step=i, samples=s, batch=BATCH, lr=1e-6, entropy=ent, reward_mean=min(0.2 + s / 4000, 0.8)
            )
        )
    return out


def _falling(n: int = 160, collapse_at: int = 8192) -> list[StepRecord]:
    """The entropy declines on a straight line towards its collapse at ``collapse_at`` rollouts."""
    return [
        StepRecord(
            step=i,
            samples=i * BATCH,
            batch=BATCH,
            lr=1e-6,
            entropy=max(1.0 - 0.95 * i * BATCH / collapse_at, 0.01),
            reward_mean=0.5,
        )
        for i in range(1, n + 1)
    ]


def test_the_forecast_says_nothing_of_a_collapse_now_on_a_run_settled_low() -> None:
    recs = _settled()
    fc = policy_forecast("entropy")
    said_now = False
    for r in recs:
        stf = fc.update(r)
        said_now |= fc.warns() and stf == 0  # the bare forecast: "collapse in 0 rollouts"
    assert said_now
    w = CollapseWatch(default_detectors(forecast=True)).fit(recs)
    assert "failure_forecast" in RAISED_WARNINGS
    assert not [a for a in w.alarms_ if a.name == "failure_forecast"]


def test_the_advisory_policy_is_silent_on_it(caplog: pytest.LogCaptureFixture) -> None:
    cfg = PolicyConfig(initial_batch=BATCH, base_lr=1e-6, track_critical_batch=False, detectors=())
    policy = TwoClockScheduler(cfg)  # forecast: advisory, the default
    with caplog.at_level(logging.INFO, logger="rlvr_schedule"):
        decisions = [policy.step(r) for r in _settled()]
    assert not any("forecast" in d.reason for d in decisions)
    assert not [r for r in caplog.records if "forecast" in r.getMessage()]


def test_the_forecast_is_raised_once_ahead_of_a_collapse_it_sees_coming() -> None:
    recs = _falling()
    w = CollapseWatch(default_detectors(forecast=True)).fit(recs)  # opt-in: out of the default set
    raised = [a for a in w.alarms_ if a.name == "failure_forecast"]
    assert len(raised) == 1 and raised[0].kind == "warning"
    assert 2048 <= raised[0].samples < 8192  # after its evidence, before the collapse
    assert "rollouts of evidence" in raised[0].message


def test_its_state_round_trips() -> None:
    recs = _falling()
    a, b = ForecastWarning(), ForecastWarning()
    for r in recs[:40]:
        a.update(r)
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    for r in recs[40:]:
        a.update(r)
        b.update(r)
    assert [x.to_dict() for x in a.warnings] == [x.to_dict() for x in b.warnings] != []
