"""A synthetic 16x rollout-batch sweep, end to end through the CLI: fit, plan, report, simulate.

This is the no-GPU, no-model walk-through of the library: the logs come from
:mod:`rlvr_schedule.synthetic` with known clocks (critical batch 128 rollouts/update, collapse
after 60k rollouts at every batch, a step of 0.5 s per rollout + 8 s per update: a price of 16
rollouts per update), so you can see the fit recover them.

    python examples/synthetic_sweep_demo.py [--out outputs/synthetic-demo]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rlvr_schedule import cli
from rlvr_schedule.ingest import write_jsonl
from rlvr_schedule.synthetic import make_sweep

CRITICAL_BATCH = 128
FAILURE_SAMPLES = 60_000
BATCHES = [16, 32, 64, 128, 256]  # a 16x range, square-root LR scaling
SECONDS = {"seconds_per_rollout": 0.5, "seconds_per_update": 8.0}  # the host's step time: price 16


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="outputs/synthetic-demo")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out = Path(args.out)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    runs = make_sweep(
        BATCHES, critical_batch=CRITICAL_BATCH, failure_samples=FAILURE_SAMPLES, seed=args.seed, **SECONDS
    )
    paths = []
    for run in runs:
        p = logs / f"batch{run.batch:04d}.jsonl"
        p.unlink(missing_ok=True)
        write_jsonl(p, run.records)
        paths.append(str(p))
    print(
        f"wrote {len(paths)} synthetic runs (true B* = {CRITICAL_BATCH}, true failure = {FAILURE_SAMPLES:,} samples)"
    )

    print("\n$ rlvr-schedule fit", " ".join(paths[:1]), "...")
    cli.main(["fit", *paths])
    print("\n$ rlvr-schedule plan ... --out", out / "plan.json")
    cli.main(["plan", *paths, "--out", str(out / "plan.json")])
    print("\n$ rlvr-schedule simulate --schedule", out / "plan.json")
    cli.main(
        [
            "simulate",
            "--schedule",
            str(out / "plan.json"),
            "--critical-batch",
            str(CRITICAL_BATCH),
            "--failure-samples",
            str(FAILURE_SAMPLES),
            "--constant",
            *map(str, BATCHES),
            "--max-samples",
            str(int(FAILURE_SAMPLES * 1.3)),
        ]
    )
    print("\n$ rlvr-schedule report ... --out", out / "report")
    cli.main(["report", *paths, "--out", str(out / "report")])
    summary = json.loads((out / "report" / "summary.json").read_text())
    print(
        f"\nfitted B* = {summary['fit']['critical_batch']:,.0f} rollouts/update, "
        f"failure samples = {summary['fit']['failure_samples']:,.0f} rollouts"
    )
    print(f"report: {(out / 'report' / 'index.html').resolve()}")


if __name__ == "__main__":
    main()
