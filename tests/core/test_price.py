"""The price of an update in rollouts: the cheapest batch at it, its measurement, and where it reaches
the policy, the plan and the CLI."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from rlvr_schedule import cli
from rlvr_schedule.errors import ConfigError
from rlvr_schedule.ingest import write_jsonl
from rlvr_schedule.policy import PolicyConfig, TwoClockScheduler, rules, schedule_from_dict
from rlvr_schedule.policy.price import (
    DEFAULT_PRICE,
    LivePrice,
    StepTimeFit,
    cost_optimal_batch,
    price_equivalent,
    step_seconds,
)
from rlvr_schedule.records import StepRecord
from rlvr_schedule.synthetic import make_sweep
from rlvr_schedule.theory.quadratic import LocalQuadratic

VERL_ONE_BATCH = (
    Path(__file__).parents[1] / "data/real/formats/verl_console_taskrunner/qwen2-7b-fsdp2.excerpt.log"
)


@pytest.mark.parametrize("rho", [0.5, 4.0, 16.0, 64.0, 1000.0])
def test_the_cheapest_batch_minimises_rollouts_plus_price_updates_on_the_local_model(rho):
    # the project's noisy-quadratic model on the square-root rule: per-rollout progress p(B) falls
    # linearly to zero at 2 B*; rollouts to a fixed progress ~ 1/p(B), updates ~ 1/(B p(B))
    q = LocalQuadratic.from_spectra(np.ones(4), [1.0, 2.0, 3.0, 4.0], [50.0, 80.0, 20.0, 40.0])
    lr0, base = 1e-3, 64.0
    bstar = q.critical_batch(lr0, base)
    assert bstar > 0
    grid = np.linspace(1e-3 * bstar, 1.999 * bstar, 400_001)
    p = q.progress_per_sample(grid, lr0, base)
    cost = 1.0 / p + rho / (grid * p)
    b = cost_optimal_batch(bstar, rho)
    p_b = q.progress_per_sample(b, lr0, base)
    assert 1.0 / p_b + rho / (b * p_b) <= cost.min() * (1 + 1e-12)  # no batch on the grid is cheaper
    assert b == pytest.approx(float(grid[np.argmin(cost)]), rel=1e-3)
    assert cost_optimal_batch(bstar, rho) == pytest.approx(-rho + math.sqrt(rho * rho + 2 * rho * bstar))
    assert cost_optimal_batch(bstar, rho) < bstar


def test_a_fraction_of_critical_batch_is_the_cheapest_at_its_price_equivalent():
    for f in (0.2, 0.4615, 0.8):
        rho = price_equivalent(f, 100.0)
        assert cost_optimal_batch(100.0, rho) == pytest.approx(f * 100.0)


def test_step_times_at_two_batches_give_the_price_with_an_interval():
    rng = np.random.default_rng(0)
    b = np.repeat([32, 64, 128], 30)
    t = (0.5 * b + 8.0) * np.exp(0.03 * rng.standard_normal(b.size))
    fit = StepTimeFit().fit(b, t, "sweep")
    lo, hi = fit.price_interval_
    assert fit.unidentified_ is None and lo < 16.0 < hi and hi - lo < 4
    one = StepTimeFit().fit([64] * 10, [40.0] * 10)
    assert one.unidentified_ is not None and "one batch" in one.unidentified_ and math.isnan(one.price_)
    assert "no step times" in StepTimeFit().fit([], []).unidentified_


def test_step_seconds_read_trl_verl_and_the_reference_trainer():
    assert step_seconds({"step_time": 3.5}) == 3.5  # TRL, synthetic hosts
    assert step_seconds({"timing_s/step": 179.0}) == 179.0  # verl
    assert step_seconds({"rollout_s": 2.0, "update_s": 1.0, "push_s": 0.5}) == 3.5  # reference trainer
    assert math.isnan(step_seconds({"loss": 1.0}))


def _records(batch: int, n: int, start: int, seconds_per_rollout: float, seconds_per_update: float):
    return [
        StepRecord(
            step=i,
            samples=start + batch * (i + 1),
            batch=batch,
            lr=1e-6,
            extra={"step_time": seconds_per_rollout * batch + seconds_per_update},
        )
        for i in range(n)
    ]


def test_the_live_price_follows_the_records_step_times_and_a_stated_price_wins():
    cfg = dict(critical_batch=600.0, base_lr=1e-6, base_batch=64, detectors=(), track_critical_batch=False)
    live = TwoClockScheduler(PolicyConfig(**cfg))
    stated = TwoClockScheduler(PolicyConfig(rollouts_per_update=4.0, **cfg))
    assert live.price.value() == DEFAULT_PRICE and live.price.source == "default"
    recs = _records(64, 5, 0, 0.1, 6.4) + _records(128, 5, 320, 0.1, 6.4)  # price 64
    for r in recs:
        live.propose(r)
        stated.propose(r)
    assert live.price.source == "measured" and live.price.value() == pytest.approx(64.0)
    assert stated.price.value() == 4.0 and stated.price.source == "stated"
    # the state carries the measured price
    again = TwoClockScheduler(PolicyConfig(**cfg))
    again.load_state_dict(live.state_dict())
    assert again.price.value() == pytest.approx(64.0)


def test_a_price_is_one_field_and_an_old_tolerance_is_priced_in_a_warning():
    assert PolicyConfig(seconds_per_rollout=0.5, seconds_per_update=8.0).price == 16.0
    with pytest.raises(ConfigError, match="seconds_per_update"):
        PolicyConfig(seconds_per_rollout=0.5)
    with pytest.raises(ConfigError, match="sample_tolerance"):
        PolicyConfig(sample_tolerance=0.3, rollouts_per_update=16.0)
    with pytest.warns(
        UserWarning, match=r"sample_tolerance 0.3 .* price 19.8 rollouts per update at critical_batch 100"
    ):
        s = schedule_from_dict({"type": "two_clock", "critical_batch": 100, "sample_tolerance": 0.3})
    assert s.current.batch == 46  # the fixed 0.46 x B* still runs
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = schedule_from_dict(
            {"type": "two_clock", "critical_batch": 100, "price": {"rollouts_per_update": 4}}
        )
    assert s.current.batch == round(cost_optimal_batch(100, 4))  # 24.6 -> 24 (snap to the nearest)


def test_fit_json_reports_the_price_from_a_sweep_and_not_identified_from_one_batch(tmp_path, capsys):
    runs = make_sweep(
        [16, 32, 64, 128, 256],
        critical_batch=128,
        failure_samples=20_000,
        seed=0,
        max_samples=20_000,
        seconds_per_rollout=0.5,
        seconds_per_update=8.0,
    )
    paths = []
    for run in runs:
        p = tmp_path / f"b{run.batch}.jsonl"
        write_jsonl(p, run.records)
        paths.append(str(p))
    cli.main(["fit", "--json", *paths])
    price = json.loads(capsys.readouterr().out)["price"]
    lo, hi = price["interval"]
    assert price["source"].startswith("measured") and lo < 16.0 < hi
    cli.main(["fit", "--json", "--price", "40", *paths])
    d = json.loads(capsys.readouterr().out)
    assert d["price"]["rollouts_per_update"] == 40 and d["price"]["source"].startswith("stated")
    cheapest = [r for r in d["runs"] if r["cheapest"]]
    assert len(cheapest) == 1
    cli.main(["fit", "--json", str(VERL_ONE_BATCH)])
    price = json.loads(capsys.readouterr().out)["price"]
    assert price["unidentified"].startswith("not identified: step times at one batch only")
    assert price["source"] == "default" and price["rollouts_per_update"] == DEFAULT_PRICE


def test_plan_takes_the_price_and_marks_the_cheapest(tmp_path, capsys):
    runs = make_sweep(
        [16, 32, 64, 128, 256],
        critical_batch=128,
        failure_samples=60_000,
        seed=0,
        seconds_per_rollout=0.5,
        seconds_per_update=8.0,
    )
    paths = []
    for run in runs:
        p = tmp_path / f"b{run.batch}.jsonl"
        write_jsonl(p, run.records)
        paths.append(str(p))
    cli.main(["plan", "--json", "--price", "64", *paths])
    d = json.loads(capsys.readouterr().out)
    assert d["price"]["rollouts_per_update"] == 64 and d["price"]["source"] == "stated"
    rows = [d["predicted"], *d["constant"]]
    marked = [r for r in rows if r.get("cheapest")]
    assert len(marked) == 1
    costs = [r["cost_to_target"] for r in rows if r.get("cost_to_target") is not None]
    assert marked[0]["cost_to_target"] == min(costs)
    cli.main(["plan", "--json", *paths])
    low = json.loads(capsys.readouterr().out)
    assert low["price"]["source"] == "measured" and d["stages"][0]["batch"] > low["stages"][0]["batch"]


def test_live_price_needs_two_batches():
    lp = LivePrice()
    for _ in range(10):
        lp.update(64, 30.0)
    assert lp.measured is None and lp.value() == DEFAULT_PRICE


def test_the_report_prices_every_run_and_draws_iso_cost_lines(tmp_path):
    pytest.importorskip("matplotlib")
    from rlvr_schedule.report import write_report

    runs = make_sweep([16, 64, 256], critical_batch=128, failure_samples=60_000, seed=0, max_samples=30_000)
    index = write_report(runs, tmp_path, price=32.0)
    summary = json.loads((tmp_path / "summary.json").read_text())["cost_to_target"]
    assert summary["price"] == 32.0 and summary["source"] == "stated"
    rows = summary["rows"]
    assert [r["cheapest"] for r in rows].count(True) == 1
    best = min(rows, key=lambda r: r["cost"])
    assert best["cheapest"] and best["cost"] == pytest.approx(best["rollouts"] + 32.0 * best["updates"])
    assert (tmp_path / "cost_to_target.png").stat().st_size > 0
    assert "cost_to_target.png" in index.read_text() and "**cheapest**" in (tmp_path / "index.md").read_text()


def test_the_priced_bar_charges_a_seed_that_never_reaches_the_target_its_whole_run():
    from benchmarks.evidence import schedules_v3 as S

    def seed(best: float, total: tuple[float, float]) -> dict:
        return {"best": best, "total": total}

    n = 6
    curves = {f"constant {b} x1 LR": [seed(0.5, (40_000.0, 40_000.0 / b))] * n for b in S.BATCHES}
    tt = {
        k: np.array([[10_000.0 + b, (10_000.0 + b) / b]] * n) for b, k in zip(S.BATCHES, curves, strict=True)
    }
    tt["constant 256 x1 LR"][:] = np.nan  # never reaches the target: charged its whole run
    pol = S.priced(16.0)
    rng = np.random.default_rng(0)
    curves[pol] = [seed(0.52 + 0.001 * rng.standard_normal(), (40_000.0, 500.0)) for _ in range(n)]
    curves[S.POLICY] = curves[pol]
    tt[pol] = np.array([[10_000.0, 50.0 + rng.standard_normal()] for _ in range(n)])
    tt[S.POLICY] = tt[pol]
    bar = S.priced_bar(curves, tt, 16.0, "constant 16 x1 LR")
    costs = {k: 10_000.0 + b + 16.0 * (10_000.0 + b) / b for b, k in zip(S.BATCHES, curves, strict=False)}
    assert bar["costs"]["constant 256 x1 LR"] == pytest.approx(40_000.0 + 16.0 * 40_000.0 / 256)
    cheapest = min((k for k in costs if k != "constant 256 x1 LR"), key=costs.get)
    assert bar["cstar"] == cheapest and bar["cost_ratio"] < 1.0
    assert bar["passed"] and all(bar["ok"].values())


def test_a_measured_price_of_zero_starts_at_the_smallest_runnable_batch():
    # a sweep whose step times show no per-update cost (an intercept at or below 0) prices updates at 0
    s = TwoClockScheduler(
        PolicyConfig(critical_batch=40.0, rollouts_per_update=0.0, constraints={"group_size": 8})
    )
    assert s.current.batch == 8


DEMO_SWEEP = Path(__file__).parents[1] / "data/demo/sweep"


def _demo_runs():
    from rlvr_schedule.ingest import load_runs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the trainer's extra metrics are kept in extra, with a warning
        return load_runs([str(DEMO_SWEEP)])


def test_fit_json_reports_the_demo_sweeps_price_with_an_interval_and_a_stated_price_wins(tmp_path, capsys):
    # the reference trainer's demo sweep (batches 8-128, two seeds, vLLM CPU): its step times at five
    # batches identify t_step = a B + b, so fit reports rho = b / a with a 95% interval
    paths = sorted(str(p) for p in DEMO_SWEEP.glob("*.jsonl.gz"))
    cli.main(["fit", "--json", *paths])
    price = json.loads(capsys.readouterr().out)["price"]
    lo, hi = price["interval"]
    rho = price["rollouts_per_update"]
    assert price["source"].startswith("measured") and price["unidentified"] is None
    assert price["batches"] == [8, 16, 32, 64, 128] and price["updates"] == 6944
    assert 0 < lo < rho < hi and hi - lo < rho  # a finite interval, narrower than the price itself
    assert rho == pytest.approx(22.25, abs=0.05)  # 0.039 s per update / 0.00177 s per rollout
    # the fitted line is the runs' step time: the mean at each batch within 15% of a B + b
    a, b = price["seconds_per_rollout"], price["seconds_per_update"]
    for run in _demo_runs():
        t = [step_seconds(r.extra) for r in run.records]
        assert float(np.mean(t)) == pytest.approx(a * run.batch + b, rel=0.15)
    # a stated price wins: --price, or the schedule file's rollouts_per_update (plan --schedule)
    cli.main(["fit", "--json", "--price", "4", *paths])
    d = json.loads(capsys.readouterr().out)["price"]
    assert d["rollouts_per_update"] == 4 and d["source"].startswith("stated")
    assert d["measured"]["rollouts_per_update"] == pytest.approx(rho)
    spec = tmp_path / "two_clock.yaml"
    spec.write_text("type: two_clock\nprice:\n  rollouts_per_update: 64\n")
    cli.main(["plan", "--json", "--schedule", str(spec), *paths])
    d = json.loads(capsys.readouterr().out)["price"]
    assert d["rollouts_per_update"] == 64 and d["source"] == "stated"


def test_the_reference_trainers_step_times_change_the_live_price():
    # the demo sweep's records as the reference trainer wrote them (rollout_s + update_s + push_s per
    # update): the policy's live price leaves the default once two batches are seen and lands near
    # the price fitted over the whole sweep
    runs = {r.name: r for r in _demo_runs()}
    fit = StepTimeFit.from_runs(runs.values())
    sched = TwoClockScheduler(
        PolicyConfig(
            critical_batch=600.0, base_lr=4e-4, base_batch=32, detectors=(), track_critical_batch=False
        )
    )
    samples = 0
    for name in ("b16-s1", "b64-s1"):  # a run that switched from 16 to 64
        for r in runs[name].records[20:80]:  # past the engine's first, slow steps
            samples += r.batch
            sched.propose(dataclasses.replace(r, samples=samples))
            if name == "b16-s1":
                assert sched.price.source == "default" and sched.price.value() == DEFAULT_PRICE
    assert sched.price.source == "measured"
    lo, hi = fit.price_interval_
    assert lo < sched.price.value() < hi and abs(sched.price.value() - DEFAULT_PRICE) > 4
    # and the batch the policy runs at a B* follows it
    assert rules.operating_batch(sched.config, 600.0, price=sched.price.value()) > rules.operating_batch(
        sched.config, 600.0, price=DEFAULT_PRICE
    )


def test_the_fitted_configuration_tells_the_policy_the_sweeps_fit_not_the_truth():
    # the priced bar "as a user would": B* and the failure clock from fit_sweep on the task's own sweep
    from benchmarks.evidence import schedules_v3 as S

    name = "c5_drift3"
    S.FITTED, S.PRICES = True, (16.0,)
    try:
        clock = S.sweep_clock(name)
        bstar = S.FITTED_BSTAR[name]
        assert bstar is not None and bstar != S.task_kw(name)["critical_batch"]
        lo, hi = S.FITTED_INFO[name]["critical_batch_interval"]
        assert lo < bstar < hi and 0.5 < bstar / S.task_kw(name)["critical_batch"] < 2
        assert clock["failure_samples"] > 0 and set(clock) >= {"failure_batch", "failure_exponent"}
        pol = S.makers(name, clock)[S.priced(16.0)]()
        assert pol.config.critical_batch == bstar and pol.config.failure_samples == clock["failure_samples"]
    finally:
        S.FITTED, S.PRICES = False, ()
        S.FITTED_BSTAR.clear()
        S.FITTED_INFO.clear()
    pol = S.makers(name, S.sweep_clock(name))[S.POLICY]()
    assert pol.config.critical_batch == S.task_kw(name)["critical_batch"]  # the default: the true B*
