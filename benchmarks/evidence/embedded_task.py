"""The embedded-task search of ``EMBEDDED_TASK_PLAN.md``: candidates in the planned order, each
read against the criterion on held-out accuracy; resumable.

    python -m benchmarks.evidence.embedded_task --out runs/embedded [--hours 6] [--only NAME]
    python -m benchmarks.evidence.embedded_task --out runs/embedded --table

Finished runs are read back, a killed run resumes from its checkpoint, and the ledger
(``<out>/ledger.json``) keeps the wall time spent, so the 6-hour budget holds across sessions.
``<out>/TABLE.md`` is rewritten after every candidate stage: one row per candidate against the
five items of the criterion, ranked as the plan says.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.evidence.common import machine, mean_ci

BATCHES = (8, 16, 32, 64, 128)
SEEDS = (0, 1, 2)
LR_FACTORS = (1.0, 0.5, 0.25)  # the highest (the screen) first
MAX_SAMPLES = 14_336
GAIN = 0.3  # item 1: eval accuracy gained from the first eval to the best
ITEMS = (
    "gain >= 0.3 at or below B*",
    "B* interval in the sweep",
    "progress falls",
    "B* ~ 1/lr",
    "failure clock",
)


@dataclass(frozen=True)
class Candidate:
    """One setting of the plan: TrainConfig overrides of the ``tiny`` preset."""

    name: str
    overrides: Mapping[str, Any] = field(default_factory=dict)

    @property
    def batches(self) -> tuple[int, ...]:
        g = int(self.overrides.get("group_size", 8))
        return tuple(b * 2 for b in BATCHES) if g > 8 else BATCHES

    @property
    def base_lr(self) -> float:
        return float(self.overrides.get("base_lr", 4e-4))

    @property
    def lrs(self) -> tuple[float, ...]:
        return tuple(self.base_lr * f for f in LR_FACTORS)


_ALL = {"task_max_level": None}
_SGD = {"optimizer": "sgd", "momentum": 0.9, "base_lr": 0.05, "lr_rule": "linear"}
#: The plan's candidates, in the order they run (EMBEDDED_TASK_PLAN.md).
CANDIDATES = (
    Candidate("default"),
    Candidate("all-levels", _ALL),
    Candidate("all-levels-sgd", {**_ALL, **_SGD}),
    Candidate("all-levels-adam-eps", {**_ALL, "adam_eps": 1e-3, "base_lr": 8e-4, "lr_rule": "linear"}),
    Candidate("sgd", _SGD),
    Candidate("all-levels-g16", {**_ALL, "group_size": 16}),
    Candidate("all-levels-g4", {**_ALL, "group_size": 4}),
    Candidate("all-levels-eval256", {**_ALL, "eval_size": 256}),
)


def config(c: Candidate, lr: float, batch: int, seed: int):
    from rlvr_trainer.config import preset

    kw = {
        **c.overrides,
        "base_lr": lr,
        "batch": batch,
        "seed": seed,
        "max_samples": MAX_SAMPLES,
        "checkpoint_every": 100,  # a killed run loses at most 100 updates
    }
    return preset("tiny", **kw)


def run_dir(out: Path, c: Candidate, lr: float, batch: int, seed: int) -> Path:
    return out / c.name / f"lr{lr:g}" / "sweep" / f"b{batch}-s{seed}"


# --- the criterion -------------------------------------------------------------------------------


def gain(run: Any) -> float:
    """Eval accuracy gained by a run, from its first eval to its best."""
    import numpy as np

    a = run.array("eval_accuracy")
    a = a[np.isfinite(a)]
    return float(a.max() - a[0]) if a.size else math.nan


def criterion(
    c: Candidate, top: Mapping[str, Any], top_runs: Sequence[Any], fits: Mapping[float, Mapping[str, Any]]
) -> list[tuple[bool | None, str]]:
    """(met, figure) per item; ``top`` the fit (``SweepFit.to_dict()``) at the highest LR over
    ``top_runs``; ``fits`` the fits by base LR (item 4 unread, None, with fewer than 3)."""
    from rlvr_schedule.verdicts import lr_slope

    bs = c.batches
    bstar = top.get("critical_batch")
    iv = top.get("critical_batch_interval") or [None, None]
    fin = lambda v: v is not None and math.isfinite(v)  # noqa: E731
    # 1: gain at every constant at or below B*
    g = [gain(r) for r in top_runs if not fin(bstar) or r.batch <= bstar]
    worst = min(g, default=math.nan)
    item1 = (bool(g) and all(fin(v) and v >= GAIN for v in g), f"min gain {worst:.2f} over {len(g)} runs")
    # 2: finite B* interval inside the sweep
    ok2 = fin(iv[0]) and fin(iv[1]) and min(bs) <= iv[0] and iv[1] <= max(bs)
    item2 = (bool(ok2), f"B* {bstar if fin(bstar) else math.nan:.3g} [{_f(iv[0])}, {_f(iv[1])}]")
    # 3: progress at the largest batch below the smallest's, seed t-intervals separated
    rates: dict[int, list[float]] = {}
    for row in top.get("runs", []):
        if row.get("constant_batch", True):
            rates.setdefault(int(row["batch"]), []).append(
                row.get("rate") if row.get("rate") is not None else math.nan
            )
    m_lo, _, hi_big, _ = mean_ci(rates.get(max(bs), []))
    m_hi, lo_small, _, _ = mean_ci(rates.get(min(bs), []))
    item3 = (
        fin(hi_big) and fin(lo_small) and hi_big < lo_small,
        f"rate B={max(bs)} {m_lo:.3g} (hi {_f(hi_big)}) vs B={min(bs)} {m_hi:.3g} (lo {_f(lo_small)})",
    )
    # 4: B* ~ 1/lr over 3 base LRs
    if len(fits) < 3:
        item4: tuple[bool | None, str] = (None, "not run")
    else:
        slope, lo, hi, _ = lr_slope(fits)
        item4 = (
            fin(lo) and fin(hi) and lo <= -1 <= hi and not lo <= 0 <= hi,
            f"slope {slope:.2f} [{_f(lo)}, {_f(hi)}]",
        )
    # 5: at the highest LR, 3 of 5 constants fail (2 of 3 seeds each), exponent interval
    failed: dict[int, int] = {}
    for row in top.get("runs", []):
        if row.get("constant_batch", True) and fin(row.get("failure_samples")):
            failed[int(row["batch"])] = failed.get(int(row["batch"]), 0) + 1
    n_fail = sum(1 for b in bs if failed.get(b, 0) >= 2)
    a, (alo, ahi) = top.get("failure_exponent"), top.get("failure_exponent_interval") or (None, None)
    ok5 = n_fail >= 3 and fin(alo) and fin(ahi) and alo <= 0 <= ahi and (ahi - alo) / 2 <= 0.5
    item5 = (bool(ok5), f"{n_fail}/5 fail, alpha {_f(a)} [{_f(alo)}, {_f(ahi)}]")
    return [item1, item2, item3, item4, item5]


def _f(v: Any) -> str:
    return f"{v:.3g}" if v is not None and math.isfinite(v) else "-"


def rank_key(order: int, items: Sequence[tuple[bool | None, str]], width: float) -> tuple:
    """The plan's ranking: more items met, then the items met in criterion order, then the narrower
    B* interval (hi / lo), then the planned order (smaller key ranks first)."""
    met = [bool(m) for m, _ in items]
    return (-sum(met), tuple(not m for m in met), width if math.isfinite(width) else math.inf, order)


# --- the runner ----------------------------------------------------------------------------------


class Ledger:
    """Wall seconds spent on candidate runs, kept in ``<out>/ledger.json`` across sessions."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {"seconds": 0.0, "runs": {}}

    @property
    def hours(self) -> float:
        return self.data["seconds"] / 3600

    def add(self, key: str, seconds: float) -> None:
        self.data["seconds"] += seconds
        self.data["runs"][key] = self.data["runs"].get(key, 0.0) + seconds
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        tmp.replace(self.path)


