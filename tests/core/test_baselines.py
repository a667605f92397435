"""Baseline schedules: Megatron linear ramp-up and the Pollux/AdaptDL goodput rule."""

from __future__ import annotations

import json
import math
from itertools import pairwise

import pytest

from rlvr_schedule.errors import ConfigError
from rlvr_schedule.policy import BatchConstraints, load_schedule
from rlvr_schedule.policy.baselines import (
    LinearRampSchedule,
    NoiseScaleAdaptiveSchedule,
    goodput,
    pollux_efficiency,
)
from rlvr_schedule.records import BatchSchedule, StepRecord
from rlvr_schedule.synthetic import SyntheticEnvironment


def rec(step: int, samples: int, batch: int = 32) -> StepRecord:
    return StepRecord(step=step, samples=samples, batch=batch, lr=1e-6)


# --- linear ramp ------------------------------------------------------------------------------
def test_ramp_follows_megatron_formula():
    """Megatron: batch = start + increment x floor(consumed / (ramp_samples / n)), capped at final."""
    start, inc, ramp, final = 16, 16, 1000, 64
    s = LinearRampSchedule(start, inc, ramp, final, base_lr=1e-6, lr_rule="constant")
    assert isinstance(s, BatchSchedule)
    per_inc = ramp / ((final - start) // inc)
    samples = 0
    batch = s.current.batch
    for step in range(1, 200):
        samples += batch
        d = s.step(rec(step, samples, batch))
        expect = min(final, start + inc * int(samples / per_inc))
        assert d.batch == expect, (samples, d.batch, expect)
        batch = d.batch
    assert batch == final and [st.batch for st in s.stages] == [16, 32, 48, 64]


def test_ramp_lr_follows_rule_and_exports_a_static_config(tmp_path):
    s = LinearRampSchedule(
        32,
        32,
        4096,
        128,
        base_lr=1e-6,
        base_batch=32,
        lr_rule="sqrt",
        constraints=BatchConstraints(group_size=8),
    )
    assert [st.lr for st in s.stages] == pytest.approx([1e-6 * math.sqrt(k) for k in (1, 2, 3, 4)])
    path = tmp_path / "ramp.json"
    path.write_text(json.dumps(s.to_dict()))
    again = load_schedule(path)
    assert [(st.batch, st.until_samples) for st in again.stages] == [
        (st.batch, st.until_samples) for st in s.stages
    ]


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"start": 16, "increment": 20, "ramp_samples": 100, "final_batch": 64}, "increment"),
        ({"start": 64, "increment": 16, "ramp_samples": 100, "final_batch": 32}, "final_batch"),
        ({"start": 0, "increment": 16, "ramp_samples": 100, "final_batch": 32}, "start"),
        ({"start": 16, "increment": 1, "ramp_samples": 10, "final_batch": 64}, "ramp_samples"),
    ],
)
def test_ramp_rejects_bad_settings(kw, field):
    with pytest.raises(ConfigError) as e:
        LinearRampSchedule(**kw, base_lr=1e-6)
    assert e.value.field == field


def test_ramp_rejects_unrunnable_batch():
    with pytest.raises(ConfigError, match="not runnable"):
        LinearRampSchedule(16, 4, 100, 32, base_lr=1e-6, constraints=BatchConstraints(group_size=8))


# --- noise-scale adaptive ---------------------------------------------------------------------
def test_goodput_optimum_is_sqrt_phi_t0_over_t1():
    """d/dM log goodput = 0 at M = sqrt(phi t0 / t1); efficiency is 1 at the reference batch."""
    phi, m0, t0, t1 = 400.0, 32.0, 2.0, 0.02
    m_star = math.sqrt(phi * t0 / t1)
    g = goodput(m_star, phi, m0, t0, t1)
    assert g > goodput(0.8 * m_star, phi, m0, t0, t1) and g > goodput(1.25 * m_star, phi, m0, t0, t1)
    assert pollux_efficiency(m0, phi, m0) == 1.0 and pollux_efficiency(4 * m0, phi, m0) < 1.0


def run_env(sched, env, samples):
    run = env.run(sched, samples)
    return run, env.decisions


def test_adaptive_moves_to_goodput_optimum_on_synthetic_task():
    # B_simple of the task = its critical batch (256); optimum sqrt(256 x 64) = 128
    env = SyntheticEnvironment(critical_batch=256, failure_samples=50_000, seed=3)
    sched = NoiseScaleAdaptiveSchedule(
        16, base_lr=1e-6, t0=64.0, t1=1.0, lr_rule="sqrt", constraints=BatchConstraints(group_size=8)
    )
    run, decisions = run_env(sched, env, 30_000)
    assert decisions[0].batch == 16  # waits for the noise-scale warm-up
    final = run.records[-1].batch
    assert 90 <= final <= 180, [st.batch for st in sched.stages]
    assert all(d.reason.startswith("goodput") for d in decisions if d.switched)
    assert sched.current.lr == pytest.approx(1e-6 * math.sqrt(final / 16))


