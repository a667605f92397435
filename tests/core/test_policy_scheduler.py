"""TwoClockScheduler on hand-built records: start below B*, switch before failure, state, invariants."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_schedule.policy import BatchConstraints, PolicyConfig, TwoClockScheduler
from rlvr_schedule.records import BatchSchedule, StepRecord


def drive(sched, *, failure_samples=100_000, steps=3000, noise=0.0, seed=0, b_simple=None, micro=8):
    """Closed loop: entropy falls linearly per sample (a sample-clock failure) and, with
    ``b_simple``, grad norms follow E|g_B|^2 = |G|^2 + tr(Sigma)/B with |G|^2 = 1."""
    rng = np.random.default_rng(seed)
    samples, recs, decs = 0, [], []
    for i in range(steps):
        cur = sched.current
        samples += cur.batch
        kw = {}
        if b_simple is not None:
            kw = dict(
                grad_norm=math.sqrt(1 + b_simple / cur.batch),
                micro_batch=micro,
                grad_norm_micro=math.sqrt(1 + b_simple / micro),
            )
        ent = max(0.0, 1.0 - samples / failure_samples) + noise * rng.standard_normal()
        rec = StepRecord(step=i, samples=samples, batch=cur.batch, lr=cur.lr, entropy=ent, **kw)
        recs.append(rec)
        decs.append(sched.step(rec))
        if samples > 1.2 * failure_samples:
            break
    return recs, decs


def test_is_a_batch_schedule_and_starts_at_initial_batch():
    s = TwoClockScheduler(PolicyConfig(initial_batch=64, base_lr=1e-6))
    assert isinstance(s, BatchSchedule)
    assert (s.current.batch, s.current.lr, s.switches) == (64, 1e-6, 0)


def test_auto_starts_below_a_known_critical_batch():
    s = TwoClockScheduler(
        PolicyConfig(
            forecast="on",  # the live forecast switches (default: advisory)
            critical_batch=1000,
            sample_tolerance=PolicyConfig.tolerance_for(0.5),
            constraints=BatchConstraints(group_size=16),
        )
    )
    assert s.current.batch == 496 and s.current.batch < 1000


@pytest.mark.parametrize(
    "kw, batch",
    [
        # 0.49 x 600 = 294: the nearest whole groups (0.5 x 600 = 300 would sit on a tie of the grid)
        ({"sample_tolerance": PolicyConfig.tolerance_for(0.49)}, 296),
        ({"sample_tolerance": 0.3}, 280),  # tolerance 0.3: 2 x 0.3/1.3 x 600 = 276.9, nearest 280
        ({}, 120),  # the default price 16: -16 + sqrt(16^2 + 2 x 16 x 600) = 123.5, nearest 120
        ({"rollouts_per_update": 64}, 224),  # -64 + sqrt(64^2 + 2 x 64 x 600) = 222.2, nearest 224
        ({"sample_tolerance": 0.25}, 240),
    ],
)  # 0.4 x 600
def test_auto_starts_below_the_gradient_noise_estimate(kw, batch):
    cfg = PolicyConfig(
        forecast="on",  # the live forecast switches (default: advisory)
        initial_batch="auto",
        fallback_batch=32,
        base_batch=32,
        base_lr=1e-6,
        constraints=BatchConstraints(group_size=8),
        **kw,
    )
    s = TwoClockScheduler(cfg)
    assert s.current.batch == 32
    _, decs = drive(s, b_simple=600.0, steps=130)
    first = next(d for d in decs if d.switched)
    # warm at the EMA's horizon, 100 records (estimate_samples 1600 = 50 records at batch 32)
    assert first.step == 99 and first.batch == batch
    assert first.lr == pytest.approx(1e-6 * math.sqrt(batch / 32))
    assert first.trigger == "auto"
    assert sum(d.switched for d in decs) == 1


def test_operating_fraction_follows_the_rollout_tolerance():
    # E(B)/E(0) = 1/(1 - B/2B*) = 1 + tol  <=>  B = 2B* tol/(1 + tol)
    for tol in (0.05, 0.1, 0.25, 1.0):
        f = PolicyConfig(sample_tolerance=tol).operating_fraction
        samples_ratio = 1 / (1 - f / 2)
        assert samples_ratio == pytest.approx(1 + tol)
    for f in (0.25, 0.3, 0.5, 1.0):  # the inverse, exact where a float allows, never below
        assert PolicyConfig(sample_tolerance=PolicyConfig.tolerance_for(f)).operating_fraction >= f
    assert PolicyConfig(sample_tolerance=PolicyConfig.tolerance_for(0.5)).operating_fraction == 0.5
    with pytest.raises(Exception, match="sample_tolerance"):
        PolicyConfig(sample_tolerance=1.5)


def rising_drive(sched, steps=400, start=200.0, end=1600.0):
    """B_simple rising geometrically from ``start`` to ``end`` over ``steps`` records; flat entropy."""
    samples, decs = 0, []
    for i in range(steps):
        cur = sched.current
        samples += cur.batch
        bs = start * (end / start) ** (i / steps)
        rec = StepRecord(
            step=i,
            samples=samples,
            batch=cur.batch,
            lr=cur.lr,
            entropy=1.0,
            grad_norm=math.sqrt(1 + bs / cur.batch),
            micro_batch=4,
            grad_norm_micro=math.sqrt(1 + bs / 4),
        )
        decs.append(sched.step(rec))
    return decs


def test_follows_a_rising_critical_batch_in_fine_steps():
    cfg = PolicyConfig(
        forecast="on",  # the live forecast switches (default: advisory)
        initial_batch="auto",
        fallback_batch=16,
        base_batch=16,
        sample_tolerance=PolicyConfig.tolerance_for(0.25),
        constraints=BatchConstraints(group_size=8),
        max_stages=20,
    )
    s = TwoClockScheduler(cfg)
    sw = [d for d in rising_drive(s) if d.switched]
    tracked = [d for d in sw if d.trigger in ("track_up", "track_down")]
    assert len(tracked) >= 4
    ratios = [b.batch / a.batch for a, b in itertools.pairwise(sw)]
    assert all(cfg.track_step <= r < 2 for r in ratios)  # finer than doubling, coarser than noise
    assert 0.6 * 0.25 * 1600 <= s.current.batch <= 0.25 * 1600 * 1.05


def test_known_critical_batch_is_tracked_relative_to_the_gradient_noise_start():
    # B_simple is LR-free and here 4x lower than the known B*: only its ratio counts
    cfg = PolicyConfig(
        forecast="on",  # the live forecast switches (default: advisory)
        initial_batch="auto",
        critical_batch=800,
        sample_tolerance=PolicyConfig.tolerance_for(0.25),
        constraints=BatchConstraints(group_size=8),
        max_stages=20,
    )
    s = TwoClockScheduler(cfg)
    assert s.current.batch == 200
    rising_drive(s, steps=400, start=200.0, end=800.0)
    est = s.critical_estimate()
    assert 0.6 * 3200 <= est <= 1.2 * 3200  # 800 x (B_simple now / B_simple at the start ~ 4)
    assert s.current.batch > 400


def test_switches_to_larger_batch_before_the_failure():
    # a square-root switch (q = 1/2) postpones the failure only because alpha > 0
    cfg = PolicyConfig(
        forecast="on",  # the live forecast switches (default: advisory)
        initial_batch=64,
        base_lr=1e-6,
        growth=2,
        hysteresis_samples=192,  # 3 records at batch 64
        max_stages=3,
        failure_exponent=0.5,
        failure_lr_exponent=0.5,
        constraints=BatchConstraints(group_size=8, max_batch=1024),
    )
    s = TwoClockScheduler(cfg)
    _, decs = drive(s, failure_samples=100_000, noise=0.01)
    sw = [d for d in decs if d.switched]
    assert [d.batch for d in sw] == [128, 256]
    assert all(d.samples < 100_000 for d in sw)
    assert [d.lr for d in sw] == pytest.approx([1e-6 * math.sqrt(2), 2e-6])
    stages = s.stages
    assert len(stages) == 3 and stages[0].until_samples == sw[0].samples
    assert stages[1].start_samples == sw[0].samples and "failure" in stages[1].reason


def test_default_switch_holds_the_lr_on_a_sample_clock_and_restarts_the_forecast():
    # alpha = 0, q = 0 (the defaults): batch x 2 at the same LR, once under 0.25 of the clock is left
    cfg = PolicyConfig(
        forecast="on",  # the live forecast switches (default: advisory)
        initial_batch=64,
        base_lr=1e-6,
        growth=2,
        hysteresis_samples=192,  # 3 records at batch 64
        max_stages=3,
        constraints=BatchConstraints(group_size=8, max_batch=1024),
    )
    s = TwoClockScheduler(cfg)
    _, decs = drive(s, failure_samples=100_000, noise=0.01)
    sw = [d for d in decs if d.switched]
    assert [d.batch for d in sw] == [128, 256]
    assert [d.lr for d in sw] == [1e-6, 1e-6]
    assert sw[0].samples < 100_000 and "failure forecast: 0.2" in sw[0].reason
    assert s.forecast.restarts == 2


def test_no_failure_in_sight_means_no_switch():
    s = TwoClockScheduler(PolicyConfig(initial_batch=64))
    samples = 0
    for i in range(500):
        samples += 64
        d = s.step(StepRecord(step=i, samples=samples, batch=64, lr=1e-6, entropy=1.0 + 1e-4 * i))
        assert not d.switched


def test_hysteresis_needs_consecutive_triggers():
    cfg = PolicyConfig(
        forecast="on",  # the live forecast switches (default: advisory)
        initial_batch=8,
        hysteresis_samples=32,  # 4 records at batch 8
        failure_threshold=0.5,  # an absolute collapse level
        forecast_samples=16,
        min_stage_samples=0,
        failure_exponent=1.0,
    )
    s = TwoClockScheduler(cfg)
    # entropy at the threshold on alternate records: never 4 in a row, so no switch
    for i in range(60):
        ent = 0.4 if i % 2 else 1.0
        d = s.step(StepRecord(step=i, samples=8 * (i + 1), batch=8, lr=1e-6, entropy=ent))
        assert not d.switched
    s2 = TwoClockScheduler(cfg)
    reasons = []
    for i in range(20):
        d = s2.step(StepRecord(step=i, samples=8 * (i + 1), batch=8, lr=1e-6, entropy=1.0 - 0.05 * i))
        reasons.append(d.reason)
        if d.switched:
            break
    assert d.switched
    assert [r.split(":")[0] for r in reasons[-4:-1]] == [
        "trigger 8/32 rollouts",
        "trigger 16/32 rollouts",
        "trigger 24/32 rollouts",
    ]


def test_at_max_batch_the_lr_is_divided_instead():
    cfg = PolicyConfig(
        forecast="on",  # the live forecast switches (default: advisory)
        initial_batch=64,
        hysteresis_samples=1,
        max_stages=3,
        growth=2.0,
        constraints=BatchConstraints(max_batch=64),
    )
    _, decs = drive(TwoClockScheduler(cfg), failure_samples=20_000)
    sw = [d for d in decs if d.switched]
    assert [d.batch for d in sw] == [64, 64]
    assert [d.lr for d in sw] == pytest.approx([1e-6 / math.sqrt(2), 0.5e-6])
    assert all("no larger batch" in d.reason for d in sw)
    assert any("max_stages 3 reached" in d.reason for d in decs)


configs = st.builds(
    dict,
    group=st.sampled_from([1, 4, 8, 16]),
    initial_groups=st.integers(1, 8),
    max_groups=st.one_of(st.none(), st.integers(8, 64)),
    growth=st.floats(1.1, 4.0),
    hysteresis=st.integers(1, 400),
    min_between=st.integers(0, 20_000),
    max_stages=st.integers(1, 6),
    auto=st.booleans(),
    b_simple=st.one_of(st.none(), st.floats(20.0, 2000.0)),
    alpha=st.sampled_from([0.0, 0.5]),
    lr_exp=st.sampled_from([0.0, 0.5]),
    frac=st.sampled_from([0.1, 0.25, 0.5]),
    tol=st.sampled_from([0.1, 0.3]),
)


def _make(c):
    cons = BatchConstraints(
        group_size=c["group"], max_batch=None if c["max_groups"] is None else c["group"] * c["max_groups"]
    )
    first = c["group"] * c["initial_groups"]
    return PolicyConfig(
        forecast="on",  # the live forecast switches (default: advisory)
        initial_batch="auto" if c["auto"] else first,
        fallback_batch=first,
        base_batch=first,
        base_lr=1e-6,
        growth=c["growth"],
        hysteresis_samples=c["hysteresis"],
        min_stage_samples=c["min_between"],
        max_stages=c["max_stages"],
        failure_exponent=c["alpha"],
        failure_lr_exponent=c["lr_exp"],
        failure_switch_fraction=c["frac"],
        sample_tolerance=c["tol"],
        constraints=cons,
    )


@settings(max_examples=40, deadline=None)
@given(
    c=configs,
    seed=st.integers(0, 2**16),
    noise=st.sampled_from([0.0, 0.02, 0.1]),
    failure=st.integers(5_000, 60_000),
)
def test_invariants_hold_for_any_config(c, seed, noise, failure):
    cfg = _make(c)
    s = TwoClockScheduler(cfg)
    recs, decs = drive(s, failure_samples=failure, noise=noise, seed=seed, steps=1500, b_simple=c["b_simple"])
    # deterministic: the same records give the same decisions
    again = TwoClockScheduler(cfg)
    assert [again.step(r) for r in recs] == decs
    sw = [d for d in decs if d.switched]
    assert len(sw) <= cfg.max_stages - 1 and len(s.stages) == len(sw) + 1
    assert all(cfg.constraints.is_valid(d.batch) for d in decs)
    for a, b in itertools.pairwise(sw):
        assert b.samples - a.samples >= cfg.min_stage_samples
    prev = (s.stages[0].batch, s.stages[0].lr)
    for d in decs:  # switched exactly when batch or lr change
        assert d.switched == ((d.batch, d.lr) != prev)
        prev = (d.batch, d.lr)
    idx = [i for i, d in enumerate(decs) if d.switched and not d.reason.startswith("auto")]
    for i in idx:  # the trigger held on consecutive records of `hysteresis_samples` rollouts (auto aside)
        j, held = i, recs[i].batch
        while held < cfg.hysteresis_samples:
            j -= 1
            assert decs[j].reason
            held += recs[j].batch


@settings(max_examples=25, deadline=None)
@given(c=configs, seed=st.integers(0, 2**16), split=st.floats(0.0, 1.0))
def test_state_round_trip_gives_identical_decisions(c, seed, split):
    cfg = _make(c)
    recs, decs = drive(
        TwoClockScheduler(cfg),
        failure_samples=30_000,
        noise=0.05,
        seed=seed,
        steps=800,
        b_simple=c["b_simple"],
    )
    k = int(split * len(recs))
    a = TwoClockScheduler(cfg)
    head = [a.step(r) for r in recs[:k]]
    state = json.loads(json.dumps(a.state_dict(), allow_nan=False))  # plain JSON for checkpoints
    b = TwoClockScheduler(cfg)
    b.load_state_dict(state)
    assert b.current == a.current
    assert head + [b.step(r) for r in recs[k:]] == decs


def test_loading_state_from_another_config_warns(caplog):
    a = TwoClockScheduler(PolicyConfig(initial_batch=64))
    b = TwoClockScheduler(PolicyConfig(initial_batch=64, growth=3.0))
    with caplog.at_level("WARNING", logger="rlvr_schedule.policy"):
        b.load_state_dict(a.state_dict())
    assert "growth" in caplog.text
    with pytest.raises(Exception, match="not a TwoClockScheduler state"):
        b.load_state_dict({"kind": "static"})
