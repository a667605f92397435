"""One price for every task: can a single setting of the hindsight frontier's rule meet the corner bar?

``bar_frontier.py`` shows that on nearly every task *some* price pair of its greedy rule reaches the
bar's corner (updates <= 0.6x, rollouts <= 1.15x the best-reward constant's). A policy ships one
setting, not one per task, so this script asks two further questions of the same rule
(:class:`bar_frontier.PricedGrid`), with the rollout price scaled by the task's starting B*
(``lam = c / B*``, so that ``c`` means the same on every task) and the failure-budget price ``mu``:

1. **Noise-free, all three criteria.** On the noise-free task (no crash hazard), over a grid of
   ``(c, mu)``, how many bar tasks does one price meet with the best reward before collapse within
   0.01 of the best-reward constant's (horizon 2F, as ``schedules_v3.py``), and how many with the
   price chosen per task in hindsight?
2. **With the task's noise, as an oracle.** The rule at the best noise-free fixed prices, run through
   ``schedules_v3.py``'s 20-seed comparison in the sweep-clock policy's place. It is handed the task's
   true model and reads the true B* at every update (``bind``): no live policy knows as much. If even
   this oracle misses the bar where the default meets it, the miss is in the bar's corner, not in
   the policy's estimates.

Results: ``results/priced_rule.{md,json}`` (the corner bar's tuning log, ``results/schedules_3a_log_until_2026-12-07.md``).

    python -m benchmarks.evidence.priced_rule --seeds 20 --json F.json --md F.md
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.evidence import bar_frontier as BF
from benchmarks.evidence import schedules_v3 as S
from rlvr_schedule.records import Decision, Stage, StepRecord
from rlvr_schedule.synthetic import SyntheticEnvironment
from rlvr_schedule.synthetic.model import ClockModel
from rlvr_schedule.synthetic.tasks import BATCHES

CS = tuple(float(x) for x in np.geomspace(1.0, 30.0, 9))
MUS = (0.0, *(float(x) for x in np.geomspace(30.0, 30000.0, 10)))
REWARD_MARGIN = 0.01
HYSTERESIS = 0.1  # the oracle moves the batch when the rule's choice differs by at least 10%


def bar_tasks() -> list[str]:
    """Every task of ``schedules_v3.py``'s sets with a bar (B* drifts; not the ``drift0`` controls)."""
    return [t for table, _ in S._TASK_SETS for t in table if not t.endswith("drift0")]


def task_set(name: str) -> str:
    """The set a task belongs to, for per-set counts ("3a", "h1-h3", ...)."""
    for n, (table, _) in enumerate(S._TASK_SETS):
        if name in table:
            return "3a" if n == 0 else f"h{3 * n - 2}-h{3 * n}"
    raise KeyError(name)


def _run_to_horizon(env: SyntheticEnvironment, target: float, pick: Any) -> tuple[float, tuple[float, float]]:
    """(reward at collapse or at 2F, (rollouts, updates) to ``target``) with ``pick(env) -> (B, lr)``."""
    env.reset()
    m = env.model
    horizon = 2.0 * m.failure_samples
    hit = (math.nan, math.nan)
    while env.samples < horizon and not env.collapsed:
        env.step(*pick(env))
        if math.isnan(hit[0]) and m.reward_after(env.gain) >= target:
            hit = (float(env.samples), float(env.step_count))
    return float(m.reward_after(env.gain)), hit


def noise_free_cells(name: str) -> dict[str, Any]:
    """Per price ``(c, mu)``: rollouts and updates to the target as ratios to the noise-free best-reward
    constant's, and the best reward before collapse minus that constant's."""
    env = BF.environment(name)
    best = {b: _run_to_horizon(env, math.inf, lambda e, b=b: (b, None))[0] for b in BATCHES}
    ref = max(best, key=best.get)
    target = 0.9 * best[ref]
    _, (ref_rollouts, ref_updates) = _run_to_horizon(env, target, lambda e: (ref, None))
    grid = BF.PricedGrid(env.model)
    bstar0 = float(env.model.critical_batch)
    cells = {}
    for mu in MUS:
        for c in CS:

            def pick(e: SyntheticEnvironment, c: float = c, mu: float = mu) -> tuple[int, float]:
                return grid.choose(BF.true_critical_batch(e), c / bstar0, mu)[:2]

            reward, (rollouts, updates) = _run_to_horizon(env, target, pick)
            cells[f"{c:.4g},{mu:.4g}"] = dict(
                c=c,
                mu=mu,
                rollouts=rollouts / ref_rollouts,
                updates=updates / ref_updates,
                best_diff=reward - best[ref],
            )
    return dict(task=name, reference=ref, cells=cells)


def meets(cell: Mapping[str, float], reward: bool = True) -> bool:
    """The bar's corner (nan never meets); with ``reward``, also the best reward within the margin."""
    corner = cell["rollouts"] <= BF.ROLLOUTS_BAR and cell["updates"] <= BF.UPDATES_BAR
    return bool(corner and (not reward or cell["best_diff"] >= -REWARD_MARGIN))


