"""The embedded experiment's criterion, read from its sweep's run folders (stage 2 of
``NOISE_SCALE_PLAN_2.md``; thresholds of ``NOISE_SCALE_PLAN.md``).

    python -m benchmarks.evidence.noise_sweep --runs runs/noise_sa/sweep \
        --batches 128 256 512 1032 2064 --shift 258 --out benchmarks/evidence/results/noise_sweep_sa

Items 2-5 are read exactly as the power check read them in its replicates
(``power_check.criterion``), so the power the plan was sized with is the power of this reading:
each run's rate per rollout from one ``fit_sweep`` per base LR (all of an LR's runs share its
reward levels; a run that crossed no level has rate 0, as the scan reads it, and so has a run
whose fallback regression slope is negative: the power check's rates are never below 0), B* and
its interval from the critical-batch profile and wild bootstrap over those rates, the rates at the smallest and
largest batch as 95% Student-t intervals over seeds, the slope of ``B* + shift`` on the base LR
from ``verdicts.lr_slope``, and at the highest LR the failure points with ``FailureScalingFit``.
Item 1 is read from the eval curves: every constant at or below B* (that LR's reading) gains at
least 0.3 from its first evaluation to its best, a constant's gain being its seeds' mean (the
smallest seed's gain is shown beside it); an LR with no constant at or below B* fails it.

Only finished runs are read (last record at the run's budget); a sweep in progress is read as far
as it goes and marked incomplete. Writes ``criterion.md`` and ``criterion.json`` under ``--out``.
Needs the core only (numpy); no training library is imported.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.evidence.common import mean_ci
from benchmarks.evidence.power_check import ITEMS, Design, _fit_bstar, criterion
from rlvr_schedule.clocks.failure.scaling import FailureScalingFit
from rlvr_schedule.records import Run, StepRecord
from rlvr_schedule.verdicts import lr_slope

__all__ = ["GAIN", "ITEM1", "find_runs", "read_sweep", "markdown"]

GAIN = 0.3
ITEM1 = "1. gain at or below B*"
_RUN = re.compile(r"^b(\d+)-s(\d+)$")


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def find_runs(root: Path) -> tuple[dict[float, list[tuple[int, int, Path]]], list[str]]:
    """``({base LR: [(batch, seed, folder)]}, [unfinished folders])`` under the sweep's layout
    ``root/lr<LR>/sweep/b<batch>-s<seed>``; a run is finished when its last record reached the
    ``max_samples`` of its ``config.json``."""
    found: dict[float, list[tuple[int, int, Path]]] = {}
    unfinished = []
    for d in sorted(root.glob("lr*/sweep/b*-s*")):
        m = _RUN.match(d.name)
        if not m or not d.is_dir():
            continue
        lr = float(d.parent.parent.name[2:])
        p, c = d / "metrics.jsonl", d / "config.json"
        rows = _rows(p) if p.exists() else []
        budget = json.loads(c.read_text())["max_samples"] if c.exists() else math.inf
        if not rows or rows[-1]["samples"] < budget:
            unfinished.append(str(d.relative_to(root)))
            continue
        found.setdefault(lr, []).append((int(m.group(1)), int(m.group(2)), d))
    return found, unfinished


def _gain(rows: Sequence[dict[str, Any]]) -> float | None:
    """Best minus first evaluation, the budget's final evaluation included (as the pilot reads it)."""
    accs = [r["eval_accuracy"] for r in rows if r.get("eval_accuracy") is not None]
    end = rows[-1].get("eval_final_accuracy") if rows else None
    if end is not None:
        accs.append(end)
    return max(accs) - accs[0] if accs else None


def _load(folder: Path, name: str) -> Run:
    import warnings

    from rlvr_schedule.errors import IngestWarning
    from rlvr_schedule.ingest import load_run

    with warnings.catch_warnings():  # the trainer's timing extras are expected
        warnings.filterwarnings("ignore", message=".*unknown metrics kept in extra", category=IngestWarning)
        return load_run(folder / "metrics.jsonl", name=name)


