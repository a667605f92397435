"""Issue 5, part 3 on the synthetic task: the two-clock schedule against every constant batch of a
16x range, a Megatron-style linear ramp-up and a Pollux/AdaptDL goodput rule, over several seeds.

Measures per schedule and seed: rollouts, optimizer updates and modelled wall-clock (``t0 + t1 x
batch`` seconds per update) until the reward, averaged over the trailing 5% of the failure
samples, first reaches the target; and the best such reward before the task collapsed. Every
schedule sees the same random numbers per seed. Prints markdown tables (mean and 95% t-interval
over seeds; paired ratios against the constant batches) and writes JSON with ``--json``.

    python benchmarks/evidence/schedules_vs_baselines.py [--seeds 20] [--t0 40 --t1 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import fmt_ci, machine, mean_ci, measures

from rlvr_schedule.policy import BatchConstraints, PolicyConfig, TwoClockScheduler
from rlvr_schedule.policy.baselines import LinearRampSchedule, NoiseScaleAdaptiveSchedule
from rlvr_schedule.records import BatchSchedule
from rlvr_schedule.synthetic import SyntheticEnvironment
from rlvr_schedule.theory.scaling import lr_for_batch

BASE_BATCH, LR0, GROUP = 64, 1e-6, 8


@dataclass(frozen=True)
class Scenario:
    name: str
    critical_batch: float  # B* at the start (it rises (1 + drift)-fold over the climb)
    failure_samples: float
    drift: float
    batches: tuple[int, ...]  # the 16x range of constant batches
    note: str
    failure_exponent: float = 0.0  # failure samples ~ B^alpha (0: a sample clock)

    def env(self, seed: int) -> SyntheticEnvironment:
        return SyntheticEnvironment(
            critical_batch=self.critical_batch,
            failure_samples=self.failure_samples,
            drift=self.drift,
            lr0=LR0,
            base_batch=BASE_BATCH,
            seed=seed,
            failure_exponent=self.failure_exponent,
        )


SCENARIOS = {
    "drift15": Scenario(
        "drift15",
        32,
        20_000,
        15.0,
        (8, 16, 32, 64, 128),
        "B* 32 at the start, rising 16x to 512 over the climb; collapse after 20k rollouts",
    ),
    "drift3": Scenario(
        "drift3",
        256,
        50_000,
        3.0,
        (32, 64, 128, 256, 512),
        "B* 256 at the start, rising 4x to 1024; collapse after 50k rollouts",
    ),
    "static": Scenario(
        "static",
        256,
        50_000,
        0.0,
        (32, 64, 128, 256, 512),
        "B* fixed at 256 (no drift); collapse after 50k rollouts",
    ),
    "drift3-alpha": Scenario(
        "drift3-alpha",
        256,
        50_000,
        3.0,
        (32, 64, 128, 256, 512),
        "as drift3, but failure samples grow as (B/64)^0.5 (partly a step clock)",
        failure_exponent=0.5,
    ),
}


def schedules(sc: Scenario, args: argparse.Namespace) -> dict[str, Callable[[], BatchSchedule]]:
    lo, hi = sc.batches[0], sc.batches[-1]
    cons = BatchConstraints(group_size=GROUP, max_batch=hi)

    def two_clock() -> BatchSchedule:
        return TwoClockScheduler(
            PolicyConfig(
                initial_batch="auto",
                fallback_batch=lo,
                base_batch=BASE_BATCH,
                base_lr=LR0,
                constraints=cons,
                sample_tolerance=(
                    args.sample_tolerance
                    if args.critical_fraction is None
                    else PolicyConfig.tolerance_for(args.critical_fraction)
                ),
                track_step=args.track_step,
                failure_exponent=(
                    sc.failure_exponent if args.failure_exponent is None else args.failure_exponent
                ),
                growth=args.growth,
            )
        )

    def ramp() -> BatchSchedule:
        return LinearRampSchedule(
            lo,
            lo,
            int(args.ramp_fraction * sc.failure_samples),
            hi,
            base_lr=LR0,
            base_batch=BASE_BATCH,
            lr_rule="sqrt",
            constraints=cons,
        )

    def pollux(rule: str) -> Callable[[], BatchSchedule]:
        return lambda: NoiseScaleAdaptiveSchedule(
            lo,
            base_lr=lr_for_batch(lo, BASE_BATCH, LR0),
            t0=args.t0,
            t1=args.t1,
            lr_rule=rule,
            max_batch=hi,
            constraints=cons,
        )

    return {
        "two-clock": two_clock,
        f"linear ramp {lo}->{hi}": ramp,
        "noise-scale (sqrt LR)": pollux("sqrt"),
        "noise-scale (AdaScale LR)": pollux("adascale"),
    }


def run_scenario(sc: Scenario, args: argparse.Namespace) -> dict[str, Any]:
    target = args.target
    window = 0.05 * sc.failure_samples
    horizon = 1.5 * sc.failure_samples
    results: dict[str, list[dict[str, Any]]] = {}
    makers = schedules(sc, args)
    for seed in range(args.seeds):
        env = sc.env(seed)
        for b in sc.batches:
            run = env.run_constant(b, horizon)
            results.setdefault(f"constant {b}", []).append(
                measures(run, target, window, env.collapsed_at, args.t0, args.t1)
            )
        for name, make in makers.items():
            run = env.run(make(), horizon)
            m = measures(run, target, window, env.collapsed_at, args.t0, args.t1)
            m["batches"] = sorted({r.batch for r in run.records})
            m["switches"] = [(d.samples, d.batch, d.reason) for d in env.decisions if d.switched][:12]
            results.setdefault(name, []).append(m)
    return {"scenario": sc.__dict__, "target": target, "window": window, "results": results}


def _col(rows: list[dict[str, Any]], key: str) -> list[float | None]:
    return [r[key] for r in rows]


def paired_ratio(a: list[dict[str, Any]], b: list[dict[str, Any]], key: str) -> list[float | None]:
    return [None if x[key] is None or y[key] is None else x[key] / y[key] for x, y in zip(a, b, strict=True)]


def report(out: dict[str, Any], seeds: int) -> list[str]:
    sc, res = out["scenario"], out["results"]
    lines = [
        f"### {sc['name']}: {sc['note']}",
        "",
        (
            f"Target: smoothed reward {out['target']:.2f} (window {out['window']:.0f} rollouts); "
            f"{seeds} seeds; mean [95% t-interval]."
        ),
        "",
        "| schedule | rollouts to target | updates to target | modelled seconds | best reward before failure |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, rows in res.items():
        lines.append(
            f"| {name} | {fmt_ci(_col(rows, 'samples'), 0, seeds)} | {fmt_ci(_col(rows, 'steps'), 0)} | "
            f"{fmt_ci(_col(rows, 'seconds'), 0)} | {fmt_ci(_col(rows, 'best_reward'), 3)} |"
        )
    consts = {k: v for k, v in res.items() if k.startswith("constant")}
    reached = {k: v for k, v in consts.items() if all(r["samples"] is not None for r in v)}
    lines.append("")
    if not reached:
        lines.append("No constant batch reached the target in every seed.")
        return lines
    eff = min(reached, key=lambda k: mean_ci(_col(reached[k], "samples"))[0])
    best_r = max(consts, key=lambda k: mean_ci(_col(consts[k], "best_reward"))[0])
    lines += [
        (
            f"Most sample-efficient constant: **{eff}**; best reward before failure among constants: "
            f"**{best_r}**. Paired per-seed ratios (schedule / that constant), mean [95% interval]:"
        ),
        "",
        (
            f"| schedule | rollouts / {eff} | updates / {eff} | seconds / {eff} | "
            f"best reward - {best_r} | goal met (<=1.10, <=0.50, >= -interval) |"
        ),
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, rows in res.items():
        if name.startswith("constant"):
            continue
        rs = paired_ratio(rows, reached[eff], "samples")
        rt = paired_ratio(rows, reached[eff], "steps")
        rw = paired_ratio(rows, reached[eff], "seconds")
        dr = [x["best_reward"] - y["best_reward"] for x, y in zip(rows, consts[best_r], strict=True)]
        ms, mt = mean_ci(rs)[0], mean_ci(rt)[0]
        _d_m, _d_lo, d_hi, _ = mean_ci(dr)
        ok = (ms <= 1.10, mt <= 0.5, d_hi >= 0)
        verdict = (
            "yes"
            if all(ok)
            else "no ("
            + ", ".join(w for w, g in zip(("rollouts", "updates", "best reward"), ok, strict=True) if not g)
            + ")"
        )
        lines.append(
            f"| {name} | {fmt_ci(rs, 3, seeds)} | {fmt_ci(rt, 3)} | {fmt_ci(rw, 3)} | "
            f"{fmt_ci(dr, 3)} | {verdict} |"
        )
    lines.append("")
    tc = res.get("two-clock")
    if tc:
        lines += [
            "two-clock against each baseline, paired per seed (two-clock / baseline; best-reward difference):",
            "",
            (
                "| baseline | rollouts ratio | updates ratio | seconds ratio | best reward difference | "
                "two-clock better on rollouts and updates |"
            ),
            "|---|---:|---:|---:|---:|---|",
        ]
        for name, rows in res.items():
            if name == "two-clock" or name.startswith("constant"):
                continue
            rs, rt = paired_ratio(tc, rows, "samples"), paired_ratio(tc, rows, "steps")
            rw = paired_ratio(tc, rows, "seconds")
            dr = [x["best_reward"] - y["best_reward"] for x, y in zip(tc, rows, strict=True)]
            both = (mean_ci(rs)[2] < 1, mean_ci(rt)[2] < 1)
            n_rs = mean_ci(rs)[3]
            verdict = (
                "n/a (baseline missed the target)"
                if n_rs < seeds // 2
                else "yes"
                if all(both)
                else "no ("
                + ", ".join(w for w, g in zip(("rollouts", "updates"), both, strict=True) if not g)
                + ")"
            )
            lines.append(
                f"| {name} | {fmt_ci(rs, 3, seeds)} | {fmt_ci(rt, 3)} | {fmt_ci(rw, 3)} | {fmt_ci(dr, 3)} | "
                f"{verdict} |"
            )
        lines.append("")
        ex = tc[0]["switches"]
        lines.append(
            "two-clock switches, seed 0 (rollouts, batch, reason): "
            + "; ".join(f"{s} -> {b} ({r.split(':')[0][:40]})" for s, b, r in ex)
        )
        lines.append("")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--target", type=float, default=0.52, help="60%% of the climb 0.1 -> 0.8")
    ap.add_argument("--t0", type=float, default=40.0, help="seconds per update (fixed part)")
    ap.add_argument("--t1", type=float, default=1.0, help="seconds per rollout in an update")
    ap.add_argument("--ramp-fraction", type=float, default=0.5, help="ramp length / failure samples")
    ap.add_argument(
        "--critical-fraction",
        type=float,
        default=None,
        help="the operating fraction of B* (sample_tolerance f / (2 - f); default: --sample-tolerance)",
    )
    ap.add_argument("--sample-tolerance", type=float, default=0.10, help="PolicyConfig.sample_tolerance")
    ap.add_argument("--track-step", type=float, default=2.0**0.25, help="PolicyConfig.track_step")
    ap.add_argument(
        "--failure-exponent",
        type=float,
        default=None,
        help="PolicyConfig.failure_exponent (default: the task's true alpha, as a sweep's "
        "FailureScalingFit would estimate it)",
    )
    ap.add_argument("--growth", type=float, default=2.0, help="PolicyConfig.growth")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    t_start = time.perf_counter()
    print(f"# schedules vs baselines on the synthetic task; {machine()}")
    print(
        f"# cost model: {args.t0:g} + {args.t1:g} x batch seconds per update; "
        f"ramp over {args.ramp_fraction:g} x failure samples; critical_fraction {args.critical_fraction}, "
        f"sample_tolerance {args.sample_tolerance:g}, track_step {args.track_step:.3g}, failure_exponent "
        f"{'task alpha' if args.failure_exponent is None else args.failure_exponent}, "
        f"growth {args.growth:g}\n"
    )
    outs = []
    for name in args.scenarios.split(","):
        out = run_scenario(SCENARIOS[name], args)
        outs.append(out)
        print("\n".join(report(out, args.seeds)))
    print(f"# wall time {time.perf_counter() - t_start:.1f} s")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"args": {k: str(v) for k, v in vars(args).items()}, "runs": outs},
                default=lambda x: None if isinstance(x, float) and math.isnan(x) else x,
            )
        )


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
