"""plan_schedule: a multi-step schedule from sweep logs, with predictions beside the constant runs."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest

from rlvr_schedule.clocks import SweepFit
from rlvr_schedule.errors import RlvrScheduleError
from rlvr_schedule.planner import plan_schedule, samples_to_target_model
from rlvr_schedule.policy import BatchConstraints, PolicyConfig, StaticSchedule
from rlvr_schedule.records import Run, StepRecord
from rlvr_schedule.synthetic import SyntheticEnvironment, make_sweep
from rlvr_schedule.synthetic.testing import assert_switches_before_failure

HALF = PolicyConfig.tolerance_for(0.5)  # the sample tolerance whose operating point is 0.5 B*


def _run(batch, lr):
    return Run([StepRecord(step=0, samples=batch, batch=batch, lr=lr)], name=f"B{batch}")


def _fit(bstar=200.0, fail=10_000.0, alpha=0.0, e0=1000.0, batches=(50, 100, 200)):
    rows = [
        SimpleNamespace(
            name=f"B{b}",
            batch=b,
            lr=1e-6 * math.sqrt(b / 50),
            samples_to_target=samples_to_target_model(b, bstar, e0),
            failure_samples=fail,
            constant_batch=True,
        )
        for b in batches
    ]
    fit = SimpleNamespace(
        critical_batch=bstar,
        failure_samples=fail,
        failure_samples_interval=(math.nan, math.nan),
        failure_exponent=alpha,
        failure_exponent_interval=(alpha - 0.2, alpha + 0.2),  # alpha's interval excludes 0 unless 0
        failure_batch=math.exp(sum(math.log(b) for b in batches) / len(batches)),  # geometric mean
        failure_lr=math.nan,  # the rule's LR there
        target=0.5,
        rate_at_zero=math.nan,
        initial_reward=0.1,
        runs=rows,
    )
    fit.failure_clock = lambda: SweepFit.failure_clock(fit)  # the knobs a real fit gives the policy
    return fit


def test_stages_from_a_known_fit():
    runs = [_run(b, 1e-6 * math.sqrt(b / 50)) for b in (50, 100, 200)]
    plan = plan_schedule(
        runs,
        fit=_fit(),
        constraints=BatchConstraints(group_size=10),
        sample_tolerance=HALF,
        failure_clock_fraction=0.5,
        growth=2,
        max_stages=3,
    )
    # the clock (10,000 at the failed runs' geometric-mean batch 100, on the rule) fires at half of
    # what is left: 5,000 at 100; then the LR is held at 200, so the rest (5,000) is postponed by
    # sqrt 2 and half of it (3,535.5) is spent at 200
    assert [(s.batch, s.until_samples) for s in plan.stages] == [(100, 5000), (200, 8536), (400, None)]
    assert [s.lr for s in plan.stages] == pytest.approx([1e-6 * math.sqrt(2)] * 3)  # LR held
    assert plan.stages[1].reason.startswith("failure clock: 0.5")
    # E(100) = 1000 / (1 - 100/400) = 1333.3 rollouts, reached inside the first stage
    assert plan.predicted["samples_to_target"] == pytest.approx(4000 / 3)
    assert plan.predicted["steps_to_target"] == pytest.approx(4000 / 3 / 100)
    # the pooled clock: 0.5 spent at 100, 0.25 at 200, the last quarter postponed x2 at 400
    assert plan.predicted["failure_samples"] == pytest.approx(8536 + 5000, rel=1e-3)
    assert plan.predicted["reaches_target_before_failure"] is True
    assert plan.samples_to_target_at_zero == pytest.approx(1000)


def test_target_spanning_stages_and_failure_scaling():
    runs = [_run(b, 1e-6) for b in (50, 100, 200)]
    # E0 = 9000: stage 0 (B=100, E=12000) does 5000/12000 of the climb; stage 1 (B=200 at the held LR,
    # sqrt 2 below the rule: E = 18000 x sqrt 2) the rest
    kw = dict(
        constraints=BatchConstraints(group_size=10),
        base_batch=50,
        base_lr=1e-6,
        sample_tolerance=HALF,
        failure_clock_fraction=0.5,
        growth=2.0,
    )
    plan = plan_schedule(runs, fit=_fit(e0=9000.0), max_stages=2, **kw)
    rest = 7 / 12 * 18000 * math.sqrt(2)
    assert plan.predicted["samples_to_target"] == pytest.approx(5000 + rest)
    assert plan.predicted["steps_to_target"] == pytest.approx(50 + rest / 200)
    assert plan.predicted["reaches_target_before_failure"] is False  # the clock runs out at 12,071
    # the default start is the live policy's: the batch cheapest at the default price 16,
    # -16 + sqrt(16^2 + 2 x 16 x 200) = 65.6, snapped to the nearest runnable batch, 70 (90 at the
    # fixed 0.46 x B* of sample_tolerance 0.3 before the price)
    ten = BatchConstraints(group_size=10)
    assert plan_schedule(runs, fit=_fit(e0=9000.0), constraints=ten).stages[0].batch == 70
    # a step-like failure clock (alpha = 1) lengthens the stages of the larger batches
    flat = plan_schedule(runs, fit=_fit(), **kw)
    steep = plan_schedule(runs, fit=_fit(alpha=1.0), **kw)
    gap = [p.stages[1].until_samples - p.stages[0].until_samples for p in (flat, steep)]
    assert gap[1] == pytest.approx(2 * gap[0], rel=1e-3)


def test_no_critical_batch_is_refused():
    with pytest.raises(RlvrScheduleError, match="critical batch"):
        plan_schedule([_run(64, 1e-6)], fit=_fit(bstar=math.nan))


def test_no_collapse_gives_one_open_stage():
    plan = plan_schedule([_run(50, 1e-6)], fit=_fit(fail=math.nan))
    assert len(plan.stages) == 1 and plan.stages[0].until_samples is None
    assert plan.predicted["failure_samples"] is None and any("collapse" in n for n in plan.notes)


@pytest.fixture(scope="module")
def sweep():
    return make_sweep([32, 64, 128, 256, 512], critical_batch=256, failure_samples=50_000, seed=0)


def test_plan_from_a_synthetic_sweep(sweep):
    plan = plan_schedule(sweep, constraints=BatchConstraints(group_size=8))
    d = json.loads(json.dumps(plan.to_dict(), allow_nan=False))
    assert set(d) >= {"stages", "predicted", "constant"}
    stages = d["stages"]
    assert stages[0]["batch"] < 256 and stages[-1]["until_samples"] is None
    assert all(s["batch"] % 8 == 0 for s in stages)
    untils = [s["until_samples"] for s in stages[:-1]]
    assert untils == sorted(untils)
    # the first switch at half the clock's lower bound: between 0.4 x the pooled clock and that bound
    lo = d["failure_samples_interval"][0] if d.get("failure_samples_interval") else d["failure_samples"]
    assert 0.4 * d["failure_samples"] <= untils[0] <= lo
    assert d["predicted"]["failure_samples"] > d["failure_samples"]  # the switches postpone the clock
    assert [c["batch"] for c in d["constant"]] == [32, 64, 128, 256, 512]
    # the fitted curve tracks the measured constant runs below B*
    for c in d["constant"][:4]:
        assert c["predicted_samples_to_target"] == pytest.approx(c["samples_to_target"], rel=0.25)
        assert c["predicted_steps_to_target"] == pytest.approx(c["predicted_samples_to_target"] / c["batch"])
    assert d["predicted"]["reaches_target_before_failure"] is True


def test_plan_schedule_runs_and_switches_before_failure(sweep):
    plan = plan_schedule(sweep, constraints=BatchConstraints(group_size=8, max_batch=1024))
    sched = plan.to_schedule()
    assert isinstance(sched, StaticSchedule)
    env = SyntheticEnvironment(critical_batch=256, failure_samples=50_000, seed=3)
    check = assert_switches_before_failure(sched, env, max_samples=60_000)
    planned = [s.batch for s in plan.stages]
    assert check.batches == planned[: len(check.batches)] and len(check.batches) >= 3


def test_plan_from_a_schedule_file_and_the_live_policy_from_it_agree(sweep, tmp_path):
    """One config: the plan of a two_clock file and the policy built from the same file start at the
    same batch and LR, run the same batch at the same B*, and switch at the same failure-clock point."""
    import argparse

    import yaml

    from rlvr_schedule.cli import _plan
    from rlvr_schedule.clocks import fit_sweep
    from rlvr_schedule.policy import load_schedule

    fit = fit_sweep(sweep)
    body = {
        "type": "two_clock",
        "critical_batch": float(fit.critical_batch),
        **fit.failure_clock(),
        "base_lr": 1e-6,
        "base_batch": 64,
        "sample_tolerance": 0.2,
        "failure_clock_fraction": 0.4,
        "forecast": "off",
        "detectors": [],
        "constraints": {"group_size": 8, "max_batch": 1024},
    }
    f = tmp_path / "two_clock.yaml"
    f.write_text(yaml.safe_dump(body))
    plan = _plan(argparse.Namespace(schedule=str(f), target=None, group_size=None), sweep)
    live = load_schedule(f)
    first = plan.stages[0]
    assert (live.current.batch, live.current.lr) == (first.batch, pytest.approx(first.lr))
    for b in (100.0, 256.0, 700.0):
        assert plan.operating_batch(b) == live.config.constraints.snap(live.config.operating_fraction * b)
    # the live policy on records at its first stage (no noise estimate, so no tracking): its first
    # switch is the plan's first failure switch, to the plan's second stage
    assert len(plan.stages) >= 2
    recs = [
        StepRecord(step=i, samples=i * first.batch, batch=first.batch, lr=first.lr) for i in range(1, 10_000)
    ]
    switch = next(d for r in recs if (d := live.step(r)).switched)
    assert switch.trigger == "failure_clock"
    assert first.until_samples <= switch.samples < first.until_samples + first.batch + 48
    assert (switch.batch, switch.lr) == (plan.stages[1].batch, pytest.approx(plan.stages[1].lr))


def test_a_plan_with_no_max_batch_stops_at_a_stated_multiple_of_the_sweeps_largest_batch(sweep):
    from rlvr_schedule.planner import BOUND_MULTIPLE

    plan = plan_schedule(sweep, constraints=BatchConstraints(group_size=8))
    top = BOUND_MULTIPLE * max(r.batch for r in sweep)
    assert max(s.batch for s in plan.stages) <= top
    assert any(f"{BOUND_MULTIPLE}x the sweep's largest batch ({top})" in n for n in plan.notes)
    # no stage shorter than the stated part of the failure clock (the last, open, aside)
    from rlvr_schedule.planner import SHORT_STAGE

    lengths = [s.until_samples - s.start_samples for s in plan.stages[:-1]]
    assert min(lengths) >= SHORT_STAGE * plan.failure_samples
