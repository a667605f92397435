"""Benchmark of the clocks: ``fit_sweep`` on 5 runs x 10k steps (goal < 2 s), and the per-record
cost and memory of the online estimators over a long stream.

    python -m benchmarks.bench_fit [--steps 10000] [--runs 5] [--records 200000] [--accuracy] [--real]

``--accuracy`` also fits 12 sweeps of the independent simulator (benchmarks/fixtures/independent_sim.py)
and prints the relative errors of the critical batch and the failure samples, then 8 sweeps with one
batch above 2B* (a diverging run), and the leads of warnings and forecast before the failure point.
``--real`` runs the failure clock on the committed real runs (tests/data/real/runs, by SPLIT.json).

Prints a Markdown table; the figures in benchmarks/PERFORMANCE.md ("Fitting and the online estimators") come from this script.
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import time
import tracemalloc

import numpy as np

from rlvr_schedule.clocks import (
    EntropyCollapse,
    FailureClock,
    FailureForecast,
    GradientNoiseScale,
    GradNormSpike,
    KLBlowup,
    OnlineProgress,
    RewardCrash,
    fit_sweep,
)
from rlvr_schedule.records import StepRecord
from rlvr_schedule.synthetic import make_sweep


def _time(fn, repeat: int) -> list[tuple[float, float]]:
    """(wall, cpu) seconds per call: the dev machine is shared, so CPU time is reported too."""
    out = []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        out.append((time.perf_counter() - t, time.process_time() - c))
    return out


def _median(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return (statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs))


def bench_sweep(n_runs: int, steps: int, repeat: int) -> list[tuple[str, float]]:
    batches = [16 * 2**i for i in range(n_runs)]
    runs = make_sweep(batches, critical_batch=128, failure_samples=steps * 16 * 0.8, steps=steps, seed=0)
    rows = []
    rows.append(("fit_sweep (median)", _median(_time(lambda: fit_sweep(runs), repeat))))
    rows.append(
        ("FailureClock on every run", _median(_time(lambda: [FailureClock().fit(r) for r in runs], repeat)))
    )
    fit = fit_sweep(runs)
    print(
        f"sweep: batches {batches}, {steps} steps each; fitted B* {fit.critical_batch:.1f} (true 128), "
        f"failure samples {fit.failure_samples:.0f} (true {steps * 16 * 0.8:.0f})"
    )
    return rows


def bench_online(n: int) -> list[tuple[str, float]]:
    rng = np.random.default_rng(0)
    recs = [
        StepRecord(
            step=i + 1,
            samples=64 * (i + 1),
            batch=64,
            lr=1e-6,
            reward_mean=0.3 + 0.01 * float(rng.normal()),
            entropy=1.0 + 0.01 * float(rng.normal()),
            kl=0.01,
            grad_norm=1.0 + 0.05 * float(rng.random()),
            grad_norm_micro=1.5,
            micro_batch=16,
        )
        for i in range(min(n, 20_000))
    ]
    rows = []
    objs = {
        "OnlineProgress": OnlineProgress(),
        "GradientNoiseScale": GradientNoiseScale(),
        "FailureForecast": FailureForecast(),
        "EntropyCollapse": EntropyCollapse(),
        "RewardCrash": RewardCrash(),
        "GradNormSpike": GradNormSpike(),
        "KLBlowup": KLBlowup(),
    }
    m = len(recs)
    for name, obj in objs.items():
        c = time.process_time()
        for i in range(n):
            obj.update(recs[i % m])
        dt = (time.process_time() - c) / n
        # memory: a second stream of the same length under tracemalloc (bounded windows: flat)
        fresh = type(obj)()
        tracemalloc.start()
        for i in range(n):
            fresh.update(recs[i % m])
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rows.append((f"{name}.update: CPU per record, traced peak memory", dt * 1e6, peak / 1024))
    return rows


def bench_accuracy() -> None:
    from benchmarks.fixtures.independent_sim import SimTask, simulate_sweep

    print("\n| true B* | true F | seed | B* fit | err | F fit | err | B* in interval |")
    print("|---|---|---|---|---|---|---|---|")
    errs = []
    for bstar, fail in [(160, 40_000), (100, 30_000), (300, 60_000)]:
        for seed in range(4):
            fit = fit_sweep(
                simulate_sweep(
                    SimTask(critical_batch=bstar, failure_samples=fail), [16, 32, 64, 128, 256], seed=seed
                )
            )
            eb, ef = fit.critical_batch / bstar - 1, fit.failure_samples / fail - 1
            lo, hi = fit.critical_batch_interval
            errs.append((abs(eb), abs(ef), lo <= bstar <= hi))
            print(
                f"| {bstar} | {fail} | {seed} | {fit.critical_batch:.1f} | {eb:+.1%} "
                f"| {fit.failure_samples:.0f} | {ef:+.1%} | {lo <= bstar <= hi} |"
            )
    e = np.array(errs, float)
    print(
        f"\nmax |err| B* {e[:, 0].max():.1%} (median {np.median(e[:, 0]):.1%}), "
        f"max |err| F {e[:, 1].max():.1%}, interval coverage {e[:, 2].mean():.0%}"
    )

    # sweeps with one batch above 2B*: per-rollout progress is negative there, the reward falls from
    # the start; that run is reported as diverging and must not drag the pooled failure samples
    print("\n| true B* | true F | batches | seed | diverging runs | F fit | err |")
    print("|---|---|---|---|---|---|---|")
    for bstar, fail in [(160, 40_000), (100, 30_000)]:
        batches = [16, 32, 64, 128, 512]
        for seed in range(4):
            task = SimTask(critical_batch=bstar, failure_samples=fail)
            fit = fit_sweep(simulate_sweep(task, batches, seed=seed))
            div = [r.batch for r in fit.runs if r.diverging]
            print(
                f"| {bstar} | {fail} | {batches} | {seed} | {div} | {fit.failure_samples:.0f} "
                f"| {fit.failure_samples / fail - 1:+.1%} |"
            )


def _forecast_lead(run, failure_samples: float, tol: float = 0.1) -> float:
    """Rollouts before ``failure_samples`` from which the online entropy forecast stays within
    ``tol`` of it (NaN if it never settles there before the failure)."""
    ff = FailureForecast()
    since = math.nan
    for r in run:
        if r.samples >= failure_samples:
            break
        ff.update(r)
        pred = ff.failure_samples
        ok = math.isfinite(pred) and abs(pred / failure_samples - 1) <= tol
        since = (since if math.isfinite(since) else r.samples) if ok else math.nan
    return failure_samples - since if math.isfinite(since) else math.nan


def _reward_forecast_lead(run, failure_samples: float) -> float:
    """Rollouts before ``failure_samples`` from which an online reward forecast (trend of the last
    20 records towards half the early reward) keeps pointing at a failure (NaN if it does not)."""
    ff = FailureForecast("reward_mean", fraction=0.5, window=20, min_points=5, warmup=3)
    since = math.nan
    for r in run:
        if r.samples >= failure_samples:
            break
        stf = ff.update(r)
        since = (since if math.isfinite(since) else r.samples) if math.isfinite(stf) else math.nan
    return failure_samples - since if math.isfinite(since) else math.nan


def bench_real() -> None:
    """The failure clock on the committed real runs (tests/data/real/runs, SPLIT.json), each raw log
    read by the product's own reader (``load_run``; benchmarks/fixtures/real_runs.py maps a name to its file)."""
    from benchmarks.fixtures.real_runs import SPLIT as split
    from benchmarks.fixtures.real_runs import load_real

    print(
        "\n| split | run | label | collapse step | failure step (signal) | diverging | warnings | "
        "first warning: step (lead, rollouts) | reward-forecast lead (rollouts) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    summary = {}
    for part in ("calibration", "test"):
        healthy_ok = healthy = collapsed_ok = collapsed = 0
        leads_w, leads_f = [], []
        for name in split[part]:
            lab = split["labels"][name]
            run = load_real(name)
            fc = FailureClock(stop_at_failure=False).fit(run)
            step_of = {r.step: r.samples for r in run}
            if lab["label"] == "healthy":
                healthy += 1
                healthy_ok += fc.failure_samples_ is None and not fc.diverging_
            else:
                collapsed += 1
                collapsed_ok += (
                    fc.failure_samples_ is not None and fc.failure_samples_ <= step_of[lab["collapse_step"]]
                )
            first_w, lf = "", math.nan
            if fc.failure_samples_ is not None:
                before = [w for w in fc.warnings_ if w.samples <= fc.failure_samples_]
                if before:
                    first_w = f"{before[0].step} ({fc.lead(before[0]):.0f})"
                    leads_w.append(fc.lead(before[0]))
                lf = _reward_forecast_lead(run, fc.failure_samples_)
                if math.isfinite(lf):
                    leads_f.append(lf)
            fail = "none" if fc.failure_step_ is None else f"{fc.failure_step_} ({fc.signal_})"
            if lab["label"] != "healthy" or fc.failure_step_ is not None or fc.diverging_:
                print(
                    f"| {part} | {name} | {lab['label']} | {lab['collapse_step']} | {fail} "
                    f"| {fc.diverging_} | {len(fc.warnings_)} | {first_w} | {lf:.0f} |"
                )
        summary[part] = (healthy_ok, healthy, collapsed_ok, collapsed, leads_w, leads_f)
    print("\n(healthy runs without a failure are not listed one by one)")
    for part, (hok, h, cok, c, lw, lfc) in summary.items():
        print(
            f"{part}: healthy without a false failure {hok}/{h}; collapsed flagged in time {cok}/{c}; "
            f"median lead of the first warning {np.median(lw) if lw else math.nan:.0f} rollouts "
            f"({len(lw)} runs with one), of the reward forecast "
            f"{np.median(lfc) if lfc else math.nan:.0f} rollouts ({len(lfc)} runs)"
        )


def bench_sim_leads() -> None:
    """Lead of the warnings and of the online forecast before the failure point on the independent
    simulator's collapsing runs (3 tasks x 4 seeds x 5 batches)."""
    from benchmarks.fixtures.independent_sim import SimTask, simulate_sweep

    leads, wleads, errs = [], [], []
    for bstar, fail in [(160, 40_000), (100, 30_000), (300, 60_000)]:
        for seed in range(4):
            for run in simulate_sweep(
                SimTask(critical_batch=bstar, failure_samples=fail), [16, 32, 64, 128, 256], seed=seed
            ):
                fc = FailureClock().fit(run)
                if fc.failure_samples_ is None:
                    continue
                errs.append(fc.failure_samples_ / fail - 1)
                leads.append(_forecast_lead(run, fc.failure_samples_) / fail)
                if fc.warnings_:
                    wleads.append(fc.lead(fc.warnings_[0]) / fail)
    lf = np.array(leads, float)
    print(
        f"\nsimulator: {len(errs)} collapsing runs; failure point error median {np.median(errs):+.1%} "
        f"(range {min(errs):+.1%} .. {max(errs):+.1%}); forecast within 10% of the failure point from "
        f"a median {np.nanmedian(lf):.0%} of F before it (settled in {np.isfinite(lf).sum()}/{lf.size} "
        f"runs); first warning a median {np.median(wleads):.1%} of F before it ({len(wleads)} runs "
        "with a warning)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--accuracy", action="store_true")
    ap.add_argument("--real", action="store_true", help="the failure clock on the committed real runs")
    a = ap.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    print("| what | value |\n|---|---|")
    for name, (wall, cpu) in bench_sweep(a.runs, a.steps, a.repeat):
        print(f"| {name}, {a.runs} runs x {a.steps} steps | {wall:.3f} s wall, {cpu:.3f} s CPU |")
    for name, us, kib in bench_online(a.records):
        print(f"| {name}, {a.records} records | {us:.1f} us, {kib:.0f} KiB |")
    if a.accuracy:
        bench_accuracy()
        bench_sim_leads()
    if a.real:
        bench_real()


if __name__ == "__main__":
    main()
