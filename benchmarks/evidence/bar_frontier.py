"""Hindsight frontier for the fixed-fraction schedule bar: can ANY schedule meet it on a synthetic task?

The bar asks a schedule for at most 0.6x the updates and 1.15x the rollouts to the target that the
best-reward constant needs. This script asks whether that corner is reachable at all on a task, by a
schedule that knows the task's true clocks (it is not a policy and reads no logs).

On the noise-free task (``noise=0``, no crash hazard: the progress clock and the entropy budget are
then deterministic) it runs, for each pair of prices ``(lam, mu)``, the schedule that at every
update picks the batch ``B`` (8-1024, steps of 8) and the LR ratio ``r`` to the square-root rule
(0.25-1: the rule or below it, as a held LR gives) minimising

    (1 + lam * B + mu * B / failure_at(B, r)) / gain(B, r)

the updates, rollouts and entropy budget spent per unit of reward gain at the current progress
(the B* drift) and entropy (the damping). Sweeping the two prices traces the hindsight frontier of
updates against rollouts to the target; the greedy choice with a price on each resource is how such
a frontier is reached when the state changes slowly (one step's choice changes the next step's
options only through the gain and the budget, both priced). The target and the reference are the
noise-free versions of ``schedules_v3.py``'s: 0.9 x the best reward before collapse among the
constants 16-256 at the square-root LR, and that constant's updates and rollouts to the target.

A point with updates <= 0.6x and rollouts <= 1.15x shows that a schedule with the task's clocks known
meets the bar on the noise-free task. None such is weaker evidence: the greedy priced family is not
proven optimal, so "not reachable" reads "not reached by this family" (a live policy, which must
measure what this one is given, does no better in practice). The reference here is the noise-free
best-reward constant, which can differ from the 20-seed one that the bar uses. Results: ``results/bar_frontier.{md,json}`` (docs/RESULTS.md 3a).

    python -m benchmarks.evidence.bar_frontier --tasks c2_drift3,h3_b64_f20k_drift10_alpha
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.evidence import schedules_v3 as S
from rlvr_schedule.synthetic import SyntheticEnvironment
from rlvr_schedule.synthetic.tasks import BATCHES

UPDATES_BAR, ROLLOUTS_BAR = 0.6, 1.15
CAND_B = np.arange(8, 1025, 8, dtype=float)
CAND_R = np.round(np.arange(0.25, 1.0001, 0.05), 4)  # the sqrt rule or below (a held LR)
LAMS = (0.0, *np.geomspace(1e-4, 3.0, 28))
MUS = (0.0, *np.geomspace(1.0, 3000.0, 9))


def environment(name: str) -> SyntheticEnvironment:
    """The task without measurement noise or crash hazard (the deterministic clocks)."""
    return SyntheticEnvironment(**dict(S.task_kw(name), crash_hazard=0.0), noise=0.0, seed=0)


def constant_to_target(
    env: SyntheticEnvironment, batch: int, target: float | None
) -> tuple[float, float, float]:
    """(best reward before collapse, rollouts, updates to ``target``) for a constant at the sqrt rule."""
    env.reset()
    m = env.model
    hit: tuple[float, float] = (math.nan, math.nan)
    while not env.collapsed:
        env.step(batch)
        if target is not None and math.isnan(hit[0]) and m.reward_after(env.gain) >= target:
            hit = (float(env.samples), float(env.step_count))
        if env.samples > 20 * m.failure_samples:
            break
    return float(m.reward_after(env.gain)), *hit  # the gain stops at the collapse


class PricedGrid:
    """The greedy priced choice on a task whose clocks are known (``model``: its ClockModel).

    Holds the candidate batches x LR ratios, their LRs and their entropy-budget spans; :meth:`choose`
    returns the pair minimising ``(1 + lam * B + mu * B / span) / gain`` at the current B*. The one
    rule behind this script's frontier and ``priced_rule.py``'s fixed-price and oracle checks.
    """

    def __init__(self, model: Any, lr_ratios: Any = CAND_R) -> None:
        m = self.model = model
        k1, k2, k3 = (float(x) for x in m.failure_rates)
        self.B, self.R = np.meshgrid(CAND_B, np.asarray(lr_ratios, dtype=float), indexing="ij")
        self.lr = self.R * np.array([m.sqrt_lr(b) for b in CAND_B])[:, None]
        rate = (k1 * self.R + k2 * self.R**2 + k3 * self.R**2 * self.B) / (k1 + k2 + k3 * m.base_batch)
        self.span = m.failure_samples * (self.B / m.base_batch) ** m.failure_exponent / rate

    def choose(self, bstar: float, lam: float, mu: float) -> tuple[int, float, float]:
        """(batch, its LR, the LR's ratio to the square-root rule) for the next update."""
        m, B, R = self.model, self.B, self.R
        q = m.noise_fraction
        a = m.p0 / (1.0 - q)
        # ClockModel.progress_rate x B over the grid; the entropy damping, one factor for every
        # candidate, leaves the argmin alone and is left out
        gain = (a * R - q * a * R * R - m.p0 / (2.0 * bstar) * R * R * B) * B
        pos = gain > 0
        cost = np.where(pos, (1.0 + lam * B + mu * B / self.span) / np.where(pos, gain, 1.0), np.inf)
        i, j = np.unravel_index(int(np.argmin(cost)), cost.shape)
        return int(B[i, j]), float(self.lr[i, j]), float(R[i, j])


def true_critical_batch(env: SyntheticEnvironment) -> float:
    """The task's B* at its current progress (at the square-root rule), as the drift moves it."""
    return env.model.critical_batch_at(1.0, env.progress)


def priced_run(
    env: SyntheticEnvironment, lam: float, mu: float, target: float
) -> tuple[float, float, tuple[int, float]]:
    """Rollouts and updates to ``target`` of the greedy schedule at prices ``(lam, mu)`` (nan: collapse
    first), and its start: the first batch and its LR ratio to the square-root rule."""
    env.reset()
    m = env.model
    grid = PricedGrid(m)
    start = (0, math.nan)
    while m.reward_after(env.gain) < target:
        if env.collapsed or env.step_count > 200_000:
            return math.nan, math.nan, start
        batch, lr, ratio = grid.choose(true_critical_batch(env), lam, mu)
        if env.step_count == 0:
            start = (batch, ratio)
        env.step(batch, lr)
    return float(env.samples), float(env.step_count), start


def frontier(name: str) -> dict[str, Any]:
    env = environment(name)
    consts = {b: constant_to_target(env, b, None)[0] for b in BATCHES}
    ref = max(consts, key=consts.get)
    target = 0.9 * consts[ref]
    _, ref_rollouts, ref_updates = constant_to_target(env, ref, target)
    table = {b: constant_to_target(env, b, target)[1:] for b in BATCHES}
    points = []
    for mu in MUS:
        for lam in LAMS:
            rollouts, updates, start = priced_run(env, lam, mu, target)
            if not math.isnan(rollouts):
                points.append(
                    dict(
                        lam=lam,
                        mu=mu,
                        rollouts=rollouts / ref_rollouts,
                        updates=updates / ref_updates,
                        start_batch=start[0],
                        start_lr_ratio=start[1],
                    )
                )
    # keep the frontier itself: the points no other point beats on both updates and rollouts
    points = [
        p
        for p in points
        if not any(
            q["updates"] <= p["updates"]
            and q["rollouts"] <= p["rollouts"]
            and (q["updates"], q["rollouts"]) != (p["updates"], p["rollouts"])
            for q in points
        )
    ]
    ok = [p for p in points if p["rollouts"] <= ROLLOUTS_BAR]
    best = min(ok, key=lambda p: p["updates"]) if ok else None
    return dict(
        task=name,
        reference=ref,
        target=target,
        constants={str(b): dict(best=consts[b], rollouts=table[b][0], updates=table[b][1]) for b in BATCHES},
        reference_rollouts=ref_rollouts,
        reference_updates=ref_updates,
        min_updates_within_rollouts_bar=None if best is None else best["updates"],
        at=best,
        feasible=best is not None and best["updates"] <= UPDATES_BAR,
        points=points,
    )


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "# Hindsight frontier of the fixed-fraction bar (noise-free tasks, no crash hazard)",
        "",
        "Per task: B* at the start; the best-reward constant of 16-256 at the square-root LR on the noise-free",
        "task (the reference) and its ratio to B*; the fewest updates to the target (as a ratio to the",
        f"reference's) of any priced schedule whose rollouts stay within {ROLLOUTS_BAR}x the reference's, and",
        f"whether that meets the bar's {UPDATES_BAR}x (no: not reached by this family of schedules).",
        "",
        "    python -m benchmarks.evidence.bar_frontier --tasks TASK,... --json F.json --md F.md",
        "",
        "| task | B* at start | reference constant | reference / B* | min updates ratio (rollouts <= 1.15x) "
        "| its rollouts ratio | its start: batch, LR / rule | bar reached in hindsight |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        kw = S.task_kw(r["task"])
        at = r["at"]
        lines.append(
            f"| {r['task']} | {kw['critical_batch']:g} | {r['reference']} | "
            f"{r['reference'] / kw['critical_batch']:.2f} | "
            + ("-" if at is None else f"{at['updates']:.2f}")
            + " | "
            + ("-" if at is None else f"{at['rollouts']:.2f}")
            + " | "
            + ("-" if at is None else f"{at['start_batch']}, {at['start_lr_ratio']:.2f}")
            + f" | {'yes' if r['feasible'] else '**no**'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", required=True, help="comma-separated task names (schedules_v3.py's)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    args = ap.parse_args(argv)
    results = []
    for name in args.tasks.split(","):
        t0 = time.perf_counter()
        results.append(frontier(name))
        r = results[-1]
        print(
            f"{name}: reference {r['reference']}, min updates ratio within rollouts bar "
            f"{r['min_updates_within_rollouts_bar']}, feasible {r['feasible']} ({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    md = markdown(results)
    if args.md:
        args.md.write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