def best_fixed_prices(results: list[dict[str, Any]], reward: bool = True) -> list[tuple[int, str]]:
    """Price keys by how many tasks one price meets, most first."""
    keys = list(results[0]["cells"])
    return sorted(((sum(meets(r["cells"][k], reward) for r in results), k) for k in keys), reverse=True)


def hindsight_price(result: Mapping[str, Any]) -> str:
    """The task's own price in hindsight: among the prices that meet all three criteria noise-free, the
    one with the widest margin on updates and rollouts; failing that, the best reward among those that
    reach the corner; failing that, the fewest updates within the rollouts bar (or any)."""
    cells = result["cells"]

    def margin(k: str) -> float:
        c = cells[k]
        return min(
            (BF.ROLLOUTS_BAR - c["rollouts"]) / BF.ROLLOUTS_BAR,
            (BF.UPDATES_BAR - c["updates"]) / BF.UPDATES_BAR,
        )

    full = [k for k in cells if meets(cells[k])]
    if full:
        return max(full, key=margin)
    corner = [k for k in cells if meets(cells[k], reward=False)]
    if corner:
        return max(corner, key=lambda k: cells[k]["best_diff"])
    within = [k for k in cells if cells[k]["rollouts"] <= BF.ROLLOUTS_BAR] or list(cells)
    return min(within, key=lambda k: (math.inf if math.isnan(cells[k]["updates"]) else cells[k]["updates"]))


