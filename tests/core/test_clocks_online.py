"""Online estimators: OnlineProgress, GradientNoiseScale, FailureForecast and the detectors
(resumable through JSON state dicts, bounded memory)."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from benchmarks.fixtures.independent_sim import SimTask, simulate_run
from rlvr_schedule.clocks import (
    ClipRatioRise,
    Detector,
    EntropyCollapse,
    EntropySurge,
    FailureForecast,
    GradientNoiseScale,
    GradNormSpike,
    KLBlowup,
    LogProbMismatch,
    OnlineProgress,
    ResponseLengthSurge,
    RewardCrash,
    ZeroVarianceGroups,
    two_batch_estimate,
)
from rlvr_schedule.records import StepRecord


def _linear_records(
    n: int,
    batch: int,
    rate: float,
    start_samples: int = 0,
    start_step: int = 0,
    reward0: float = 0.1,
    noise: float = 0.0,
    seed: int = 0,
) -> list[StepRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        s = start_samples + (i + 1) * batch
        out.append(
            StepRecord(
                step=start_step + i + 1,
                samples=s,
                batch=batch,
                lr=1e-6,
                reward_mean=reward0 + rate * s + noise * rng.normal(),
            )
        )
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
    second = _linear_records(
        100,
        128,
        1e-5,
        start_samples=r_end.samples,
        start_step=r_end.step,
        reward0=r_end.reward_mean - 1e-5 * r_end.samples,
    )
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
    gns.update(
        StepRecord(step=2, samples=128, batch=64, lr=1e-6, grad_norm=1.0, grad_norm_micro=2.0, micro_batch=64)
    )  # micro == full: not a second batch size
    assert gns.n_updates == 0
    with pytest.raises(ValueError, match="beta"):
        GradientNoiseScale(beta=1.0)


def test_failure_forecast_linear_entropy() -> None:
    fail = 50_000  # entropy 1.0 -> 0.1 (10% of its early level) at 50k rollouts
    ff = FailureForecast(window=100, min_points=20)
    out = []
    for i in range(300):
        s = (i + 1) * 64
        out.append(
            ff.update(StepRecord(step=i + 1, samples=s, batch=64, lr=1e-6, entropy=1.0 - 0.9 * s / fail))
        )
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
        ff.update(
            StepRecord(
                step=i + 1, samples=s, batch=32, lr=1e-6, entropy=1.0 - 0.9 * s / fail + 0.02 * rng.normal()
            )
        )
    lo, hi = ff.interval
    assert lo <= fail - ff.samples <= hi
    flat = FailureForecast(min_points=5)
    for i in range(50):
        flat.update(
            StepRecord(step=i + 1, samples=(i + 1) * 8, batch=8, lr=1e-6, entropy=1.0 + 0.01 * (i % 2))
        )
    assert math.isinf(flat.samples_to_failure)  # no downward trend: no failure in sight
    with pytest.raises(ValueError, match="model"):
        FailureForecast(model="cubic")


def _all_online() -> list:
    return [
        OnlineProgress(window=60, min_points=10),
        GradientNoiseScale(beta=0.9),
        FailureForecast(window=60),
        FailureForecast("kl", model="loglinear", threshold=0.2),
        EntropyCollapse(),
        RewardCrash(),
        GradNormSpike(warmup=20, warmup_samples=0, blowup_ratio=5.0),
        KLBlowup(warmup=20, warmup_samples=0, blowup_ratio=5.0, min_value=0.1),
        ZeroVarianceGroups(threshold=0.5),
        ResponseLengthSurge(surge_ratio=1.2),
    ]


def _out(obj, rec):
    v = obj.update(rec)
    if hasattr(v, "to_dict"):
        v = v.to_dict()
    else:
        v = None if v is None or (isinstance(v, float) and math.isnan(v)) else v
    if isinstance(obj, Detector):  # warnings are part of what a detector reports
        return v, obj.n_warnings, [w.to_dict() for w in obj.warnings[-1:]]
    return v


@pytest.mark.parametrize("idx", range(len(_all_online())))
def test_state_dict_round_trip_resumes_identically(idx: int) -> None:
    task = SimTask(critical_batch=100, failure_samples=10_000)
    recs = simulate_run(task, 32, seed=1).records
    recs += [
        StepRecord(
            step=r.step, samples=r.samples, batch=64, lr=r.lr, reward_mean=r.reward_mean, entropy=r.entropy
        )
        for r in simulate_run(task, 64, seed=9).records
    ]
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
    # the objects did produce something (an alarm, an estimate, or a warning)
    assert any((w[0] is not None or w[1] > 0) if isinstance(w, tuple) else w is not None for w in want)


def test_detectors_fire_once_per_streak_with_onset() -> None:
    d = EntropyCollapse(fraction=0.5, warmup=3, patience=3, warmup_samples=0)
    ent = [1.0, 1.0, 1.0, 0.9, 0.4, 0.4, 0.4, 0.4, 0.9, 0.3, 0.3, 0.3]
    alarms = [
        d.update(StepRecord(step=i + 1, samples=(i + 1) * 10, batch=10, lr=1e-6, entropy=e))
        for i, e in enumerate(ent)
    ]
    fired = [a for a in alarms if a is not None]
    assert [(a.step, a.confirmed_step) for a in fired] == [(5, 7), (10, 12)]
    assert fired[0].samples == 50 and d.first_alarm == fired[0] and d.n_alarms == 2
    assert "entropy" in fired[0].message
    # every alarm says why: signal, value, baseline, threshold, step and rollouts of the onset
    a = fired[0]
    assert (a.kind, a.signal, a.value, a.baseline, a.threshold) == ("failure", "entropy", 0.4, 1.0, 0.5)
    # each streak warned at its first record, before it counted as sustained
    assert [(w.step, w.kind) for w in d.warnings] == [(5, "warning"), (10, "warning")]
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
    for i in range(3000):  # the same decline, steeper: below 0.65 x its peak 0.5 from ~1300 records
        rec = StepRecord(step=i + 1, samples=8 * (i + 1), batch=8, lr=1.0, reward_mean=0.5 - i * 0.125 / 1000)
        alarm = alarm or det.update(rec)
    assert alarm is not None and 1300 < alarm.step < 1500 and "no progress" in alarm.message
    # it fell from the start without ever progressing: a divergence, not a failure
    assert alarm.kind == "divergence" and alarm.baseline == pytest.approx(0.5, abs=0.01)
    assert alarm.threshold == pytest.approx(0.65 * alarm.baseline)
    det = RewardCrash(peak_fraction=None)  # without the peak condition: half the start, ~2000 records
    alarm = None
    for i in range(3000):
        rec = StepRecord(step=i + 1, samples=8 * (i + 1), batch=8, lr=1.0, reward_mean=0.5 - i * 0.125 / 1000)
        alarm = alarm or det.update(rec)
    assert alarm is not None and 2000 < alarm.step < 2100 and "initial" in alarm.message
    assert alarm.kind == "divergence" and alarm.threshold == pytest.approx(alarm.baseline / 2)
    # a run that held its level and then fell off a cliff collapsed, progress or not
    det = RewardCrash()
    alarm = None
    for i in range(600):
        r = 0.5 if i < 400 else 0.05
        rec = StepRecord(step=i + 1, samples=8 * (i + 1), batch=8, lr=1.0, reward_mean=r)
        alarm = alarm or det.update(rec)
    assert alarm is not None and alarm.kind == "failure" and alarm.step == 401
    assert RewardCrash(floor_fraction=None, peak_fraction=None).update(rec) is None
    with pytest.raises(ValueError, match="floor_fraction"):
        RewardCrash(floor_fraction=1.5)


def test_spike_detectors_warn_on_spikes_and_fail_on_sustained_blowups() -> None:
    rng = np.random.default_rng(1)
    g = GradNormSpike(warmup=20, warmup_samples=0)
    k = KLBlowup(warmup=20, max_value=1.0, warmup_samples=0, patience_samples=0)
    fired_g, fired_k = [], []
    for i in range(300):
        gn = float(np.exp(rng.normal(0, 0.1))) * (20.0 if 200 <= i < 205 else 1.0)
        kl = 0.01 * float(np.exp(rng.normal(0, 0.1))) + (2.0 if i >= 250 else 0.0)
        rec = StepRecord(step=i + 1, samples=i + 1, batch=1, lr=1.0, grad_norm=gn, kl=kl)
        if g.update(rec):
            fired_g.append(i)
        if a := k.update(rec):
            fired_k.append(i)
            assert a.step == 251 and a.kind == "failure" and a.signal == "kl" and a.value > 1.0
    # five records x20 at batch 1 is a spike, not a sustained blow-up: a warning only
    assert fired_g == [] and [w.step for w in g.warnings] == [201]
    assert g.warnings[0].kind == "warning" and g.warnings[0].threshold > g.warnings[0].baseline > 0
    assert fired_k == [254]  # onset 251, confirmed after patience (5 records)
    # x20 sustained over 64 records of 64 rollouts: a blow-up, dated at its onset
    g = GradNormSpike()
    alarms = [
        g.update(
            StepRecord(
                step=i + 1,
                samples=64 * (i + 1),
                batch=64,
                lr=1.0,
                grad_norm=float(np.exp(rng.normal(0, 0.1))) * (20.0 if i >= 100 else 1.0),
            )
        )
        for i in range(164)
    ]
    got = [a for a in alarms if a is not None]
    assert len(got) == 1 and got[0].step == 101 and got[0].confirmed_samples - got[0].samples + 64 >= 2048


def _coming_apart(n: int = 120) -> list[StepRecord]:
    """A stream that comes apart from record 60: entropy x3, responses pinned at the 512 cap,
    clip fraction x10, train/rollout log-prob gap x20."""
    rng = np.random.default_rng(3)
    out = []
    for i in range(n):
        bad = i >= 60
        j = float(np.exp(rng.normal(0, 0.05)))
        out.append(
            StepRecord(
                step=i + 1,
                samples=64 * (i + 1),
                batch=64,
                lr=1e-6,
                reward_mean=0.5,
                entropy=(1.5 if bad else 0.5) * j,
                response_length=(505.0 if bad else 200.0) * j,
                clip_frac=(0.2 if bad else 0.02) * j,
                extra={
                    "response_length_cap": 512.0,
                    "training/rollout_probs_diff_mean": (0.2 if bad else 0.01) * j,
                },
            )
        )
    return out


@pytest.mark.parametrize("make", [EntropySurge, ResponseLengthSurge, ClipRatioRise, LogProbMismatch])
def test_warning_detectors_warn_with_why_and_resume(make) -> None:
    recs = _coming_apart()
    ref = make()
    assert all(ref.update(r) is None for r in recs)  # warnings are never returned as alarms
    assert ref.warnings and all(w.kind == "warning" for w in ref.warnings)
    w = ref.warnings[0]
    assert 61 <= w.step <= 64 and w.samples == 64 * w.step and w.signal
    assert math.isfinite(w.threshold) and math.isfinite(w.value)
    a = make()
    for r in recs[:62]:
        a.update(r)
    b = make()
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    for r in recs[62:]:
        b.update(r)
    assert [x.to_dict() for x in b.warnings] == [x.to_dict() for x in ref.warnings]


@pytest.mark.parametrize("make", [EntropyCollapse, EntropySurge, ResponseLengthSurge])
def test_early_level_detectors_share_the_warm_up(make) -> None:
    """The early level is the median of the first warmup_samples rollouts (and warmup records),
    unknown before; a negative warm-up is refused."""
    det = make(warmup=3, warmup_samples=200)
    values = [1.0, 3.0, 2.0, 5.0, 4.0]  # a signal value per record, 64 rollouts per record
    for i, v in enumerate(values[:3]):
        det.update(
            StepRecord(step=i + 1, samples=64 * (i + 1), batch=64, lr=1e-6, entropy=v, response_length=v)
        )
        assert math.isnan(det.reference)  # 3 records but only 192 rollouts
    det.update(StepRecord(step=4, samples=256, batch=64, lr=1e-6, entropy=5.0, response_length=5.0))
    assert det.reference == 2.5  # median of 1, 3, 2, 5
    with pytest.raises(ValueError, match="warmup_samples"):
        make(warmup_samples=-1)


def test_kl_rising_from_zero_and_zero_grad_norms_are_no_failure() -> None:
    """KL 0.000 -> 0.009 as learning starts and grad norms logged as exactly 0 (rounded or skipped
    steps) gave false failures before; now at most warnings."""
    k, g = KLBlowup(), GradNormSpike()
    for i in range(400):
        kl = 0.0 if i < 8 else min(0.001 * (i - 7), 0.3)  # rises from 0 to 0.3 and stays
        gn = 0.0 if i % 3 == 0 else 1.0 + 0.05 * (i % 7)
        rec = StepRecord(step=i + 1, samples=16 * (i + 1), batch=16, lr=1e-6, kl=kl, grad_norm=gn)
        assert k.update(rec) is None and g.update(rec) is None
    assert g.n_warnings == 0


def test_zero_variance_groups() -> None:
    z = ZeroVarianceGroups(threshold=0.9, patience=2, group_size=8, excess=0.3)
    # p = 0.5, g = 8: expected zero-std fraction 2/256; 0.5 is far above it
    recs = [
        StepRecord(step=i + 1, samples=i + 1, batch=1, lr=1.0, reward_mean=0.5, frac_zero_std=f)
        for i, f in enumerate([0.01, 0.02, 0.5, 0.5])
    ]
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
