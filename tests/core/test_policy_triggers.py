"""Each trigger of the two-clock policy alone: a proposal with its reason, or None."""

from __future__ import annotations

import math

import pytest

from rlvr_schedule.policy import BatchConstraints, PolicyConfig, TwoClockScheduler
from rlvr_schedule.policy import triggers as T
from rlvr_schedule.records import StepRecord

C = BatchConstraints(group_size=8, max_batch=256)


def test_start_batch_is_the_operating_fraction_snapped_down():
    assert T.start_batch(64.0, 0.25, C) == 16
    assert T.start_batch(100.0, 0.18, C) == 16  # 18 -> 16
    assert T.start_batch(10.0, 0.18, C) == 8  # never below the smallest runnable batch


def test_next_failure_stage_holds_the_lr_and_divides_it_at_the_largest_batch():
    assert T.next_failure_stage(16, 1e-6, growth=2, lr_exponent=0.0, constraints=C) == (32, 1e-6)
    b, lr = T.next_failure_stage(16, 1e-6, growth=2, lr_exponent=0.5, constraints=C)
    assert b == 32 and lr == pytest.approx(1e-6 * math.sqrt(2))
    b, lr = T.next_failure_stage(256, 1e-6, growth=2, lr_exponent=0.0, constraints=C)
    assert b == 256 and lr == pytest.approx(1e-6 / math.sqrt(2))


def clock(**kw) -> T.FailureClockTrigger:
    base = dict(lower=8000.0, batch=16, lr=1e-6, exponent=0.0, rule_exponent=0.5, fraction=0.8)
    return T.FailureClockTrigger(10_000.0, **{**base, **kw})


def test_failure_clock_fires_at_its_fraction_of_the_lower_bound():
    c = clock()
    c.spend(6000, 16, 1e-6)
    assert c.propose(16, 1e-6, (32, 1e-6)) is None  # 0.75 of 8000 spent
    c.spend(400, 16, 1e-6)
    p = c.propose(16, 1e-6, (32, 1e-6))
    assert p is not None and p.kind == "failure_clock" and p.failure and (p.batch, p.lr) == (32, 1e-6)
    assert p.reason.startswith("failure clock: 0.80") and "lower bound 8000" in p.reason


def test_failure_clock_moves_by_the_closed_form_after_a_switch():
    c = clock()
    c.spend(6400, 16, 1e-6)
    c.restart()
    # 1600 lower-bound rollouts left at 16; at 32 with the LR held, drift per rollout falls by
    # sqrt 2 (alpha 0, e 1/2, q 0): the rest is postponed to 1600 sqrt 2
    assert c.left(32, 1e-6) == pytest.approx(1600 * math.sqrt(2))
    assert c.stage_rollouts(32, 1e-6) == pytest.approx(0.8 * 1600 * math.sqrt(2))
    # on the rule (LR x sqrt 2) a sample clock is not postponed
    assert c.left(32, 1e-6 * math.sqrt(2)) == pytest.approx(1600)
    # alpha scales the clock with batch
    assert clock(exponent=1.0).clock(32, 1e-6) == pytest.approx(8000 * 2**1.5)


def test_failure_clock_stops_once_a_stage_would_be_too_short():
    c = clock(min_rollouts=2000)
    c.spend(6400, 16, 1e-6)
    assert c.propose(16, 1e-6, (32, 1e-6)) is not None  # this stage ran 6400
    c.restart()
    c.spend(0.8 * 1600 * math.sqrt(2), 32, 1e-6)
    assert c.propose(32, 1e-6, (64, 1e-6)) is None  # 1810 < 2000: the closed form's pile-up


def test_failure_clock_schedule_is_the_closed_form():
    c = clock()
    step = lambda b, lr: T.next_failure_stage(b, lr, growth=2, lr_exponent=0.0, constraints=C)  # noqa: E731
    pts = c.schedule(16, 1e-6, 20_000, step, min_rollouts=160)
    assert pts[0] == (pytest.approx(6400), 32, 1e-6)
    assert pts[1][0] == pytest.approx(6400 + 0.8 * 1600 * math.sqrt(2))
    gaps = [b[0] - a[0] for a, b in zip(pts, pts[1:], strict=False)]
    assert all(g2 < g1 for g1, g2 in zip(gaps, gaps[1:], strict=False))  # (1 - f) sqrt 2 < 1: shorter
    assert c.used_ == 0.0  # planning does not spend the live clock
    state = c.state_dict()
    c2 = clock()
    c2.load_state_dict(state)
    assert c2.used_ == c.used_


def test_auto_start_track_up_and_down():
    p = T.auto_start(100.0, 0.18, 16, micro_batch=4)
    assert p is not None and not p.paced and p.batch == pytest.approx(18) and p.lo == 8
    assert T.auto_start(math.nan, 0.18, 16, None) is None
    up = T.track_up(200.0, 0.25, 32, 2**0.25)
    assert (
        up is not None and up.kind == "track_up" and up.batch == 50 and up.lo == pytest.approx(32 * 2**0.25)
    )
    assert T.track_up(140.0, 0.25, 32, 2**0.25) is None  # 35 < 38.05: not a step above
    down = T.track_down(60.0, 0.25, 32, 2**0.25, floor=24)
    assert down is not None and down.snap == "up" and down.batch == 24 and down.hi == 31  # the floor
    assert T.track_down(100.0, 0.25, 32, 2**0.25, floor=0) is None  # 25 x 1.41 > 32


