"""Synthetic runs: the clocks they were built with are the clocks they show."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_schedule.records import Decision, Run, Stage, StepRecord
from rlvr_schedule.synthetic import (
    FRAMEWORK_KEYS,
    ClockModel,
    SyntheticEnvironment,
    make_run,
    make_sweep,
    to_framework_dict,
    write_run_log,
)
from rlvr_schedule.theory import gradient_noise_from_two_batches, lr_for_batch


def initial_rate(run: Run, n: int = 3) -> float:
    """Reward gained per rollout over the first ``n`` updates (noise-free runs)."""
    r, s = run.array("reward_mean"), run.samples
    return (r[n] - r[0]) / (s[n] - s[0])


def test_sweep_shows_the_progress_clock():
    bstar = 200.0
    runs = make_sweep([8, 32, 128, 256], critical_batch=bstar, failure_samples=40_000, noise=0)
    rates = np.array([initial_rate(r) for r in runs])
    batches = np.array([r.batch for r in runs], dtype=float)
    # p(B) = p0 (1 - B / (2 B*)): a line in B whose root is 2 B*
    slope, intercept = np.polyfit(batches, rates, 1)
    assert -intercept / slope == pytest.approx(2 * bstar, rel=0.03)
    assert intercept == pytest.approx(ClockModel(critical_batch=bstar, failure_samples=40_000).p0, rel=0.03)
    for r in runs:  # every run uses the sqrt-rule LR of its batch
        assert r.lr == pytest.approx(lr_for_batch(r.batch, 64, 1e-6))


def collapse_samples(run: Run, collapse_entropy: float = 0.1) -> float:
    """Rollouts at the first record whose entropy is below the collapse level."""
    idx = int(np.flatnonzero(run.array("entropy") < collapse_entropy)[0])
    return run.records[idx].samples


@settings(max_examples=15, deadline=None)
@given(batch=st.integers(min_value=8, max_value=1024))
def test_failure_arrives_on_a_sample_clock(batch):
    run = make_run(batch, failure_samples=6_000, noise=0)
    assert abs(collapse_samples(run) - 6_000) <= batch
    # and the collapse is visible in every failure signal
    k = int(np.searchsorted(run.samples, 6_000 + 0.3 * 6_000))
    pre = int(np.searchsorted(run.samples, 0.5 * 6_000))
    if k < len(run):
        assert run.records[k].grad_norm > 3 * run.records[pre].grad_norm
        assert run.records[k].kl > 10 * run.records[pre].kl
        if batch < 400:  # below 2 B* = 512 reward climbed before the crash
            assert run.records[k].reward_mean < run.records[pre].reward_mean


def test_failure_exponent_makes_a_step_clock():
    for b in (32, 128):
        run = make_run(b, failure_samples=5_000, failure_exponent=1.0, noise=0)
        assert abs(collapse_samples(run) - 5_000 * b / 64) <= b


def test_lr_off_the_sqrt_rule_moves_the_critical_batch():
    m = ClockModel(critical_batch=200, noise_fraction=0.2)
    assert m.critical_batch_at(1.0) == pytest.approx(200)
    assert m.critical_batch_at(2.0) == pytest.approx(200 * (0.5 - 0.2) / 0.8)
    b = 64
    lr = 2 * m.sqrt_lr(b)
    # per-sample progress at batch B* of the doubled LR is half its B -> 0 value
    bs = m.critical_batch_at(2.0)
    assert m.progress_rate(bs, 2 * m.sqrt_lr(bs)) == pytest.approx(
        0.5 * m.progress_rate(1e-9, 2 * m.sqrt_lr(1e-9))
    )
    run = make_run(b, lr=lr, critical_batch=200, noise=0, steps=5)
    assert run.lr == pytest.approx(lr)
    assert initial_rate(run) == pytest.approx(m.progress_rate(b, lr), rel=0.02)
    assert m.failure_at(b, lr) == pytest.approx(m.failure_samples / 2)


def test_drift_raises_the_critical_batch():
    m = ClockModel(critical_batch=100, drift=3.0)
    assert m.critical_batch_at(1.0, progress=1.0) == pytest.approx(400)
    assert m.progress_rate(300, progress=1.0) > 0 > m.progress_rate(300, progress=0.0)


def test_grad_norms_carry_the_noise_scale():
    run = make_run(256, failure_samples=400_000, b_simple=512, noise=1.0, steps=600, seed=3)
    big, small = run.array("grad_norm") ** 2, run.array("grad_norm_micro") ** 2
    b, m = 256, run.records[0].micro_batch
    assert m == 32
    g2, tr = gradient_noise_from_two_batches(small.mean(), m, big.mean(), b)
    assert tr / g2 == pytest.approx(512, rel=0.2)
    exact = make_run(256, b_simple=512, noise=0, steps=2).records[0]  # noise 0: expectations exactly
    g2, tr = gradient_noise_from_two_batches(exact.grad_norm_micro**2, m, exact.grad_norm**2, b)
    assert tr / g2 == pytest.approx(512, rel=1e-9)


def test_noise_is_seeded():
    a, b = make_run(64, seed=5, steps=20), make_run(64, seed=5, steps=20)
    c = make_run(64, seed=6, steps=20)
    assert [r.to_dict() for r in a] == [r.to_dict() for r in b]
    assert a.array("reward_mean").tolist() != c.array("reward_mean").tolist()


def test_framework_styles_keep_what_the_framework_logs(tmp_path):
    verl = make_run(64, steps=10, names="verl")
    assert all(math.isnan(r.grad_norm_micro) and math.isnan(r.frac_zero_std) for r in verl)
    assert not math.isnan(verl.records[0].entropy)
    trl = make_run(64, steps=10, names="trl")
    assert not math.isnan(trl.records[0].frac_zero_std) and trl.records[0].micro_batch is None

    path = write_run_log(tmp_path / "verl.jsonl", verl, "verl")
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert len(rows) == 10
    assert set(rows[0]) == set(FRAMEWORK_KEYS["verl"].values()) | {"samples", "batch"}
    assert rows[3]["training/global_step"] == 4 and rows[3]["samples"] == 256
    assert rows[3]["critic/score/mean"] == verl.records[3].reward_mean

    path = write_run_log(tmp_path / "trl.jsonl", trl, "trl", with_samples=False)
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert {
        "reward",
        "entropy",
        "learning_rate",
        "grad_norm",
        "kl",
        "frac_reward_zero_std",
        "num_tokens",
    } <= set(rows[0])
    assert "samples" not in rows[0] and rows[1]["num_tokens"] > rows[0]["num_tokens"]


def test_canonical_jsonl_round_trips(tmp_path):
    run = make_run(32, steps=8)
    path = write_run_log(tmp_path / "c.jsonl", run)
    back = [StepRecord.from_dict(json.loads(line)) for line in Path(path).read_text().splitlines()]
    assert [r.to_dict() for r in back] == [r.to_dict() for r in run]
    assert to_framework_dict(run.records[0]) == run.records[0].to_dict()


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"critical_batch": 0}, "critical_batch"),
        ({"failure_samples": -5}, "failure_samples"),
        ({"reward0": 0.9, "reward_ceiling": 0.8}, "reward0"),
        ({"noise_fraction": 1.0}, "noise_fraction"),
        ({"drift": -1}, "drift"),
    ],
)
def test_bad_model_parameters_are_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        SyntheticEnvironment(**kwargs)


def test_bad_names_and_steps():
    with pytest.raises(ValueError, match="names"):
        make_sweep([64], names="openrlhf-ish")
    with pytest.raises(ValueError, match="steps"):
        make_run(64, steps=0)
    with pytest.raises(ValueError, match="batch"):
        SyntheticEnvironment().step(0, 1e-6)


def test_run_and_sweep_take_the_task_and_its_defaults_from_the_environment():
    run = make_run(64, steps=5, seed=3, critical_batch=128)
    same = SyntheticEnvironment(critical_batch=128, seed=3).run_constant(64, steps=5)
    assert [r.to_dict() for r in run] == [r.to_dict() for r in same]
    sweep = make_sweep([16, 64], steps=3, seed=2, critical_batch=128, drift=1.0)
    seeds = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(2).spawn(2)]
    for got, b, seed in zip(sweep, [16, 64], seeds, strict=True):
        want = make_run(b, steps=3, seed=seed, critical_batch=128, drift=1.0)
        assert got.name == f"B{b}" and [r.to_dict() for r in got] == [r.to_dict() for r in want]
    with pytest.raises(TypeError, match="per run"):
        make_sweep([16, 64], lr=1e-3)
    with pytest.raises(TypeError, match="critical_bach"):
        make_run(64, critical_bach=128)


class Doubler:
    """Doubles the batch every ``every`` rollouts (sqrt-rule LR)."""

    def __init__(self, every: int, batch: int = 32):
        self.every, self._stages = every, [Stage(batch, lr_for_batch(batch, 64, 1e-6))]

    @property
    def current(self):
        return self._stages[-1]

    @property
    def stages(self):
        return self._stages

    def step(self, record):
        cur = self.current
        switched = record.samples >= self.every * len(self._stages)
        if switched:
            b = 2 * cur.batch
            self._stages.append(Stage(b, lr_for_batch(b, 64, 1e-6), "doubled", record.samples))
        s = self.current
        return Decision(record.step, record.samples, s.batch, s.lr, len(self._stages) - 1, switched)

    def state_dict(self):
        return {"stages": [s.to_dict() for s in self._stages]}

    def load_state_dict(self, state):
        self._stages = [Stage(**s) for s in state["stages"]]


def test_environment_follows_the_schedule():
    env = SyntheticEnvironment(failure_samples=20_000, seed=1)
    run = env.run(Doubler(2_000), max_samples=9_000)
    batches = [r.batch for r in run]
    assert batches[0] == 32 and sorted(set(batches)) == [32, 64, 128, 256, 512]
    assert batches == sorted(batches)
    assert run.records[-1].samples >= 9_000 > run.records[-2].samples
    for rec, dec in zip(
        run.records[:-1], env.decisions, strict=False
    ):  # each update used the previous decision
        nxt = run.records[rec.step]
        assert (nxt.batch, nxt.lr) == (dec.batch, dec.lr)
    again = env.run(Doubler(2_000), max_samples=9_000)  # run() resets: same seed, same run
    assert [r.to_dict() for r in again] == [r.to_dict() for r in run]


def test_health_is_consumed_per_sample_across_switches():
    """Under the sqrt rule the failure clock does not care how the rollouts were batched."""
    env = SyntheticEnvironment(failure_samples=10_000, noise=0)
    env.run(Doubler(1_000, batch=16), max_samples=12_000)
    assert env.collapsed_at == pytest.approx(10_000)


def test_bad_decision_is_reported():
    class Broken(Doubler):
        def step(self, record):
            return Decision(record.step, record.samples, 0, 1e-6, 0, True)

    with pytest.raises(ValueError, match="batch=0"):
        SyntheticEnvironment().run(Broken(10), max_samples=1_000)