def read_sweep(
    root: Path,
    *,
    batches: Sequence[int],
    shift: float,
    seeds: int = 5,
    n_boot: int = 200,
) -> dict[str, Any]:
    """The criterion's five items and their figures from the finished runs under ``root``."""
    from rlvr_schedule.clocks import fit_sweep

    found, unfinished = find_runs(root)
    if len(found) < 1:
        raise SystemExit(f"{root}: no finished sweep run")
    batches = sorted(int(b) for b in batches)
    lrs = sorted(found)
    top = lrs[-1]
    per_lr: dict[float, dict[str, Any]] = {}
    rates: dict[float, tuple[np.ndarray, np.ndarray]] = {}
    failures: tuple[np.ndarray, list[float | None]] = (np.zeros(0), [])
    budget = 0.0
    for lr in lrs:
        cells = sorted(found[lr])
        runs = [_load(d, f"lr{lr:g} b{b}-s{s}") for b, s, d in cells]
        fit = fit_sweep(runs, n_boot=n_boot)
        b = np.array([c[0] for c in cells], float)
        s = np.array(
            [max(r.rate, 0.0) if r.rate is not None and math.isfinite(r.rate) else 0.0 for r in fit.runs]
        )
        rates[lr] = (b, s)
        gains = [_gain(_rows(d / "metrics.jsonl")) for _, _, d in cells]
        budget = max(budget, *(float(r.records[-1].samples) for r in runs))
        if lr == top:
            failures = (b, [r.failure_samples for r in fit.runs])
        bstar, iv = _fit_bstar(b, s, n_boot, 0)
        by_batch: dict[int, dict[str, Any]] = {}
        for bb in sorted({c[0] for c in cells}):
            g = [x for x, c in zip(gains, cells, strict=True) if c[0] == bb and x is not None]
            m, lo, hi, n = mean_ci(s[b == bb])
            by_batch[bb] = {
                "seeds": n,
                "rate": [m, lo, hi],
                "gain_mean": statistics.fmean(g) if g else None,
                "gain_min": min(g) if g else None,
                "failed": sum(
                    r.failure_samples is not None for r, c in zip(fit.runs, cells, strict=True) if c[0] == bb
                ),
            }
        below = [bb for bb in by_batch if bb <= bstar] if not math.isnan(bstar) else []
        item1 = bool(below) and all((by_batch[bb]["gain_mean"] or 0.0) >= GAIN for bb in below)
        per_lr[lr] = {
            "runs": len(cells),
            "bstar": bstar,
            "bstar_interval": list(iv),
            "fit_sweep_bstar": fit.critical_batch,
            "fit_sweep_bstar_interval": list(fit.critical_batch_interval),
            "target": fit.target,
            "initial": fit.initial_reward,
            "batches": by_batch,
            "item1": item1,
        }
    design = Design(tuple(batches), math.nan, math.nan, budget, seeds=seeds, shift=shift)
    items: dict[str, bool | None] = dict.fromkeys(ITEMS, None)
    items.update(criterion(design, rates, failures, n_boot=n_boot, seed=0))
    if len(lrs) < 2:  # the slope needs two LRs: not read yet
        items[ITEMS[2]] = items[ITEMS[4]] = items[ITEMS[5]] = None
    item1 = all(per_lr[lr]["item1"] for lr in lrs)
    out_items = {ITEM1: item1, **items}
    if out_items[ITEMS[4]] is not None:
        out_items[ITEMS[4]] = bool(item1 and out_items[ITEMS[4]])

    def slope(sh: float) -> list[float]:
        moved = {
            lr: {
                "critical_batch": v["bstar"] + sh,
                "critical_batch_interval": [x + sh for x in v["bstar_interval"]],
            }
            for lr, v in per_lr.items()
        }
        return list(lr_slope(moved)[:3])

    fb, fs = failures
    consumed = [budget] * len(fs)
    dummy = [
        Run([StepRecord(step=1, samples=int(budget), batch=int(x), lr=1.0)], name=f"r{i}")
        for i, x in enumerate(fb)
    ]
    fsf = FailureScalingFit().fit(dummy, fs, consumed=consumed) if len(fs) else None
    expected = len(batches) * seeds
    return {
        "root": root.name,
        "lrs": lrs,
        "batches": batches,
        "seeds": seeds,
        "shift": shift,
        "budget": budget,
        "complete": not unfinished and all(per_lr[lr]["runs"] == expected for lr in lrs) and len(lrs) == 3,
        "unfinished": unfinished,
        "per_lr": {f"{lr:g}": v for lr, v in per_lr.items()},
        "slope_shifted": slope(shift),
        "slope_plain": slope(0.0),
        "failure_exponent": None if fsf is None else [fsf.alpha_, *fsf.alpha_interval_],
        "failing_constants_at_top": sum(
            sum(f is not None for f, bb in zip(fs, fb, strict=True) if bb == batch)
            >= math.ceil(2 * seeds / 3)
            for batch in batches
        ),
        "items": out_items,
    }