def run_stage(out: Path, c: Candidate, lrs: Sequence[float], ledger: Ledger, hours: float) -> bool:
    """Every run of ``c`` at ``lrs``; False when the budget stopped it first."""
    from rlvr_trainer.experiments.rundirs import finished
    from rlvr_trainer.experiments.runs import run_one

    for lr in lrs:
        for seed in SEEDS:
            for b in c.batches:
                cfg, d = config(c, lr, b, seed), run_dir(out, c, lr, b, seed)
                if finished(d, cfg):
                    continue
                if ledger.hours >= hours:
                    return False
                t0 = time.monotonic()
                run_one(cfg, d, resume=True, progress=False, desc=f"{c.name} lr{lr:g} b{b}-s{seed}")
                ledger.add(str(d.relative_to(out)), time.monotonic() - t0)
    return True


def read_fits(out: Path, c: Candidate) -> tuple[dict[float, dict], list[Any]]:
    """Fits (by base LR) of the LRs whose runs have all finished, and the highest LR's runs."""
    from rlvr_schedule.clocks import fit_sweep
    from rlvr_trainer.experiments.rundirs import finished, read_run

    fits: dict[float, dict] = {}
    top_runs: list[Any] = []
    for lr in c.lrs:
        dirs = [(run_dir(out, c, lr, b, s), b, s) for s in SEEDS for b in c.batches]
        if not all(finished(d, config(c, lr, b, s)) for d, b, s in dirs):
            continue
        runs = [read_run(d, f"b{b}-s{s}") for d, b, s in dirs]
        fits[lr] = fit_sweep(runs).to_dict()
        if lr == c.lrs[0]:
            top_runs = runs
    return fits, top_runs


