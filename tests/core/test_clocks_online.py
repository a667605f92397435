"""Online estimators: OnlineProgress, GradientNoiseScale, FailureForecast and the detectors
(resumable through JSON state dicts, bounded memory)."""

from __future__ import annotations

import copy
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from rlvr_schedule.clocks import (
    EntropyCollapse,
    FailureForecast,
    GradientNoiseScale,
    GradNormSpike,
    KLBlowup,
    OnlineProgress,
    RewardCrash,
    ZeroVarianceGroups,
    two_batch_estimate,
)
from rlvr_schedule.records import StepRecord

sys.path.insert(0, str(Path(__file__).parent))
from independent_sim import SimTask, simulate_run  # noqa: E402


def _linear_records(n: int, batch: int, rate: float, start_samples: int = 0, start_step: int = 0,
                    reward0: float = 0.1, noise: float = 0.0, seed: int = 0) -> list[StepRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        s = start_samples + (i + 1) * batch
        out.append(StepRecord(step=start_step + i + 1, samples=s, batch=batch, lr=1e-6,
                              reward_mean=reward0 + rate * s + noise * rng.normal()))
    return out


def test_online_progress_rate_and_switch_effect() -> None:
    op = OnlineProgress(window=100, min_points=10)
    first = _linear_records(150, 32, 2e-5)
    for r in first[:5]:
        assert math.isnan(op.update(r))  # not enough points yet
    for r in first[5:]:
        op.update(r)
    assert op.rate == pytest.approx(2e-5, rel=1e-6)
    assert op.rate_per_step == pytest.approx(32 * 2e-5, rel=1e-6)
    assert math.isnan(op.switch_effect)
    r_end = first[-1]
    second = _linear_records(100, 128, 1e-5, start_samples=r_end.samples, start_step=r_end.step,
                             reward0=r_end.reward_mean - 1e-5 * r_end.samples)
    for r in second:
        op.update(r)
    assert op.rate == pytest.approx(1e-5, rel=1e-6)
    assert op.switch_effect == pytest.approx(0.5, rel=1e-6)
    hist = op.switch_history()
    assert hist[-1]["batch_before"] == 32 and hist[-1]["batch_after"] == 128
    lo, hi = op.rate_interval()
    assert lo <= op.rate <= hi


def test_online_progress_memory_is_bounded() -> None:
    op = OnlineProgress(window=50, min_points=10)
    for r in _linear_records(20_000, 64, 1e-7, noise=1e-6):
        op.update(r)
    st = op.state_dict()
    assert len(st["ols"]["points"]) == 50
    assert op.rate == pytest.approx(1e-7, rel=0.1)


def test_two_batch_estimate_exact_in_expectation() -> None:
    g2, tr = 2.0, 300.0
    e_small, e_big = g2 + tr / 8, g2 + tr / 64
    assert two_batch_estimate(e_small, 8, e_big, 64) == pytest.approx((g2, tr))
    with pytest.raises(ValueError, match="b_big > b_small"):
        two_batch_estimate(1, 64, 1, 8)


def test_gradient_noise_scale_recovers_b_simple_from_simulated_norms() -> None:
    task = SimTask(b_simple=100.0)
    run = simulate_run(task, 128, seed=2, max_samples=40_000)
    gns = GradientNoiseScale(beta=0.995)
    for r in run.records:
        gns.update(r)
    assert gns.n_updates == len(run)
    assert gns.b_simple == pytest.approx(100.0, rel=0.3)


def test_gradient_noise_scale_skips_records_without_both_norms() -> None:
    gns = GradientNoiseScale()
    assert math.isnan(gns.update(StepRecord(step=1, samples=64, batch=64, lr=1e-6, grad_norm=1.0)))
    gns.update(StepRecord(step=2, samples=128, batch=64, lr=1e-6, grad_norm=1.0, grad_norm_micro=2.0,
                          micro_batch=64))  # micro == full: not a second batch size
    assert gns.n_updates == 0
    with pytest.raises(ValueError, match="beta"):
        GradientNoiseScale(beta=1.0)


def test_failure_forecast_linear_entropy() -> None:
    fail = 50_000  # entropy 1.0 -> 0.1 (10% of its early level) at 50k rollouts
    ff = FailureForecast(window=100, min_points=20)
    out = []
    for i in range(300):
        s = (i + 1) * 64
        out.append(ff.update(StepRecord(step=i + 1, samples=s, batch=64, lr=1e-6,
                                        entropy=1.0 - 0.9 * s / fail)))
    assert math.isnan(out[5])
    assert ff.failure_samples == pytest.approx(fail, rel=0.02)
    lo, hi = ff.interval
    assert lo <= ff.samples_to_failure <= hi


def test_failure_forecast_noisy_interval_and_flat_signal() -> None:
    rng = np.random.default_rng(0)
    ff = FailureForecast(window=200, min_points=20, level=0.95)
    fail = 40_000
    for i in range(300):
        s = (i + 1) * 32
        ff.update(StepRecord(step=i + 1, samples=s, batch=32, lr=1e-6,
                             entropy=1.0 - 0.9 * s / fail + 0.02 * rng.normal()))
    lo, hi = ff.interval
    assert lo <= fail - ff.samples <= hi
    flat = FailureForecast(min_points=5)
    for i in range(50):
        flat.update(StepRecord(step=i + 1, samples=(i + 1) * 8, batch=8, lr=1e-6,
                               entropy=1.0 + 0.01 * (i % 2)))
    assert math.isinf(flat.samples_to_failure)  # no downward trend: no failure in sight
    with pytest.raises(ValueError, match="model"):
        FailureForecast(model="cubic")


def _all_online() -> list:
    return [OnlineProgress(window=60, min_points=10), GradientNoiseScale(beta=0.9),
            FailureForecast(window=60),
            FailureForecast("kl", model="loglinear", threshold=0.2), EntropyCollapse(), RewardCrash(),
            GradNormSpike(warmup=20, warmup_samples=0), KLBlowup(warmup=20, warmup_samples=0), ZeroVarianceGroups(threshold=0.5)]


def _out(obj, rec):
    v = obj.update(rec)
    if hasattr(v, "to_dict"):
        return v.to_dict()
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


@pytest.mark.parametrize("idx", range(len(_all_online())))
def test_state_dict_round_trip_resumes_identically(idx: int) -> None:
    task = SimTask(critical_batch=100, failure_samples=10_000)
    recs = simulate_run(task, 32, seed=1).records
    recs += [StepRecord(step=r.step, samples=r.samples, batch=64, lr=r.lr, reward_mean=r.reward_mean,
                        entropy=r.entropy) for r in simulate_run(task, 64, seed=9).records]
    ref, a = _all_online()[idx], _all_online()[idx]
    half = len(recs) // 2
    want = [_out(ref, r) for r in recs]
    for r in recs[:half]:
        _out(a, r)
    state = json.loads(json.dumps(a.state_dict()))  # JSON-able, and survives the trip
    b = _all_online()[idx]
    b.load_state_dict(state)
    got = [_out(b, r) for r in recs[half:]]
    assert got == want[half:]
    assert any(w is not None for w in want)  # the objects did produce something


def test_detectors_fire_once_per_streak_with_onset() -> None:
    d = EntropyCollapse(fraction=0.5, warmup=3, patience=3, warmup_samples=0)
    ent = [1.0, 1.0, 1.0, 0.9, 0.4, 0.4, 0.4, 0.4, 0.9, 0.3, 0.3, 0.3]
    alarms = [d.update(StepRecord(step=i + 1, samples=(i + 1) * 10, batch=10, lr=1e-6, entropy=e))
              for i, e in enumerate(ent)]
    fired = [a for a in alarms if a is not None]
    assert [(a.step, a.confirmed_step) for a in fired] == [(5, 7), (10, 12)]
    assert fired[0].samples == 50 and d.first_alarm == fired[0] and d.n_alarms == 2
    assert "entropy" in fired[0].message
    # records without the signal leave the streak alone
    assert d.update(StepRecord(step=13, samples=130, batch=10, lr=1e-6)) is None


def test_reward_crash_ignores_noise_of_small_batches_and_catches_a_crash() -> None:
    rng = np.random.default_rng(0)
    det = RewardCrash()
    # 2 prompts x 8 rollouts per update: very noisy, slowly rising, no crash
    for i in range(3000):
        p = 0.2 + 0.4 * i / 3000
        r = rng.binomial(8, np.clip(p + rng.normal(0, 0.3, 2), 0, 1)).sum() / 16
        rec = StepRecord(step=i + 1, samples=16 * (i + 1), batch=16, lr=1e-6, reward_mean=r)
        assert det.update(rec) is None
    alarm = None
    for i in range(3000, 3300):
        p = max(0.6 - 0.01 * (i - 3000), 0.0)
        r = rng.binomial(16, p) / 16
        rec = StepRecord(step=i + 1, samples=16 * (i + 1), batch=16, lr=1e-6, reward_mean=r)
        alarm = alarm or det.update(rec)
    assert alarm is not None and 3000 < alarm.step < 3100


def test_reward_crash_needs_progress_or_a_fall_below_half_the_start() -> None:
    det = RewardCrash()
    for i in range(3000):  # declines from the start, by less than half: nothing gained, nothing crashed
        rec = StepRecord(step=i + 1, samples=8 * (i + 1), batch=8, lr=1.0, reward_mean=0.5 - i * 0.05 / 1000)
        assert det.update(rec) is None
    det = RewardCrash()
    alarm = None
    for i in range(3000):  # the same decline, steeper: below half the initial 0.5 from ~2000 records
        rec = StepRecord(step=i + 1, samples=8 * (i + 1), batch=8, lr=1.0, reward_mean=0.5 - i * 0.125 / 1000)
        alarm = alarm or det.update(rec)
    assert alarm is not None and 2000 < alarm.step < 2100 and "initial" in alarm.message
    assert RewardCrash(floor_fraction=None).update(rec) is None
    with pytest.raises(ValueError, match="floor_fraction"):
        RewardCrash(floor_fraction=1.5)


def test_spike_detectors() -> None:
    rng = np.random.default_rng(1)
    g = GradNormSpike(warmup=20, warmup_samples=0)
    k = KLBlowup(warmup=20, max_value=1.0, warmup_samples=0)
    fired_g, fired_k = [], []
    for i in range(300):
        gn = float(np.exp(rng.normal(0, 0.1))) * (20.0 if 200 <= i < 205 else 1.0)
        kl = 0.01 * float(np.exp(rng.normal(0, 0.1))) + (2.0 if i >= 250 else 0.0)
        rec = StepRecord(step=i + 1, samples=i + 1, batch=1, lr=1.0, grad_norm=gn, kl=kl)
        if g.update(rec):
            fired_g.append(i)
        if k.update(rec):
            fired_k.append(i)
    assert fired_g == [201]
    assert fired_k == [251]


def test_zero_variance_groups() -> None:
    z = ZeroVarianceGroups(threshold=0.9, patience=2, group_size=8, excess=0.3)
    # p = 0.5, g = 8: expected zero-std fraction 2/256; 0.5 is far above it
    recs = [StepRecord(step=i + 1, samples=i + 1, batch=1, lr=1.0, reward_mean=0.5, frac_zero_std=f)
            for i, f in enumerate([0.01, 0.02, 0.5, 0.5])]
    out = [z.update(r) for r in recs]
    assert out[:3] == [None, None, None] and out[3] is not None and out[3].step == 3
    with pytest.raises(ValueError, match="group_size"):
        ZeroVarianceGroups(excess=0.1)


def test_detector_state_is_not_shared_between_fits() -> None:
    d = EntropyCollapse()
    d2 = copy.deepcopy(d)
    d.update(StepRecord(step=1, samples=1, batch=1, lr=1.0, entropy=1.0))
    assert d2.state_dict()["early"] == []


def test_failure_forecast_on_the_simulator_predicts_collapse_early() -> None:
    """Halfway to collapse, the entropy trend forecasts the failure point (sim F = 30k rollouts)."""
    task = SimTask(critical_batch=100, failure_samples=30_000)
    run = simulate_run(task, 64, seed=4)
    ff = FailureForecast(window=100)
    for r in run.records:
        ff.update(r)
        if r.samples >= 15_000:
            break
    assert ff.failure_samples == pytest.approx(30_000, rel=0.15)
    lo, hi = ff.interval
    assert lo <= 30_000 - ff.samples <= hi


def test_failure_forecast_loglinear_rising_signal() -> None:
    """KL growing exponentially reaches its threshold where the log-linear trend says."""
    ff = FailureForecast("kl", threshold=0.5, model="loglinear", window=100)
    for i in range(200):
        s = (i + 1) * 32
        ff.update(StepRecord(step=i + 1, samples=s, batch=32, lr=1e-6, kl=0.01 * math.exp(s / 5000)))
    assert ff.failure_samples == pytest.approx(5000 * math.log(50), rel=1e-6)
    past = FailureForecast("kl", threshold=0.005, min_points=5)
    for i in range(10):
        past.update(StepRecord(step=i + 1, samples=i + 1, batch=1, lr=1.0, kl=0.01))
    assert past.samples_to_failure == 0.0  # already beyond the threshold
