"""The live failure forecast judged as a forecast (docs/RESULTS.md, "Forecast skill").

Replays the forecast (``rlvr_schedule.clocks.failure.forecast.policy_forecast``, as the live policy
configures it) over labelled recorded runs and scores its first warning per run: recall at a lead of
at least 10% of the time to failure, false switches per healthy run, the lead's distribution, with
95% Wilson intervals, per source, split part and failure kind. The split and the label rules are
``tests/data/forecast/SPLIT.json`` (committed before any replay or tuning). Sources:

* ``trainer``: reference-trainer runs, trimmed and gzipped in ``tests/data/forecast/trainer_runs.json.gz``
  (``--pack DIR ...`` makes that file from run directories holding ``metrics.jsonl`` + ``config.json``);
* ``real``: ``tests/data/real/runs`` (the published logs read natively, split as committed there);
* ``synthetic``: ``SyntheticEnvironment.run_constant`` over the split's tasks and seeds.

    python -m benchmarks.evidence.forecast_skill --select             # every variant on calibration
    python -m benchmarks.evidence.forecast_skill --part test --variant entropy entropy_sf0.4
    python -m benchmarks.evidence.forecast_skill --pack runs/scan/*/sweep/* runs/forecast/*/s*

Variants (:data:`VARIANTS`): ``entropy`` is the live policy's forecast; the others change one thing
(evidence, switch fraction) or add a member forecast of a crash precursor (the share of responses
cut at the length cap, zero-variance groups, the KL, the reward) through :class:`AnyForecast`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import platform
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from rlvr_schedule.clocks.failure import FailureClock
from rlvr_schedule.clocks.failure.forecast import AnyForecast, policy_forecast
from rlvr_schedule.clocks.failure.skill import LabelledRun, Replay, replay, score
from rlvr_schedule.records import METRIC_FIELDS, Run, StepRecord

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "forecast"
REAL = ROOT / "tests" / "data" / "real" / "runs"
SPLIT = json.loads((DATA / "SPLIT.json").read_text())
#: record fields the replay and the labels need (the rest of a trainer log is left out)
KEEP = ("step", "samples", "batch", "lr", *METRIC_FIELDS)
KEEP_EXTRA = ("response_length_cap", "response_clip_ratio", "truncated_frac", "logprob_mismatch")

#: forecast variants by name: a factory of a fresh forecast (each has update(record) and warns())
VARIANTS: dict[str, Callable[[], object]] = {
    "entropy": lambda: policy_forecast("entropy"),
    "entropy_1024": lambda: policy_forecast("entropy", min_samples=1024),
    "entropy_sf0.4": lambda: policy_forecast("entropy", switch_fraction=0.4),
    "entropy+trunc": lambda: AnyForecast(
        [policy_forecast("entropy"), policy_forecast("response_clip_ratio", threshold=0.5)]
    ),
    "entropy+zerovar": lambda: AnyForecast(
        [policy_forecast("entropy"), policy_forecast("frac_zero_std", threshold=0.9)]
    ),
    "entropy+kl": lambda: AnyForecast([policy_forecast("entropy"), policy_forecast("kl")]),
    "entropy+trunc320": lambda: AnyForecast(
        [policy_forecast("entropy"), policy_forecast("response_clip_ratio", threshold=0.5, min_samples=320)]
    ),
    "entropy+zerovar512": lambda: AnyForecast(
        [policy_forecast("entropy"), policy_forecast("frac_zero_std", threshold=0.9, min_samples=512)]
    ),
    "entropy+reward512": lambda: AnyForecast(
        [policy_forecast("entropy"), policy_forecast("reward_mean", fraction=0.5, min_samples=512)]
    ),
}


# --- data ------------------------------------------------------------------------------------
def _trim(v: object) -> object:
    """A float to 6 significant digits (None for NaN/inf): the replay needs no more, the file shrinks."""
    if isinstance(v, float):
        return float(f"{v:.6g}") if math.isfinite(v) else None
    return v


def pack(dirs: list[Path], out: Path = DATA / "trainer_runs.json.gz") -> None:
    """Trim each finished run directory's records to :data:`KEEP` (columns, 6 significant digits) and
    gzip them into ``out``."""
    runs = {}
    for d in sorted(dirs):
        m, c = d / "metrics.jsonl", d / "config.json"
        if not (m.exists() and c.exists()):
            continue
        cfg = json.loads(c.read_text())
        recs = [json.loads(x) for x in m.read_text().splitlines() if x.strip()]
        if not recs or recs[-1].get("samples", 0) < cfg.get("max_samples", math.inf):
            print(f"skip {d}: unfinished", file=sys.stderr)
            continue
        cols: dict[str, list] = {}
        for k in KEEP + KEEP_EXTRA:
            col = [r.get(k) for r in recs]
            if any(v is not None for v in col):
                cols[k] = [_trim(v) for v in col]
        group = d.parts[d.parts.index("runs") + 1] if "runs" in d.parts[:-1] else d.parent.name
        name = f"{group}_lr{cfg['base_lr']:g}_b{cfg['batch']}_s{cfg['seed']}"
        meta = {
            k: cfg.get(k)
            for k in ("seed", "batch", "base_lr", "base_batch", "lr", "max_samples", "group_size")
        }
        runs[name] = {"meta": meta, "records": cols}
    text = json.dumps(runs, sort_keys=True, separators=(",", ":"))
    with gzip.GzipFile(out, "wb", mtime=0) as f:
        f.write(text.encode())
    print(f"packed {len(runs)} runs into {out} ({out.stat().st_size:,} bytes)")


def _records(cols: dict[str, list]) -> list[StepRecord]:
    n = len(cols["step"])
    recs = []
    for i in range(n):
        d = {k: v[i] for k, v in cols.items() if v[i] is not None}
        recs.append(StepRecord.from_dict(d))
    return recs


def trainer_runs(path: Path = DATA / "trainer_runs.json.gz") -> Iterator[LabelledRun]:
    if not path.exists():
        return
    with gzip.open(path, "rt") as f:
        runs = json.load(f)
    for name, r in sorted(runs.items()):
        run = Run(_records(r["records"]), name=name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clock = FailureClock().fit(run)
        if clock.diverging_:
            continue
        part = "calibration" if int(r["meta"].get("seed") or 0) == 0 else "test"
        yield LabelledRun(name, run, clock.failure_samples_, clock.signal_, "trainer", part)


def real_runs() -> Iterator[LabelledRun]:
    from benchmarks.fixtures.real_runs import load_real  # the raw published logs, read natively

    split = json.loads((REAL / "SPLIT.json").read_text())
    for part in ("calibration", "test"):
        for name in split[part]:
            recs = load_real(name).records  # the product's own read of the published log
            lab = split["labels"][name]
            fail = None
            if lab["label"] == "collapsed":
                fail = float(next(r.samples for r in recs if r.step >= lab["collapse_step"]))
            kind = "reward_crash" if fail is not None else None
            yield LabelledRun(name, Run(recs, name=name), fail, kind, "real", part)


def synthetic_runs(parts: tuple[str, ...] = ("calibration", "test")) -> Iterator[LabelledRun]:
    from rlvr_schedule.synthetic import SyntheticEnvironment
    from rlvr_schedule.synthetic.tasks import COMMON, TASKS

    s = SPLIT["synthetic"]
    for part in parts:
        lo, hi = s[f"{part}_seeds"]
        for task in s["tasks"]:
            for batch in s["batches"]:
                for ratio in s["lr_ratios"]:
                    for seed in range(lo, hi):
                        env = SyntheticEnvironment(**COMMON, **TASKS[task], seed=seed)
                        lr = ratio * env.model.sqrt_lr(batch)
                        run = env.run_constant(batch, s["max_samples"], lr=lr)
                        fail = env.collapsed_at
                        kind = None
                        if fail is not None:
                            kind = "entropy_collapse" if env.crash_cause == "entropy" else "reward_crash"
                        name = f"{task}_b{batch}_r{ratio:g}_s{seed}"
                        yield LabelledRun(name, run, fail, kind, "synthetic", part)


SOURCES: dict[str, Callable[[], Iterator[LabelledRun]]] = {
    "trainer": trainer_runs,
    "real": real_runs,
    "synthetic": synthetic_runs,
}


# --- table -----------------------------------------------------------------------------------
def _pct(k: int, n: int, ci: tuple[float, float]) -> str:
    if n == 0:
        return "-"
    return f"{k}/{n} = {k / n:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def table(replays: list[Replay], lead_fraction: float) -> list[str]:
    rows = [
        "| source | part | failure kind | recall at lead >= "
        f"{lead_fraction:.0%} [95% Wilson] | late / missed | lead / time to failure: p10, median, p90 "
        "| false switches per healthy run [95% Wilson] |",
        "|---|---|---|---|---|---|---|",
    ]
    parts = sorted({r.part for r in replays})
    groups = sorted({(r.source, r.part) for r in replays}) + [("all", p) for p in parts]
    for src, part in groups:
        rs = [r for r in replays if r.part == part and (src == "all" or r.source == src)]
        kinds = sorted({r.kind for r in rs if r.kind is not None}) + ["any"]
        for kind in kinds:
            sk = score(rs, lead_fraction=lead_fraction, kind=None if kind == "any" else kind)
            missed = sk.failed - sk.timely - sk.late
            q = sk.lead_quantiles()
            lead = "-" if not sk.lead_fractions else ", ".join(f"{x:.2f}" for x in q)
            fs = _pct(sk.false_switches, sk.healthy, sk.false_interval) if kind == "any" else ""
            rows.append(
                f"| {src} | {part} | {kind} | {_pct(sk.timely, sk.failed, sk.recall_interval)} | "
                f"{sk.late} / {missed} | {lead} | {fs} |"
            )
    return rows


def select(replays_by_variant: dict[str, list[Replay]], lead_fraction: float) -> str:
    """The candidate rule, fixed before the test part was replayed: on the calibration part, the
    highest recall at lead over all failed runs among the variants whose false-switch rate is at
    most the target (0.1) on the healthy runs of every source (pooled, the synthetic runs would
    outvote a forecast that false-alarms on every trainer run); ties go to the earlier variant."""
    best, key = "entropy", -1.0
    target = float(SPLIT["targets"]["false_switches_per_healthy_run"])
    for name, reps in replays_by_variant.items():
        sources = {r.source for r in reps}
        ok = all(
            not (sk := score([r for r in reps if r.source == s], lead_fraction=lead_fraction)).healthy
            or sk.false_rate <= target
            for s in sources
        )
        recall = score(reps, lead_fraction=lead_fraction).recall
        if ok and recall > key:
            best, key = name, recall
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pack", nargs="+", type=Path, help="pack these trainer run directories and exit")
    ap.add_argument("--part", choices=["calibration", "test", "both"], default="both")
    ap.add_argument("--sources", nargs="+", default=list(SOURCES), choices=list(SOURCES))
    ap.add_argument("--variant", nargs="+", default=["entropy"], choices=list(VARIANTS) + ["all"])
    ap.add_argument(
        "--select",
        action="store_true",
        help="replay every variant on the calibration part, name the candidate",
    )
    ap.add_argument("--hold-samples", type=float, default=48.0, help="the policy's hysteresis (48)")
    ap.add_argument("--out", type=Path, help="also write the tables (markdown) here")
    ap.add_argument("--runs", action="store_true", help="print every run's replay")
    a = ap.parse_args(argv)
    if a.pack:
        pack(a.pack)
        return 0
    parts = ("calibration", "test") if a.part == "both" else (a.part,)
    variants = list(VARIANTS) if "all" in a.variant or a.select else a.variant
    if a.select:
        parts = ("calibration",)
    t0 = time.time()
    runs: list[LabelledRun] = []
    for src in a.sources:
        gen = synthetic_runs(parts) if src == "synthetic" else SOURCES[src]()
        runs += [r for r in gen if r.part in parts]
    lf = float(SPLIT["lead_fraction"])
    counts = ", ".join(
        f"{s}: {sum(r.source == s for r in runs)} ({sum(r.source == s and r.failed for r in runs)} failed)"
        for s in a.sources
    )
    lines = [
        f"forecast skill, parts {'+'.join(parts)}, hold {a.hold_samples:g} rollouts; {len(runs)} runs ({counts}); "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.machine()} "
        f"Python {platform.python_version()} numpy {np.__version__}",
    ]
    by_variant = {}
    for v in variants:
        reps = replay(VARIANTS[v], runs, hold_samples=a.hold_samples)
        by_variant[v] = reps
        if a.runs:
            for r in reps:
                lead = "-" if r.lead_fraction is None else f"{r.lead_fraction:.2f}"
                print(
                    f"{v} {r.source:9s} {r.part:11s} {r.name:40s} fail {r.failure_samples!s:>9} "
                    f"{r.kind!s:17s} warn {r.warning!s:>9} lead {lead}"
                )
        lines += ["", f"variant `{v}`", "", *table(reps, lf)]
    if a.select:
        lines += ["", f"candidate (calibration rule of `select`): `{select(by_variant, lf)}`"]
    lines.append(f"({time.time() - t0:.0f} s)")
    print("\n".join(lines))
    if a.out:
        a.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
