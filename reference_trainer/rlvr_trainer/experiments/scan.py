"""The LR scan: is the task in the theory's regime (progress per rollout rising with the LR), and
does the failure clock show there? Constant runs at one batch over a range of base LRs and seeds,
then a criterion over their fitted rates and failures (``rlvr-trainer evidence --scan``).

The runs share :func:`~rlvr_trainer.experiments.runs.evidence`'s layout
(``out/lr<base LR>/sweep/b<batch>-s<seed>``), so a later evidence run at these LRs reuses them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlvr_schedule.errors import ConfigError
from rlvr_trainer.config import TrainConfig
from rlvr_trainer.experiments.rundirs import read_run
from rlvr_trainer.experiments.runs import run_chunk
from rlvr_trainer.experiments.tables import interval, jsonable, num, span

__all__ = ["SCAN_LRS", "SCAN_DESIGNS", "scan_design", "lr_scan", "scan_report"]


#: The LR scan's base LRs (at ``base_batch``; the plan in benchmarks/evidence/LR_SCAN_PLAN.md):
#: six LRs over a 16x range in steps of x1.74, around the demo's 1e-4..4e-4.
SCAN_LRS: tuple[float, ...] = (5e-5, 8.7e-5, 1.5e-4, 2.6e-4, 4.6e-4, 8e-4)

#: The scan designs of benchmarks/evidence/LR_SCAN_PLAN.md, by name (``evidence --scan NAME``):
#: base LRs and the task's changes against ``--preset tiny`` (TrainConfig fields). "v1": the
#: 2026-12-04 15:45 UTC scan (the demo's task). "v2" (planned 18:47 UTC the same day, after v1
#: missed the criterion): the fixed ~800-rollout part of v1's rollouts-to-target made smaller
#: against the LR-driven part -- warm-up 512 -> 64 rollouts and all five arithmetic levels
#: (a farther climb) -- and LR steps of x2 over 32x, so that a rate rising in proportion to the
#: LR separates from its neighbours at v1's seed spread.
SCAN_DESIGNS: dict[str, dict[str, Any]] = {
    "v1": {"lrs": SCAN_LRS, "task": {}},
    "v2": {
        "lrs": (2.5e-5, 5e-5, 1e-4, 2e-4, 4e-4, 8e-4),
        "task": {"warmup_samples": 64, "task_max_level": None},
    },
}


def scan_design(cfg: TrainConfig, name: str = "v1") -> tuple[TrainConfig, tuple[float, ...]]:
    """(config with the design's task changes, base LRs) of the scan design ``name``."""
    if name not in SCAN_DESIGNS:
        raise ConfigError(
            f"unknown scan design {name!r} (choose from {', '.join(SCAN_DESIGNS)})", field="scan"
        )
    d = SCAN_DESIGNS[name]
    return cfg.replace(**d["task"]), tuple(float(x) for x in d["lrs"])


def lr_scan(
    cfg: TrainConfig,
    out: str | Path,
    *,
    lrs: Sequence[float] = SCAN_LRS,
    seeds: Sequence[int] = (0, 1, 2),
    batch: int = 8,
    chunk_minutes: float = 45.0,
    progress: bool = True,
) -> Path | None:
    """Is the task in the theory's regime (drift per rollout growing with the LR), and does the
    failure clock show there? Constant-``batch`` runs at every base LR of ``lrs`` x ``seeds`` on
    ``cfg``'s budget, resumable in chunks like :func:`evidence` (same layout, so a later
    :func:`evidence` at these LRs reuses them), then :func:`scan_report`. Returns its markdown
    path, or None when the chunk ran out first (call again to continue)."""
    import time

    out = Path(out)
    todo = [(float(lr), seed, batch) for seed in seeds for lr in lrs]  # seed-major: whole seeds first
    if not run_chunk(cfg, out, todo, time.monotonic(), chunk_minutes, progress, "lr scan")[0]:
        return None
    return scan_report(out, lrs=lrs, seeds=seeds, batch=batch)


def scan_report(
    out: str | Path,
    *,
    lrs: Sequence[float] = SCAN_LRS,
    seeds: Sequence[int] = (0, 1, 2),
    batch: int = 8,
    min_regime: int = 3,
    min_failures: int = 2,
) -> Path:
    """(Re)write ``out/scan.md`` and ``out/scan.json`` from the scan's logs (no training; runs
    not there yet are left out and counted).

    One ``fit_sweep`` over every run, so all rates refer to the same reward levels. Per base LR:
    the seeds' mean rate with a 95% t-interval over seeds, failures. The plan's criterion: an LR
    is *in the regime* when it lies in a stretch of ``min_regime`` or more consecutive LRs over
    which each LR's interval lies wholly above the previous one's; the failure clock *shows* at
    an LR when ``min_failures`` of its runs fail within the budget."""
    from rlvr_schedule.clocks import fit_sweep

    out = Path(out)
    lrs = [float(x) for x in lrs]
    runs, keys = [], []
    for lr in lrs:
        for s in seeds:
            d = out / f"lr{lr:g}" / "sweep" / f"b{batch}-s{s}"
            if (d / "metrics.jsonl").exists():
                runs.append(read_run(d, f"lr{lr:g} b{batch}-s{s}"))
                keys.append((lr, s))
    if not runs:
        raise ConfigError(f"no scan run under {out}", field="out")
    fit = fit_sweep(runs)
    rows = [_scan_row(lr, fit, runs, keys) for lr in lrs]
    verdict = _verdict(rows, lrs, min_regime=min_regime, min_failures=min_failures)
    summary = {"batch": batch, "seeds": list(seeds), "rows": rows, "verdict": verdict, "fit": fit.to_dict()}
    (out / "scan.json").write_text(json.dumps(jsonable(summary), indent=2))
    head = (
        f"LR scan at batch {batch}, seeds {', '.join(map(str, seeds))}, {len(runs)} of "
        f"{len(lrs) * len(seeds)} runs; one fit_sweep over all of them: target reward "
        f"{fit.target:.3f} (initial {fit.initial_reward:.3f})."
    )
    path = out / "scan.md"
    path.write_text(_scan_markdown(head, rows, verdict, min_regime=min_regime, min_failures=min_failures))
    return path


def _scan_row(lr: float, fit: Any, runs: Sequence[Any], keys: Sequence[tuple[float, int]]) -> dict[str, Any]:
    """One base LR's row: the seeds' mean rate [95% t over seeds], per-seed rates, rewards, failures."""
    import numpy as np

    from rlvr_schedule.clocks._stats import t_quantile

    idx = [i for i, k in enumerate(keys) if k[0] == lr]
    rates = np.array([fit.runs[i].rate for i in idx], float)
    rates = np.where(np.isfinite(rates), rates, 0.0)  # crossed no level: no progress to target
    n = rates.size
    mean = float(rates.mean()) if n else math.nan
    hw = float(t_quantile(0.975, n - 1) * rates.std(ddof=1) / math.sqrt(n)) if n >= 2 else math.nan
    fails = [(fit.runs[i].failure_samples, fit.runs[i].failure_signal) for i in idx]
    finals, peaks = [], []
    for i in idx:
        rew = runs[i].array("reward_mean")
        finals.append(float(np.nanmean(rew[-max(1, len(rew) // 10) :])))
        w = max(1, len(rew) // 10)
        peaks.append(float(np.nanmax(np.convolve(rew, np.ones(w) / w, mode="valid"))))
    return {
        "base_lr": lr,
        "lr_at_batch": runs[idx[0]].lr if idx else None,
        "runs": n,
        "seeds": [keys[i][1] for i in idx],
        "rate_mean": mean,
        "rate_interval": [mean - hw, mean + hw],
        "rates": [fit.runs[i].rate for i in idx],
        "rate_intervals": [list(fit.runs[i].rate_interval) for i in idx],
        "reached_target": sum(bool(fit.runs[i].reached_target) for i in idx),
        "final_reward": finals,
        "peak_reward": peaks,
        "failures": sum(f is not None for f, _ in fails),
        "failure_samples": [f for f, _ in fails],
        "failure_signals": [g for f, g in fails if f is not None],
    }


def _verdict(
    rows: Sequence[dict[str, Any]], lrs: Sequence[float], *, min_regime: int, min_failures: int
) -> dict[str, Any]:
    """The criterion over the rows: the LRs in the regime (strict and weak readings), those where
    the failure clock shows, and the first LR with both (the chosen base LR)."""

    # adjacent separations -> stretches of consecutive LRs over which the rate rises significantly
    def stretches(step_ok: list[bool]) -> list[list[int]]:
        found, cur = [], [0]
        for i, ok in enumerate(step_ok):
            if ok:
                cur.append(i + 1)
            else:
                found.append(cur)
                cur = [i + 1]
        found.append(cur)
        return [c for c in found if len(c) >= min_regime]

    lo = [r["rate_interval"][0] for r in rows]
    hi = [r["rate_interval"][1] for r in rows]
    strict = stretches([bool(lo[i + 1] > hi[i]) for i in range(len(rows) - 1)])
    rising = stretches([bool(rows[i + 1]["rate_mean"] > rows[i]["rate_mean"]) for i in range(len(rows) - 1)])
    weak = [c for c in rising if lo[c[-1]] > hi[c[0]]]
    regime = sorted({i for c in strict for i in c})
    shows = [i for i, r in enumerate(rows) if r["failures"] >= min_failures]
    both = [i for i in regime if i in shows]
    return {
        "regime": [lrs[i] for i in regime],
        "regime_weak": sorted({lrs[i] for c in weak for i in c}),
        "failure_clock_shows": [lrs[i] for i in shows],
        "met": bool(both),
        "chosen_base_lr": lrs[both[0]] if both else None,
    }


def _scan_markdown(
    head: str,
    rows: Sequence[dict[str, Any]],
    verdict: dict[str, Any],
    *,
    min_regime: int,
    min_failures: int,
) -> str:
    """scan.md: the table, one row per base LR, and the criterion's reading."""
    md = [
        head,
        "",
        "| base LR | LR at batch | runs | rate (reward/rollout), mean [95% t over seeds] | per seed [own 95%] "
        "| reached target | final reward (last 10%) | peak (10% window) | failed | failure at rollouts (signal) |",
        "|---:|---:|---:|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        per = "; ".join(
            f"{num(x)} {interval(iv)}" for x, iv in zip(r["rates"], r["rate_intervals"], strict=True)
        )
        fails = ", ".join(f"{f:,.0f}" for f in r["failure_samples"] if f is not None) or "-"
        sig = ", ".join(sorted(set(r["failure_signals"])))
        md.append(
            f"| {r['base_lr']:g} | {num(r['lr_at_batch'])} | {r['runs']} | {num(r['rate_mean'])} "
            f"{interval(r['rate_interval'])} | {per} | {r['reached_target']}/{r['runs']} | "
            f"{span(r['final_reward'])} | {span(r['peak_reward'])} | {r['failures']}/{r['runs']} | "
            f"{fails}{f' ({sig})' if sig else ''} |"
        )
    fmt = lambda xs: ", ".join(f"{x:g}" for x in xs) or "none"  # noqa: E731
    md += [
        "",
        f"- In the regime (>= {min_regime} consecutive LRs, each rate interval wholly above the "
        f"previous one's): **{fmt(verdict['regime'])}**; weaker reading (means rising, the ends' "
        f"intervals separated): {fmt(verdict['regime_weak'])}.",
        f"- Failure clock shows (>= {min_failures} runs failed within the budget): "
        f"**{fmt(verdict['failure_clock_shows'])}**.",
        f"- Criterion met: **{'yes' if verdict['met'] else 'no'}**"
        + (f"; chosen base LR {verdict['chosen_base_lr']:g}." if verdict["met"] else "."),
    ]
    return "\n".join(md) + "\n"