def test_adascale_gain_sets_lr():
    sched = NoiseScaleAdaptiveSchedule(32, base_lr=1e-3, t0=1.0, t1=0.01)
    # gain r = S x efficiency; S = 4, phi = 96: (96 + 32)/(96 + 128) x 4
    assert sched.lr_for(128, 96.0) == pytest.approx(1e-3 * 4 * 128 / 224)
    assert sched.lr_for(32, 96.0) == pytest.approx(1e-3)


def test_adaptive_never_switches_without_gradient_norms():
    sched = NoiseScaleAdaptiveSchedule(32, base_lr=1e-6, t0=10.0, t1=0.1, warmup=5, interval=1)
    for i in range(1, 50):
        d = sched.step(rec(i, 32 * i))
        assert not d.switched and d.batch == 32


def test_adaptive_resume_gives_same_decisions():
    env = SyntheticEnvironment(critical_batch=256, failure_samples=50_000, drift=3.0, seed=5)

    def make():
        return NoiseScaleAdaptiveSchedule(
            16, base_lr=1e-6, t0=64.0, t1=1.0, constraints=BatchConstraints(group_size=8)
        )

    run = env.run(make(), 40_000)
    full = env.decisions
    assert sum(d.switched for d in full) >= 2
    for k in (30, 120, len(run.records) // 2):
        a = make()
        head = [a.step(r) for r in run.records[:k]]
        b = make()
        b.load_state_dict(json.loads(json.dumps(a.state_dict())))
        assert head + [b.step(r) for r in run.records[k:]] == full


def test_adaptive_rejects_foreign_state_and_bad_settings():
    a = NoiseScaleAdaptiveSchedule(32, base_lr=1e-6, t0=10.0, t1=0.1)
    b = NoiseScaleAdaptiveSchedule(32, base_lr=1e-6, t0=20.0, t1=0.1)
    with pytest.raises(ConfigError, match="t0"):
        b.load_state_dict(a.state_dict())
    with pytest.raises(ConfigError) as e:
        a.load_state_dict({"kind": "static"})
    assert e.value.field == "kind"
    for kw, field in [
        ({"t0": 0.0, "t1": 0.0}, "t1"),
        ({"t0": 1.0, "t1": 0.1, "lr_rule": "cubic"}, "lr_rule"),
        ({"t0": 1.0, "t1": 0.1, "max_batch": 16}, "max_batch"),
        ({"t0": 1.0, "t1": 0.1, "grid": 1.0}, "grid"),
    ]:
        with pytest.raises(ConfigError) as e:
            NoiseScaleAdaptiveSchedule(32, base_lr=1e-6, **kw)
        assert e.value.field == field
    with pytest.raises(ConfigError) as e:
        NoiseScaleAdaptiveSchedule(
            12, base_lr=1e-6, t0=1.0, t1=0.1, constraints=BatchConstraints(group_size=8)
        )
    assert e.value.field == "initial_batch"


def test_ramp_resume_gives_same_decisions():
    env = SyntheticEnvironment(critical_batch=256, failure_samples=20_000, seed=2)

    def make():
        return LinearRampSchedule(
            16, 16, 8000, 128, base_lr=1e-6, base_batch=64, constraints=BatchConstraints(group_size=8)
        )

    run = env.run(make(), 12_000)
    full = env.decisions
    assert [d.batch for d in full if d.switched] == [32, 48, 64, 80, 96, 112, 128]
    for k in (10, len(run.records) // 2):
        a = make()
        head = [a.step(r) for r in run.records[:k]]
        b = make()
        b.load_state_dict(json.loads(json.dumps(a.state_dict())))
        assert head + [b.step(r) for r in run.records[k:]] == full


def test_adaptive_without_decrease_never_shrinks():
    """On this seed the noisy estimate makes the goodput rule shrink the batch once; with
    ``allow_decrease=False`` the same records never shrink it."""

    def batches(allow: bool) -> list[int]:
        env = SyntheticEnvironment(critical_batch=64, failure_samples=30_000, seed=11)
        sched = NoiseScaleAdaptiveSchedule(
            32,
            base_lr=1e-6,
            t0=64.0,
            t1=1.0,
            lr_rule="sqrt",
            allow_decrease=allow,
            interval=1,
            min_gain=0.0,
            constraints=BatchConstraints(group_size=8),
        )
        return [r.batch for r in env.run(sched, 20_000).records]

    def shrinks(b: list[int]) -> int:
        return sum(b2 < b1 for b1, b2 in pairwise(b))

    assert shrinks(batches(True)) >= 1
    kept = batches(False)
    assert shrinks(kept) == 0 and kept[-1] > 32
