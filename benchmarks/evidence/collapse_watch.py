"""The collapse watch's warning kinds judged like the failures (docs/RESULTS.md section 5).

For each labelled run of ``forecast_skill``'s sources (the reference trainer's recorded runs, the
public real runs, the synthetic runs; each split into calibration and test), the watch runs with
every warning kind raised and the first alarm of each kind is scored: healthy runs it fired on, and
collapses it came before (lead > 0: rollouts and logged rows from the raise to the labelled failure
point). A kind that fires on more than 10% of the healthy calibration runs of any source is a
diagnostic (``rlvr_schedule.clocks.failure.alarms.DIAGNOSTIC_WARNINGS``). ``--real-checkpoints``
prints, per real collapse, the step of the checkpoint the watch would have taken (its first raised
alarm) against the collapse step.

    python -m benchmarks.evidence.collapse_watch --part calibration
    python -m benchmarks.evidence.collapse_watch --part test --real-checkpoints
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict

from benchmarks.evidence.forecast_skill import SOURCES  # the labelled runs, one loader for both studies
from rlvr_schedule.clocks.failure.alarms import RAISED_WARNINGS, CollapseWatch
from rlvr_schedule.clocks.failure.skill import LabelledRun

KINDS = (
    "entropy_collapse",
    "reward_crash",
    "grad_norm_spike",
    "kl_blowup",
    "entropy_surge",
    "response_length",
    "clip_ratio_rise",
    "logprob_mismatch",
    "zero_variance_groups",
    "failure_forecast",
)
EVERY = (*KINDS, "failure", "any raised")


def firsts(lr: LabelledRun) -> dict[str, tuple[int, int, int]]:
    """Kind -> (step, rollouts, row) of its first raise; ``failure`` and ``any raised`` too."""
    recs = lr.run.records
    w = CollapseWatch(raised=KINDS)
    out: dict[str, tuple[int, int, int]] = {}
    for row, rec in enumerate(recs):
        for a in w.update(rec):
            key = "failure" if a.kind == "failure" else a.name
            out.setdefault(key, (a.step, a.samples, row))
            if a.kind == "failure" or a.name in RAISED_WARNINGS:
                out.setdefault("any raised", (a.step, a.samples, row))
    return out


def evaluate(
    part: str, sources: list[str]
) -> tuple[list[str], list[tuple[str, int, int | None, int | None]]]:
    healthy: dict[tuple[str, str], int] = defaultdict(int)
    n_healthy: dict[str, int] = defaultdict(int)
    n_coll: dict[str, int] = defaultdict(int)
    leads: dict[tuple[str, str], list[tuple[float, int]]] = defaultdict(list)
    checkpoints: list[tuple[str, int, int | None, int | None]] = []
    for src in sources:
        for lr in SOURCES[src]():
            if lr.part != part:
                continue
            f = firsts(lr)
            if not lr.failed:
                n_healthy[src] += 1
                for k in f:
                    healthy[(src, k)] += 1
                continue
            n_coll[src] += 1
            recs = lr.run.records
            fail_row = next(i for i, r in enumerate(recs) if r.samples >= lr.failure_samples)
            for k, (_step, samples, row) in f.items():
                leads[(src, k)].append((lr.failure_samples - samples, fail_row - row))
            if src == "real":
                ck, fl = f.get("any raised"), f.get("failure")
                checkpoints.append(
                    (
                        lr.name,
                        recs[fail_row].step,
                        None if ck is None else ck[0],
                        None if fl is None else fl[0],
                    )
                )
    lines = [
        "| source | kind | healthy runs warned | collapses warned in time (lead > 0) | lead, rollouts: median (range) | lead, rows: median (range) |",
        "|---|---|---|---|---|---|",
    ]
    for src in sources:
        for k in EVERY:
            lead = leads[(src, k)]
            pos = [x for x in lead if x[0] > 0]
            if not lead and not healthy[(src, k)]:
                continue
            ro = [x[0] for x in lead]
            rw = [x[1] for x in lead]

            def mr(v: list) -> str:
                return f"{statistics.median(v):g} ({min(v):g} .. {max(v):g})" if v else "-"

            h = healthy[(src, k)]
            nh = max(n_healthy[src], 1)
            tag = "" if k in (*RAISED_WARNINGS, "failure", "any raised") else " (diagnostic)"
            lines.append(
                f"| {src} | {k}{tag} | {h}/{n_healthy[src]} ({100 * h / nh:.0f}%) | {len(pos)}/{n_coll[src]} | "
                f"{mr(ro)} | {mr(rw)} |"
            )
    return lines, checkpoints


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("calibration", "test"), default="calibration")
    p.add_argument("--source", nargs="*", default=["trainer", "real", "synthetic"], choices=sorted(SOURCES))
    p.add_argument("--real-checkpoints", action="store_true")
    a = p.parse_args(argv)
    lines, checkpoints = evaluate(a.part, a.source)
    print(f"part: {a.part}")
    print("\n".join(lines))
    if a.real_checkpoints:
        print(
            "\n| real run | collapse step | checkpoint at the first raised alarm, step | failure raised, step |"
        )
        print("|---|---|---|---|")
        for name, cstep, kstep, fstep in checkpoints:
            print(
                f"| {name} | {cstep} | {'-' if kstep is None else kstep} | {'-' if fstep is None else fstep} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