class OraclePricedSchedule:
    """The priced rule as a schedule that reads the task's true B* each update (diagnostics only).

    ``bind(env)`` hands it the task; it changes the batch when the rule's choice moves by at least
    ``HYSTERESIS`` of the current batch, or the LR when the rule's LR moves by more than 4%.
    """

    def __init__(self, name: str, c: float, mu: float) -> None:
        kw = S.task_kw(name)
        self.model = ClockModel(**{k: v for k, v in kw.items() if k in ClockModel.__dataclass_fields__})
        self.grid = BF.PricedGrid(self.model)
        self.lam, self.mu = c / float(self.model.critical_batch), mu
        batch, lr, _ = self.grid.choose(float(self.model.critical_batch), self.lam, self.mu)
        self._stages = [Stage(batch, lr)]
        self.env: SyntheticEnvironment | None = None

    def bind(self, env: SyntheticEnvironment) -> None:
        self.env = env

    @property
    def current(self) -> Stage:
        return self._stages[-1]

    @property
    def stages(self) -> list[Stage]:
        return list(self._stages)

    def step(self, record: StepRecord) -> Decision:
        if self.env is None:
            raise RuntimeError("OraclePricedSchedule reads the task's state: call bind(env) before the run")
        batch, lr, _ = self.grid.choose(BF.true_critical_batch(self.env), self.lam, self.mu)
        cur = self.current
        switched = abs(batch - cur.batch) >= HYSTERESIS * cur.batch or abs(lr / cur.lr - 1.0) > 0.04
        if switched:
            self._stages.append(Stage(batch, lr, "priced rule (oracle)", int(self.env.samples)))
        now = self.current
        reason = "priced rule (oracle)" if switched else ""
        return Decision(
            record.step, int(self.env.samples), now.batch, now.lr, len(self._stages) - 1, switched, reason
        )

    def state_dict(self) -> dict[str, Any]:
        return {"stages": [s.to_dict() for s in self._stages]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._stages = [Stage(**s) for s in state["stages"]]


Price = tuple[float, float] | Mapping[str, tuple[float, float]] | None


def noisy(tasks: list[str], seeds: int, price: Price) -> list[dict[str, Any]]:
    """``schedules_v3.py``'s lean comparison with the oracle at ``price`` (one pair, or one per task;
    None: the default policy)."""
    S.LEAN = True
    if price is None:
        S.POLICY_MAKER = None
    elif isinstance(price, Mapping):
        S.POLICY_MAKER = lambda name, clock: OraclePricedSchedule(name, *price[name])
    else:
        S.POLICY_MAKER = lambda name, clock: OraclePricedSchedule(name, *price)
    try:
        out = []
        for name in tasks:
            res = S.summarise(name, *S.run_task(name, seeds))
            cell = dict(
                task=name,
                best_lower=res["best_vs_best_constant"][1],
                updates=res["updates_vs_best"],
                rollouts=res["rollouts_vs_best"],
            )
            cell["ok"] = bool(
                cell["best_lower"] >= -REWARD_MARGIN
                and cell["updates"] is not None
                and cell["updates"] <= BF.UPDATES_BAR
                and cell["rollouts"] is not None
                and cell["rollouts"] <= BF.ROLLOUTS_BAR
            )
            out.append(cell)
        return out
    finally:
        S.POLICY_MAKER = None


def _per_set(tasks: list[str], ok: list[bool]) -> str:
    sets: dict[str, list[bool]] = {}
    for t, o in zip(tasks, ok, strict=True):
        sets.setdefault(task_set(t), []).append(o)
    return ", ".join(f"{k} {sum(v)}/{len(v)}" for k, v in sets.items())


def _short(name: str) -> str:
    return name if name.startswith("c") else name.split("_")[0]


def markdown(free: list[dict[str, Any]], rows: list[dict[str, Any]]) -> str:
    tasks = [r["task"] for r in free]
    n = len(tasks)
    with_r, without = best_fixed_prices(free), best_fixed_prices(free, reward=False)
    hind = [any(meets(c) for c in r["cells"].values()) for r in free]
    lines = [
        "# One price for every task: the priced rule against the corner bar",
        "",
        "    python -m benchmarks.evidence.priced_rule --seeds 20 --json F.json --md F.md",
        "",
        f"## Noise-free, hindsight ({len(CS)} x {len(MUS)} prices; rollout price c / B* at the start)",
        "",
        f"Bar: updates <= {BF.UPDATES_BAR}x and rollouts <= {BF.ROLLOUTS_BAR}x the noise-free best-reward",
        f"constant's, best reward before collapse >= its own - {REWARD_MARGIN}.",
        "",
        "| price chosen | tasks met | per set |",
        "|---|---|---|",
    ]
    for label, key_list, rew in (
        ("best single price, all three criteria", with_r, True),
        ("best single price, updates and rollouts only", without, False),
    ):
        cnt, key = key_list[0]
        ok = [meets(r["cells"][key], rew) for r in free]
        lines.append(f"| {label}: c, mu = {key} | {cnt}/{n} | {_per_set(tasks, ok)} |")
    lines.append(f"| per task, in hindsight (all three) | {sum(hind)}/{n} | {_per_set(tasks, hind)} |")
    key = with_r[0][1]
    lines += [
        "",
        f"Cells at c, mu = {key} (rollouts; updates; best reward minus the reference's):",
        "",
        "| " + " | ".join(_short(t) for t in tasks) + " |",
        "|" + "---|" * n,
        "| "
        + " | ".join(
            f"{c['rollouts']:.2f}; {c['updates']:.2f}; {c['best_diff']:+.3f}"
            + (" **ok**" if meets(c) else "")
            for c in (r["cells"][key] for r in free)
        )
        + " |",
    ]
    if rows:
        lines += [
            "",
            "## With the task's noise: the oracle in the policy's place (20 seeds, schedules_v3.py's bar)",
            "",
            "Cells: lower 95% bound of the paired best-reward difference; updates; rollouts, against the",
            "20-seed best-reward constant (as in the tuning log). The oracle knows the task's true model and B*.",
            "",
            "| schedule | tasks met | per set | " + " | ".join(_short(t) for t in tasks) + " |",
            "|---|---|---|" + "---|" * n,
        ]
        for row in rows:
            cells = row["cells"]
            ok = [c["ok"] for c in cells]
            fmt = [
                "{:+.3f}; {}; {}".format(
                    c["best_lower"],
                    "-" if c["updates"] is None else f"{c['updates']:.2f}",
                    "-" if c["rollouts"] is None else f"{c['rollouts']:.2f}",
                )
                + (" **ok**" if c["ok"] else "")
                for c in cells
            ]
            lines.append(
                f"| {row['label']} | {sum(ok)}/{n} | {_per_set(tasks, ok)} | " + " | ".join(fmt) + " |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default=None, help="comma-separated tasks (default: every bar task)")
    ap.add_argument("--seeds", type=int, default=20, help="seeds of the noisy comparison (0: skip it)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    args = ap.parse_args(argv)
    tasks = args.tasks.split(",") if args.tasks else bar_tasks()
    t0 = time.perf_counter()
    free = [noise_free_cells(t) for t in tasks]
    print(f"noise-free grid: {time.perf_counter() - t0:.0f} s", flush=True)
    rows = []
    if args.seeds > 0:
        prices = dict.fromkeys([best_fixed_prices(free)[0][1], best_fixed_prices(free, reward=False)[0][1]])
        own = {
            r["task"]: (r["cells"][k]["c"], r["cells"][k]["mu"]) for r in free for k in [hindsight_price(r)]
        }
        runs: list[tuple[str, Price]] = [("default policy (sweep clock)", None)]
        runs += [
            (f"oracle priced rule, c, mu = {k}", (free[0]["cells"][k]["c"], free[0]["cells"][k]["mu"]))
            for k in prices
        ]
        runs.append(("oracle priced rule, each task's own noise-free price", own))
        for label, price in runs:
            t0 = time.perf_counter()
            kept = dict(price) if isinstance(price, Mapping) else price
            rows.append(dict(label=label, price=kept, cells=noisy(tasks, args.seeds, price)))
            print(
                f"{label}: {sum(c['ok'] for c in rows[-1]['cells'])}/{len(tasks)} "
                f"({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(dict(noise_free=free, noisy=rows), indent=1, default=float) + "\n")
    md = markdown(free, rows)
    if args.md:
        args.md.write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
