"""Stage 1 of NOISE_SCALE_PLAN.md, read from the pilot's runs: the LR scan's table, lambda_0,
the gain and the failure point there, and the pilot's fits for the power check.

    python -m benchmarks.evidence.noise_pilot --runs runs/noise_pilot \
        --out benchmarks/evidence/results/noise_pilot

Reads the finished runs (a run still training is left out and counted), so it can be re-run as
the scan goes on. Writes under ``--out``: ``scan.md`` (the scan runner's table), ``runs.md`` and
``pilot.json`` (per run: eval first/best/end, gain, rate, failure, the share of updates a clip at
1.0 would have acted on, wall time; lambda_0 by the plan's rule), ``pilot_fits.json`` (``{lr:
{"runs": [...]}}``, what ``power_check --pilot`` reads) and ``records.tar.xz`` (each run's
records, the fields the clocks read).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import shutil
import statistics
import tarfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LRS = (5e-5, 1e-4, 2e-4, 4e-4, 8e-4, 1.6e-3)
SEEDS = (0, 1)
BATCH = 48
GAIN = 0.3
#: The record fields kept in records.tar.xz (what the clocks and this table read).
KEEP = (
    "step",
    "samples",
    "batch",
    "lr",
    "lr_effective",
    "reward_mean",
    "reward_std",
    "entropy",
    "kl",
    "grad_norm",
    "grad_norm_micro",
    "clip_would_act",
    "clip_frac",
    "frac_zero_std",
    "response_length",
    "eval_accuracy",
    "eval_size",
    "eval_final_accuracy",
    "eval_final_samples",
    "rollout_s",
    "update_s",
    "eval_s",
)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _finished(d: Path) -> bool:
    p, c = d / "metrics.jsonl", d / "config.json"
    if not (p.exists() and c.exists()):
        return False
    rows = _rows(p)
    return bool(rows) and rows[-1]["samples"] >= json.loads(c.read_text())["max_samples"]


def run_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One run's eval curve in brief: first, best, end (the budget's final eval), gain, clip share."""
    curve = [(r["samples"] - r["batch"], r["eval_accuracy"]) for r in rows if "eval_accuracy" in r]
    end = rows[-1].get("eval_final_accuracy")
    if end is not None:
        curve.append((int(rows[-1]["eval_final_samples"]), end))
    accs = [a for _, a in curve]
    wall = sum(float(r.get(k) or 0.0) for r in rows for k in ("rollout_s", "update_s", "eval_s"))
    return {
        "samples": rows[-1]["samples"],
        "eval_first": accs[0] if accs else None,
        "eval_best": max(accs) if accs else None,
        "eval_best_at": curve[accs.index(max(accs))][0] if accs else None,
        "eval_end": end,
        "gain": (max(accs) - accs[0]) if accs else None,
        "eval_curve": curve,
        "clip_would_act_share": statistics.fmean(float(r.get("clip_would_act", math.nan)) for r in rows),
        "grad_norm_median": statistics.median(r["grad_norm"] for r in rows),
        "wall_s": wall,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, required=True, help="the scan's --out")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--lrs", type=float, nargs="+", default=list(LRS))
    ap.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    ap.add_argument("--batch", type=int, default=BATCH)
    args = ap.parse_args(argv)

    from rlvr_trainer.experiments.scan import scan_report

    done = [
        (lr, s)
        for s in args.seeds
        for lr in args.lrs
        if _finished(args.runs / f"lr{lr:g}" / "sweep" / f"b{args.batch}-s{s}")
    ]
    if not done:
        raise SystemExit(f"{args.runs}: no finished pilot run yet")
    lrs = sorted({lr for lr, _ in done})
    seeds = sorted({s for _, s in done})
    # the scan runner's table over the finished runs only (a run in progress would enter it part-way)
    tmp = args.out / "_scan"
    tmp.mkdir(parents=True, exist_ok=True)
    for lr, s in done:
        src = args.runs / f"lr{lr:g}" / "sweep" / f"b{args.batch}-s{s}"
        dst = tmp / src.relative_to(args.runs)
        dst.mkdir(parents=True, exist_ok=True)
        for f in ("metrics.jsonl", "config.json"):
            shutil.copy(src / f, dst / f)
    scan_report(tmp, lrs=lrs, seeds=seeds, batch=args.batch)
    scan = json.loads((tmp / "scan.json").read_text())
    shutil.copy(tmp / "scan.md", args.out / "scan.md")

    fit_runs = scan["fit"]["runs"]
    keys = [(lr, s) for lr in lrs for s in seeds if (lr, s) in done]  # scan_report's order
    per_run, fits, buf = [], {}, io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        for i, (lr, s) in enumerate(keys):
            rows = _rows(tmp / f"lr{lr:g}" / "sweep" / f"b{args.batch}-s{s}" / "metrics.jsonl")
            fr = fit_runs[i]
            per_run.append(
                {
                    "base_lr": lr,
                    "seed": s,
                    **run_summary(rows),
                    "rate": fr.get("rate"),
                    "failure_samples": fr.get("failure_samples"),
                    "failure_signal": fr.get("failure_signal"),
                }
            )
            fits.setdefault(f"{lr:g}", {"runs": []})["runs"].append(fr)
            data = "".join(json.dumps({k: r[k] for k in KEEP if k in r}) + "\n" for r in rows).encode()
            info = tarfile.TarInfo(f"lr{lr:g}-b{args.batch}-s{s}.jsonl")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (args.out / "records.tar.xz").write_bytes(buf.getvalue())
    shutil.rmtree(tmp)

    # lambda_0: the LR with the highest mean rate per rollout on the eval curve
    by_lr = {row["base_lr"]: row for row in scan["rows"]}
    rated = {lr: by_lr[lr]["rate_mean"] for lr in lrs if by_lr[lr]["rate_mean"] is not None}
    lam0 = max(rated, key=lambda lr: rated[lr]) if rated else None
    at0 = [r for r in per_run if r["base_lr"] == lam0]
    fails = [r["failure_samples"] for r in at0]
    n_fail = sum(f is not None for f in fails)
    srt = sorted(f if f is not None else math.inf for f in fails)
    median_f = statistics.median(srt) if srt else None
    summary = {
        "batch": args.batch,
        "finished": [[lr, s] for lr, s in keys],
        "planned": len(args.lrs) * len(args.seeds),
        "lambda_0": lam0,
        "lambda_0_at_scan_end": lam0 in (min(args.lrs), max(args.lrs)),
        "rates": rated,
        "gain_at_lambda_0": [r["gain"] for r in at0],
        "gain_met": bool(at0) and all((r["gain"] or 0) >= GAIN for r in at0),
        "failures_at_lambda_0": fails,
        "median_failure_at_lambda_0": None if median_f is None or math.isinf(median_f) else median_f,
        "censored_at_lambda_0": len(fails) - n_fail,
        "runs": per_run,
        "verdict_of_scan_runner": scan["verdict"],
    }
    (args.out / "pilot.json").write_text(json.dumps(summary, indent=1, default=str))
    (args.out / "pilot_fits.json").write_text(json.dumps(fits, indent=1, default=str))

    def f3(x: Any) -> str:
        return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)

    md = [
        f"# Pilot LR scan at batch {args.batch}: {len(keys)} of {summary['planned']} runs finished",
        "",
        "| base LR | seed | eval first | best (at rollouts) | end | gain | rate (/rollout) "
        "| failure at (signal) | clip at 1.0 would act | median grad norm | wall s |",
        "|---:|---:|---:|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in per_run:
        fail = "-" if r["failure_samples"] is None else f"{r['failure_samples']:,.0f} ({r['failure_signal']})"
        md.append(
            f"| {r['base_lr']:g} | {r['seed']} | {f3(r['eval_first'])} | {f3(r['eval_best'])} "
            f"({r['eval_best_at']:,}) | {f3(r['eval_end'])} | {f3(r['gain'])} | "
            f"{r['rate']:.2e} | {fail} | {r['clip_would_act_share']:.0%} | "
            f"{r['grad_norm_median']:.2f} | {r['wall_s']:.0f} |"
            if r["rate"] is not None
            else f"| {r['base_lr']:g} | {r['seed']} | {f3(r['eval_first'])} | {f3(r['eval_best'])} | "
            f"{f3(r['eval_end'])} | {f3(r['gain'])} | - | {fail} | {r['clip_would_act_share']:.0%} | "
            f"{r['grad_norm_median']:.2f} | {r['wall_s']:.0f} |"
        )
    md += [
        "",
        f"- lambda_0 (highest mean rate on the eval curve): **{lam0:g}**"
        + (
            " (at an end of the scan: the plan adds two LRs beyond it, once)"
            if summary["lambda_0_at_scan_end"]
            else ""
        )
        if lam0 is not None
        else "- lambda_0: none (no LR with a rate)",
        f"- gain at lambda_0: {', '.join(f3(g) for g in summary['gain_at_lambda_0'])} "
        f"(item 1 needs >= {GAIN}: {'met' if summary['gain_met'] else 'not met'})",
        f"- failures at lambda_0: {n_fail} of {len(fails)}; median failure point "
        f"{f3(summary['median_failure_at_lambda_0'])} ({summary['censored_at_lambda_0']} censored at the budget)",
    ]
    (args.out / "runs.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