def _rate(cells: dict[str, dict[str, Any]], k: str) -> str:
    if k not in cells:
        return "-"
    m, lo, hi = cells[k]["rate"]
    return f"{m:.2e} [{lo:.2e}, {hi:.2e}]" if lo is not None and math.isfinite(lo) else f"{m:.2e}"


def markdown(r: dict[str, Any]) -> str:
    """The reading as a short table and the five items."""

    def f(x: Any, d: int = 0) -> str:
        return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:,.{d}f}"

    lines = [
        f"# The criterion on `{r['root']}`"
        + ("" if r["complete"] else " (incomplete: read as far as it goes)"),
        "",
        f"Batches {r['batches']}, {r['seeds']} seeds planned, budget {f(r['budget'])} rollouts, shift B~/2 = "
        f"{f(r['shift'])}; unfinished runs: {len(r['unfinished'])}.",
        "",
        "| base LR | runs | B* [95%] (criterion) | fit_sweep B* [95%] | rate b1 [95%] | rate b5 [95%] "
        "| gains at or below B* (mean / min) | item 1 |",
        "|---:|---:|---|---|---|---|---|---|",
    ]
    for lr, v in r["per_lr"].items():
        bb = {str(k): x for k, x in v["batches"].items()}
        lo_b, hi_b = str(min(r["batches"])), str(max(r["batches"]))

        gains = ", ".join(
            f"{k}: {f(x['gain_mean'], 2)} / {f(x['gain_min'], 2)}"
            for k, x in bb.items()
            if v["bstar"] is not None and int(k) <= v["bstar"]
        )
        lines.append(
            f"| {lr} | {v['runs']} | {f(v['bstar'])} [{f(v['bstar_interval'][0])}, {f(v['bstar_interval'][1])}] | "
            f"{f(v['fit_sweep_bstar'])} [{f(v['fit_sweep_bstar_interval'][0])}, {f(v['fit_sweep_bstar_interval'][1])}] | "
            f"{_rate(bb, lo_b)} | {_rate(bb, hi_b)} | {gains or 'none'} | {'met' if v['item1'] else 'not met'} |"
        )
    s, p, a = r["slope_shifted"], r["slope_plain"], r["failure_exponent"]
    lines += [
        "",
        f"- slope of B* + {f(r['shift'])} on the base LR: {f(s[0], 2)} [{f(s[1], 2)}, {f(s[2], 2)}] (plain B*: "
        f"{f(p[0], 2)} [{f(p[1], 2)}, {f(p[2], 2)}])",
        f"- at the highest LR: {r['failing_constants_at_top']} of {len(r['batches'])} constants failed; failure "
        + ("exponent -" if a is None else f"exponent {f(a[0], 2)} [{f(a[1], 2)}, {f(a[2], 2)}]"),
        "",
        "| item | met |",
        "|---|---|",
        *(f"| {k} | {'-' if v is None else 'yes' if v else 'no'} |" for k, v in r["items"].items()),
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, required=True, help="the sweep's --out")
    ap.add_argument("--batches", type=int, nargs="+", required=True)
    ap.add_argument("--shift", type=float, required=True, help="B~_noise / 2 from the probe")
    ap.add_argument("--seeds", type=int, default=5, help="seeds per constant (the plan's)")
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    r = read_sweep(args.runs, batches=args.batches, shift=args.shift, seeds=args.seeds, n_boot=args.n_boot)
    text = markdown(r)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "criterion.md").write_text(text)
        (args.out / "criterion.json").write_text(json.dumps(r, indent=1, default=str))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