def test_forecast_and_alarm_triggers_propose_a_failure_switch_with_their_kind():
    nxt = (128, 1e-6)
    assert T.forecast_trigger(math.nan, 0.25, 100.0, 2048, nxt) is None
    assert T.forecast_trigger(0.3, 0.25, 100.0, 2048, nxt) is None
    p = T.forecast_trigger(0.2, 0.25, 1234.0, 4096, nxt)
    assert p is not None and p.kind == "forecast" and p.failure and (p.batch, p.lr) == nxt
    assert p.reason.startswith("failure forecast: 0.20") and "4096 rollouts of evidence" in p.reason
    p = T.alarm_trigger("alarm reward_crash: fell", True, nxt)
    assert p is not None and p.kind == "alarm" and p.failure and p.reason == "alarm reward_crash: fell"
    assert T.alarm_trigger("alarm reward_crash: fell", False, nxt) is None
    assert T.alarm_trigger(None, True, nxt) is None
    assert {"forecast", "alarm", "failure_clock"} <= set(T.KINDS)


def _falling(n: int, batch: int = 64):
    for i in range(1, n + 1):
        yield StepRecord(step=i, samples=i * batch, batch=batch, lr=1e-6, entropy=1.0 - i / (n + 50))


def test_advisory_forecast_warns_in_the_reason_and_does_not_move_the_batch():
    kw = dict(initial_batch=64, base_lr=1e-6, track_critical_batch=False, detectors=(), max_stages=3)
    on = TwoClockScheduler(PolicyConfig(forecast="on", **kw))
    advisory = TwoClockScheduler(PolicyConfig(**kw))  # the default
    a = [on.step(r) for r in _falling(600)]
    b = [advisory.step(r) for r in _falling(600)]
    assert any(d.switched and d.reason.startswith("failure forecast") for d in a)
    assert not any(d.switched for d in b)
    assert any(d.reason.startswith("advisory (forecast: advisory") for d in b)


def test_the_gate_snaps_to_the_grid_it_is_given():
    s = TwoClockScheduler(PolicyConfig(initial_batch=64, base_lr=1e-6, failure_samples=2000.0, detectors=()))
    s.set_constraints(BatchConstraints(group_size=8, divisor=96, max_batch=512))  # multiples of 96
    d = None
    for r in _falling(60):
        d = s.step(r)
        if d.switched:
            break
    assert d is not None and d.switched and d.batch == 192 and d.reason.startswith("failure clock")


def test_the_clock_is_saved_and_restored_with_the_policy():
    import json

    cfg = dict(initial_batch=64, base_lr=1e-6, failure_samples=4000.0, detectors=(), max_stages=4)
    a = TwoClockScheduler(PolicyConfig(**cfg))
    recs = list(_falling(120))
    for r in recs[:30]:
        a.step(r)
    b = TwoClockScheduler(PolicyConfig(**cfg))
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    assert b.clock is not None and a.clock is not None and b.clock.used_ == a.clock.used_
    rest_a = [a.step(r) for r in recs[30:]]
    rest_b = [b.step(r) for r in recs[30:]]
    assert rest_a == rest_b and any(d.switched for d in rest_a)


def test_the_first_switch_waits_for_the_floor_of_the_pooled_clock():
    # a wide interval (lower bound 5000 of a pooled 10,000): half the lower bound would be 0.25 F
    c = clock(lower=5000.0, fraction=0.5, floor=0.45)
    assert c.stage_fraction == pytest.approx(0.45 * 10_000 / 5000)
    c.spend(4400, 16, 1e-6)
    assert c.propose(16, 1e-6, (32, 1e-6)) is None  # 0.44 F
    c.spend(200, 16, 1e-6)
    assert c.propose(16, 1e-6, (32, 1e-6)) is not None  # 0.46 F
    c.restart()
    assert c.stage_fraction == 0.5  # later stages: the fraction alone
    tight = clock(lower=9800.0, fraction=0.5, floor=0.45)
    assert tight.stage_fraction == 0.5  # a tight interval: the floor does not bind


def test_the_reason_is_free_text_changing_it_changes_no_decision(monkeypatch):
    """Every trigger's reason replaced by other text: on the recorded runs (tests/data/regression)
    the decisions keep every field but the reason, their trigger kinds included."""
    import dataclasses
    import gzip
    import json
    from pathlib import Path

    from rlvr_schedule.policy import PolicyConfig, TwoClockScheduler

    files = sorted((Path(__file__).resolve().parents[1] / "data" / "regression").glob("*.json.gz"))
    docs = [json.load(gzip.open(p, "rt")) for p in files]
    docs = [d for d in docs if d.get("schedule", "two_clock") == "two_clock"]

    def run(doc):
        s = TwoClockScheduler(PolicyConfig.from_dict(doc["config"]))
        out = [s.step(StepRecord.from_dict(r)).to_dict() for r in doc["records"]]
        return [{k: v for k, v in d.items() if k != "reason"} for d in out], [d["reason"] for d in out]

    before = [run(d) for d in docs]

    def scrambled(fn):
        def wrap(*a, **kw):
            p = fn(*a, **kw)
            return None if p is None else dataclasses.replace(p, reason="failure clock: ~ rose fell alarm")

        return wrap

    for name in ("auto_start", "forecast_trigger", "alarm_trigger", "track_up", "track_down"):
        monkeypatch.setattr(T, name, scrambled(getattr(T, name)))
    monkeypatch.setattr(T.FailureClockTrigger, "propose", scrambled(T.FailureClockTrigger.propose))
    after = [run(d) for d in docs]
    kinds = {d["trigger"] for fields, _ in before for d in fields if d["switched"]}
    assert {"alarm", "auto", "track_up"} <= kinds  # the recordings switch on both clocks
    for (f0, r0), (f1, r1) in zip(before, after, strict=True):
        assert f1 == f0
        assert r1 != r0  # the text did change