def table(out: Path, ledger: Ledger) -> str:
    """The per-candidate table against the criterion, ranked; also written to ``<out>/TABLE.md``."""
    rows = []
    for order, c in enumerate(CANDIDATES):
        fits, top_runs = read_fits(out, c)
        top = fits.get(c.lrs[0])
        if top is None:
            continue
        items = criterion(c, top, top_runs, fits)
        iv = top.get("critical_batch_interval") or [None, None]
        width = iv[1] / iv[0] if all(v is not None and math.isfinite(v) and v > 0 for v in iv) else math.inf
        rows.append((rank_key(order, items, width), c, items, len(fits), top.get("metric")))
    rows.sort(key=lambda r: r[0])
    mark = {True: "met", False: "not met", None: "not run"}
    lines = [
        f"Embedded-task search (EMBEDDED_TASK_PLAN.md); {machine()}; ledger {ledger.hours:.2f} h of the budget.",
        "",
        "| rank | candidate | LRs done | progress read on | "
        + " | ".join(f"{i + 1}. {n}" for i, n in enumerate(ITEMS))
        + " | all |",
        "|---|---|---|---|" + "---|" * len(ITEMS) + "---|",
    ]
    for k, (_, c, items, n_lr, metric) in enumerate(rows, 1):
        cells = [f"{mark[m]}: {fig}" for m, fig in items]
        lines.append(
            f"| {k} | {c.name} | {n_lr}/3 | {metric} | "
            + " | ".join(cells)
            + f" | {'yes' if all(m for m, _ in items) else 'no'} |"
        )
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "TABLE.md").write_text(text)
    return text


def search(out: Path, *, hours: float = 6.0, only: str | None = None) -> str:
    """Run the plan in order until a candidate meets the criterion or the budget is spent."""
    ledger = Ledger(out / "ledger.json")
    for c in CANDIDATES:
        if only is not None and c.name != only:
            continue
        if not run_stage(out, c, c.lrs[:1], ledger, hours):
            break
        fits, top_runs = read_fits(out, c)
        items = criterion(c, fits[c.lrs[0]], top_runs, fits)
        table(out, ledger)
        if not all(items[i][0] for i in (0, 1, 2, 4)):
            continue  # the screen failed an item the other LRs cannot mend
        if not run_stage(out, c, c.lrs[1:], ledger, hours):
            break
        fits, top_runs = read_fits(out, c)
        items = criterion(c, fits[c.lrs[0]], top_runs, fits)
        table(out, ledger)
        if all(m for m, _ in items):
            break  # the first in the planned order that meets the criterion
    return table(out, ledger)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("runs") / "embedded")
    ap.add_argument("--hours", type=float, default=6.0, help="budget of the 2-core machine (default 6)")
    ap.add_argument("--only", choices=[c.name for c in CANDIDATES], help="run this candidate alone")
    ap.add_argument("--table", action="store_true", help="print the table from finished runs (no training)")
    args = ap.parse_args(argv)
    if args.table:
        print(table(args.out, Ledger(args.out / "ledger.json")))
        return
    print(search(args.out, hours=args.hours, only=args.only))


if __name__ == "__main__":
    main()
