"""How far the live B* estimate trails the true B* on the synthetic tasks, and what the trailing costs.

The policy's B* tracker (:class:`~rlvr_schedule.policy.tracker.CriticalBatchTracker`) scales the
known B* by B_simple's ratio to its value at rollout 0; B_simple is an EMA over about 100 updates
(beta 0.99), so on a task whose B* rises (drift) the estimate reads an earlier B*. Two measures, on
the policy told the price (``schedules_v3.py``'s ``two-clock (sweep clock) rho=...`` run, same tasks,
seeds, sweep clock and horizon 2F):

1. **The lag.** At every update before failure, the estimate (in the square-root rule's frame, where
   the simulator's true B* is ``critical_batch x (1 + drift x progress)``) against the truth: their
   ratio, and where the estimate is below the truth, how many rollouts and updates back the true B*
   last had the estimated value (0 where the estimate is at or above it).
2. **Its cost.** The same policy with an oracle tracker that reads the task's true B* at every update
   (from the first update on), run through ``schedules_v3.py``'s priced bar in the default policy's
   place: its cost ratio against c*(rho) beside the live policy's, on the same seeds.

    python -m benchmarks.evidence.tracker_lag --seeds 20 --prices 4,16,64 \
        --tasks c2_drift3,c2_drift15,c5_drift3,c5_drift15,h1_b48_f14k_drift5,... --json F.json --md F.md
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any, cast

import numpy as np

from benchmarks.evidence import schedules_v3 as S
from rlvr_schedule.policy import TwoClockScheduler
from rlvr_schedule.policy.tracker import CriticalBatchTracker
from rlvr_schedule.synthetic import SyntheticEnvironment


def true_critical_batch(env: SyntheticEnvironment) -> float:
    """The task's B* now, at the square-root rule's LR (the tracker's frame before its LR scale)."""
    return env.model.critical_batch_at(1.0, env.progress)


def lag_run(env: SyntheticEnvironment, sched: TwoClockScheduler, horizon: float) -> dict[str, Any]:
    """Drive ``sched`` on ``env`` to ``horizon`` rollouts (as ``SyntheticEnvironment.run``) and
    compare the tracker's estimate with the true B* at every update before failure."""
    env.reset()
    stage = sched.current
    batch, lr = int(stage.batch), float(stage.lr)
    samples, steps, truth, est = [], [], [], []
    while env.samples < horizon:
        rec = env.step(batch, lr)
        d = sched.step(rec)
        batch, lr = int(d.batch), float(d.lr)
        if env.collapsed:
            continue
        e = sched.tracker.critical_estimate(None, 1.0)  # the rule's frame: no LR scale
        samples.append(float(env.samples))
        steps.append(float(env.step_count))
        truth.append(true_critical_batch(env))
        est.append(e)
    s, u, t, e = (np.array(x) for x in (samples, steps, truth, est))
    ok = np.isfinite(e)
    lag_s = np.full(e.shape, np.nan)
    lag_u = np.full(e.shape, np.nan)
    for i in np.flatnonzero(ok):
        if e[i] >= t[i]:
            lag_s[i] = lag_u[i] = 0.0
            continue
        # the last update at or before i whose true B* was at most the estimate (truth rises); none
        # where the estimate is below even the first update's B*: a level error, not a lag (NaN)
        j = int(np.searchsorted(t[: i + 1], e[i], side="right")) - 1
        if j >= 0:
            lag_s[i], lag_u[i] = s[i] - s[j], u[i] - u[j]
    return dict(
        warm_at=float(s[ok][0]) if ok.any() else None,
        ratio=e[ok] / t[ok],
        below_start=e[ok] < t[0] if t.size else np.zeros(0, bool),
        lag_rollouts=lag_s[ok],
        lag_updates=lag_u[ok],
    )


def measure_lag(name: str, seeds: int, rho: float, clock: dict[str, Any]) -> dict[str, Any]:
    kw = S.task_kw(name)
    F = float(kw["failure_samples"])
    ratio, lag_s, lag_u, warm, below = [], [], [], [], []
    for seed in S.task_seeds(name, seeds):
        env = SyntheticEnvironment(seed=seed, **kw)
        sched = cast(TwoClockScheduler, S.makers(name, clock)[S.priced(rho)]())
        r = lag_run(env, sched, max(S.BUDGETS) * F)
        ratio.append(r["ratio"])
        lag_s.append(r["lag_rollouts"])
        lag_u.append(r["lag_updates"])
        below.append(r["below_start"])
        if r["warm_at"] is not None:
            warm.append(r["warm_at"])
    ra, ls, lu, bs = (np.concatenate(x) if x else np.array([]) for x in (ratio, lag_s, lag_u, below))
    trailing = ra < 1.0

    def q(x: np.ndarray, p: float) -> float | None:
        x = x[np.isfinite(x)]
        return float(np.percentile(x, p)) if x.size else None

    return dict(
        task=name,
        rho=rho,
        failure_samples=F,
        drift=float(kw.get("drift", 0.0)),
        updates_seen=int(ra.size),
        warm_at_median=float(np.median(warm)) if warm else None,
        ratio_median=q(ra, 50),
        ratio_p10=q(ra, 10),
        trailing_share=float(trailing.mean()) if ra.size else None,
        below_start_share=float(bs.mean()) if bs.size else None,
        lag_rollouts_median=q(ls, 50),
        lag_rollouts_p90=q(ls, 90),
        lag_updates_median=q(lu, 50),
        lag_updates_p90=q(lu, 90),
        lag_over_F_median=None if q(ls, 50) is None else float(q(ls, 50) or 0.0) / F,
    )


class OracleTracker(CriticalBatchTracker):
    """The tracker replaced by the truth: the task's B* now at the rule's LR, divided by the stage's
    LR scale as the live tracker does (diagnostics only; ``env`` set before the run)."""

    env: SyntheticEnvironment | None = None

    def estimate(self, b_simple: float, scale: float) -> float:
        return self.critical_estimate(b_simple, scale)

    def critical_estimate(self, b_simple: float | None = None, scale: float = 1.0) -> float:
        if self.env is None:
            return math.nan
        return true_critical_batch(self.env) / scale


class _OracleTracked:
    """A maker for ``schedules_v3.POLICY_MAKER``: the priced policy with :class:`OracleTracker`."""

    def __init__(self, rho: float) -> None:
        self.rho = rho

    def __call__(self, name: str, clock: dict[str, Any]) -> Any:
        sched = cast(TwoClockScheduler, S.makers(name, clock)[S.priced(self.rho)]())
        oracle = OracleTracker(sched.config.estimate_samples, sched.tracker.known)

        def bind(env: SyntheticEnvironment) -> None:
            oracle.env = env

        sched.tracker = oracle
        setattr(sched, "bind", bind)  # noqa: B010  # run_task hands each seed's task here
        return sched


def oracle_cost(name: str, seeds: int, rho: float) -> dict[str, Any]:
    """The priced bar at ``rho`` with the oracle-tracked policy in the default policy's place."""
    S.LEAN, S.PRICES, S.POLICY_MAKER = True, (rho,), _OracleTracked(rho)
    try:
        res = S.summarise(name, *S.run_task(name, seeds))
    finally:
        S.POLICY_MAKER, S.PRICES = None, ()
    p = res["priced"][f"{rho:g}"]
    return dict(
        task=name,
        rho=rho,
        cstar=p["cstar"],
        live_cost_ratio=p["cost_ratio"],
        oracle_cost_ratio=p["default_cost_ratio"],
        live_passed=p["passed"],
    )


def markdown(lags: list[dict[str, Any]], costs: list[dict[str, Any]], seeds: int, argv: list[str]) -> str:
    lines = [
        "# The B* tracker's lag on the synthetic tasks",
        "",
        "    python -m benchmarks.evidence.tracker_lag " + " ".join(argv),
        "",
        f"{seeds} seeds per task (each task's committed seeds), the priced policy as in the priced bar "
        "(`schedules_v3.py --lean --prices`), horizon 2F, updates before failure only. Estimate: the "
        "tracker's B* in the square-root rule's frame; truth: the simulator's B* at the task's progress. "
        "Lag: rollouts (updates) since the true B* had the estimated value, 0 where the estimate is at or "
        "above the truth, undefined where it is below even the B* at the start (their share is its own "
        "column: a level error, no lag); pooled over updates and seeds.",
        "",
        "| task | drift | rho | estimate warm at (median rollouts) | estimate / true B*: median (p10) | "
        "share of updates trailing | share below the starting B* | lag, rollouts: median (p90) | "
        "lag / F (median) | lag, updates: median (p90) |",
        "|---" * 10 + "|",
    ]

    def f(x: float | None, fmt: str = ",.0f") -> str:
        return "-" if x is None else format(x, fmt)

    for r in lags:
        lines.append(
            f"| {r['task']} | {r['drift']:g} | {r['rho']:g} | {f(r['warm_at_median'])} | "
            f"{f(r['ratio_median'], '.2f')} ({f(r['ratio_p10'], '.2f')}) | {f(r['trailing_share'], '.2f')} | "
            f"{f(r.get('below_start_share'), '.2f')} | "
            f"{f(r['lag_rollouts_median'])} ({f(r['lag_rollouts_p90'])}) | {f(r['lag_over_F_median'], '.2f')} | "
            f"{f(r['lag_updates_median'])} ({f(r['lag_updates_p90'])}) |"
        )
    if costs:
        lines += [
            "",
            "## What the lag costs: the same policy reading the true B* (oracle tracker)",
            "",
            "Cost ratio against c*(rho) (rollouts + rho x updates to the target, mean over the seeds, a seed "
            "that never reaches it charged its whole run), same seeds and sweep clock.",
            "",
            "| task | rho | c*(rho) | live tracker | oracle tracker | oracle - live |",
            "|---|---|---|---|---|---|",
        ]
        for c in costs:
            lines.append(
                f"| {c['task']} | {c['rho']:g} | {c['cstar'].split(' x')[0]} | {c['live_cost_ratio']:.3f} | "
                f"{c['oracle_cost_ratio']:.3f} | {c['oracle_cost_ratio'] - c['live_cost_ratio']:+.3f} |"
            )
        d = np.array([c["oracle_cost_ratio"] - c["live_cost_ratio"] for c in costs])
        lines += [
            "",
            f"Oracle minus live, over {len(costs)} task-price cells: median {np.median(d):+.3f}, "
            f"range {d.min():+.3f} to {d.max():+.3f}; the oracle is cheaper on {int((d < 0).sum())}.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--prices", default="4,16,64")
    ap.add_argument("--tasks", default="c2_drift3,c2_drift15,c5_drift3,c5_drift15")
    ap.add_argument("--no-cost", action="store_true", help="the lag only (no oracle bar run)")
    ap.add_argument(
        "--costs-from", default=None, help="a JSON this script wrote: its oracle costs, not rerun"
    )
    ap.add_argument("--json", default=None)
    ap.add_argument("--md", default=None)
    args = ap.parse_args(argv)
    prices = [float(x) for x in args.prices.split(",") if x.strip()]
    lags, costs = [], []
    for name in args.tasks.split(","):
        t0 = time.perf_counter()
        clock = S.sweep_clock(name)
        S.PRICES = tuple(prices)
        try:
            for rho in prices:
                lags.append(measure_lag(name, args.seeds, rho, clock))
        finally:
            S.PRICES = ()
        if not args.no_cost and not args.costs_from:
            for rho in prices:
                costs.append(oracle_cost(name, args.seeds, rho))
        print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    if args.costs_from:
        with open(args.costs_from, encoding="utf-8") as fh:
            costs = json.load(fh)["costs"]
    md = markdown(lags, costs, args.seeds, argv)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(dict(seeds=args.seeds, lags=lags, costs=costs), fh, indent=1, default=float)
    if args.md:
        with open(args.md, "w", encoding="utf-8") as fh:
            fh.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
