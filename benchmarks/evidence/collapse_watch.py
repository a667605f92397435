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
    python -m benchmarks.evidence.collapse_watch --latency --source real wsyn trainer   # both halves
    python -m benchmarks.evidence.collapse_watch --curve --part calibration --source real wsyn
    python -m benchmarks.evidence.collapse_watch --river --source real wsyn             # pip install river
    python -m benchmarks.evidence.collapse_watch --bound                                # information bound
    python -m benchmarks.evidence.collapse_watch --variants --part calibration --source real wsyn trainer
    python -m benchmarks.evidence.collapse_watch --latency --slide 1 6 --source real wsyn trainer

``--latency``: per labelled collapse, the first *raised* failure (the record a host acts on) in logged
rows and updates after the collapse point (a failure more than 6 rows before it counts as a false
failure), and false failures on every healthy run, per source and half. ``wsyn`` is the watch's own
synthetic set (``benchmarks/fixtures/watch_synthetic.py``: every update logged). ``--curve``: the
latency vs false-failure trade-off of the reward's CUSUM (``reward_fall``) over its evidence
threshold and allowance. ``--river``: the same table for river's ADWIN and Page-Hinkley drift
detectors on the reward stream (a downward drift is the alarm), defaults, beside the watch.
``--slide K H``: the same table with ``reward_fall``'s slow CUSUM on (``drift=(K, H)``).
``--bound``: per collapse, the information bound on its latency (how soon any detector that knew
the success rates could raise it without false failures on the healthy runs and their dips)
beside the watch's latency.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from benchmarks.evidence.forecast_skill import SOURCES  # the labelled runs, one loader for both studies
from rlvr_schedule.clocks.failure import RewardFall, default_detectors
from rlvr_schedule.clocks.failure.alarms import RAISED_WARNINGS, CollapseWatch
from rlvr_schedule.clocks.failure.skill import LabelledRun
from rlvr_schedule.records import Run, StepRecord


def wsyn_runs() -> Iterator[LabelledRun]:
    """The watch's own synthetic set (every update logged), labels as committed."""
    from benchmarks.fixtures import watch_synthetic as ws

    for part in ("calibration", "test"):
        for _seed, run, lab in ws.runs(part):
            c = lab["collapse_step"]
            fail = None if c is None else float(next(r.samples for r in run.records if r.step >= c))
            yield LabelledRun(run.name, run, fail, "reward_crash" if c else None, "wsyn", part)


SOURCES = {**SOURCES, "wsyn": wsyn_runs}
#: a raised failure more than this many logged rows before the labelled collapse point is a false one
EARLY_ROWS = 6

KINDS = (
    "entropy_collapse",
    "reward_crash",
    "reward_fall",
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
            fs = float(lr.failure_samples or 0.0)
            fail_row = next(i for i, r in enumerate(recs) if r.samples >= fs)
            for k, (_step, samples, row) in f.items():
                leads[(src, k)].append((fs - samples, fail_row - row))
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


# --- latency at the raised step --------------------------------------------------------------
Watcher = Callable[[Run], "int | None"]  # a run -> row of its first raised failure (None: none)


def watch_first_failure(make: Callable[[], CollapseWatch] = CollapseWatch) -> Watcher:
    def first(run: Run) -> int | None:
        w = make()
        for row, rec in enumerate(run.records):
            if any(a.kind == "failure" for a in w.update(rec)):
                return row
        return None

    return first


def latency_rows(runs: list[LabelledRun], first: Watcher) -> dict[str, Any]:
    """Per collapse: (name, rows, updates) from the collapse point to the first raised failure (None:
    never raised; rows < -EARLY_ROWS: a false failure); healthy runs with a raised failure."""
    coll: list[tuple[str, int | None, int | None]] = []
    false: list[str] = []
    n_healthy = 0
    for lr in runs:
        recs: list[StepRecord] = lr.run.records
        row = first(lr.run)
        if not lr.failed:
            n_healthy += 1
            if row is not None:
                false.append(lr.name)
            continue
        c = next(i for i, r in enumerate(recs) if r.samples >= float(lr.failure_samples or 0.0))
        if row is None:
            coll.append((lr.name, None, None))
        else:
            coll.append((lr.name, row - c, recs[row].step - recs[c].step))
    return {"collapses": coll, "false": false, "healthy": n_healthy}


def summary(res: dict[str, Any]) -> str:
    coll = res["collapses"]
    assert isinstance(coll, list)
    rows = [r for _, r, _ in coll if r is not None and r >= -EARLY_ROWS]
    ups = [u for _, r, u in coll if r is not None and r >= -EARLY_ROWS]
    early = sum(1 for _, r, _ in coll if r is not None and r < -EARLY_ROWS)
    missed = sum(1 for _, r, _ in coll if r is None)
    inside = sum(1 for r in rows if r <= 1)

    def mr(v: list) -> str:
        return f"{statistics.median(v):g} ({min(v):g} .. {max(v):g})" if v else "-"

    false = res["false"]
    assert isinstance(false, list)
    return (
        f"| {len(coll)} | {inside}/{len(coll)} | {sum(1 for r in rows if r > 2)} | {mr(rows)} | {mr(ups)} | "
        f"{early} | {missed} | {len(false)}/{res['healthy']} |"
    )


LAT_HEAD = (
    "| source | half | collapses | raised within 1 row | raised > 2 rows late | latency, rows: median (range) "
    "| latency, updates: median (range) | false (> 6 rows early) | never raised | false failures on healthy runs |\n"
    "|---|---|---|---|---|---|---|---|---|---|"
)


def latency_table(sources: list[str], parts: tuple[str, ...], first: Watcher) -> tuple[list[str], dict]:
    lines = [LAT_HEAD]
    per: dict[tuple[str, str], dict[str, Any]] = {}
    for src in sources:
        runs = list(SOURCES[src]())
        for part in parts:
            res = latency_rows([lr for lr in runs if lr.part == part], first)
            per[(src, part)] = res
            lines.append(f"| {src} | {part} {summary(res)}")
    return lines, per


def fall_variant(
    k: float, scale: float, drift: tuple[float, float] | None = None
) -> Callable[[], CollapseWatch]:
    """The default watch with the reward's CUSUM at allowance ``k`` and its evidence thresholds x
    ``scale`` (and its slow CUSUM at ``drift``)."""

    def make() -> CollapseWatch:
        dets = [
            RewardFall(k=k, h=40 * scale, tiers=((0.08, 6 * scale), (0.25, 20 * scale)), drift=drift)
            if d.name == "reward_fall"
            else d
            for d in default_detectors()
        ]
        return CollapseWatch(dets)

    return make


#: reward_fall variants tried on the calibration half (docs/RESULTS.md section 5a)
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "level memory 8": {"memory": 8},
    "slow CUSUM (1, 6)": {"drift": (1.0, 6.0)},
    "slow CUSUM (1, 5)": {"drift": (1.0, 5.0)},
}


def variants(sources: list[str], part: str) -> list[str]:
    """The latency table of each of ``VARIANTS`` on one half."""
    lines = []
    for label, kw in VARIANTS.items():

        def make(kw: dict[str, Any] = kw) -> CollapseWatch:
            return CollapseWatch(
                [RewardFall(**kw) if d.name == "reward_fall" else d for d in default_detectors()]
            )

        lines += ["", f"reward_fall {label}", LAT_HEAD]
        for src in sources:
            res = latency_rows([lr for lr in SOURCES[src]() if lr.part == part], watch_first_failure(make))
            lines.append(f"| {src} | {part} {summary(res)}")
    return lines


def curve(sources: list[str], part: str) -> list[str]:
    runs = [lr for src in sources for lr in SOURCES[src]() if lr.part == part]
    lines = [
        f"trade-off on the {part} half of {', '.join(sources)} (reward_fall: allowance k, thresholds x scale)",
        "| k | scale | false failures on healthy runs | collapses raised within 1 row | latency, rows: median | max | never raised |",
        "|---|---|---|---|---|---|---|",
    ]
    for k in (2.0, 3.0, 4.0):
        for scale in (0.5, 1.0, 1.5, 2.0):
            res = latency_rows(runs, watch_first_failure(fall_variant(k, scale)))
            coll = res["collapses"]
            assert isinstance(coll, list)
            rows = [r for _, r, _ in coll if r is not None and r >= -EARLY_ROWS]
            false = len(res["false"]) + sum(1 for _, r, _ in coll if r is not None and r < -EARLY_ROWS)
            med = f"{statistics.median(rows):g}" if rows else "-"
            lines.append(
                f"| {k:g} | {scale:g} | {false}/{res['healthy']} | {sum(1 for r in rows if r <= 1)}/{len(coll)} | "
                f"{med} | {max(rows) if rows else '-'} | {sum(1 for _, r, _ in coll if r is None)} |"
            )
    return lines


def river_first(kind: str) -> Watcher:
    """river's drift detector (defaults) on the reward stream; its first detected drift after which
    the mean of the rewards since the last drift is lower than before it is the alarm."""
    from river import drift

    def first(run: Run) -> int | None:
        det = drift.ADWIN() if kind == "adwin" else drift.PageHinkley(mode="down")
        hist: list[float] = []
        for row, rec in enumerate(run.records):
            r = rec.reward_mean
            if r != r:
                continue
            det.update(float(r))
            hist.append(float(r))
            if det.drift_detected:
                if kind == "page_hinkley":
                    return row
                k = max(2, len(hist) // 4)
                recent, before = hist[-5:], hist[-5 - k : -5]
                if before and statistics.fmean(recent) < statistics.fmean(before):
                    return row
        return None

    return first


#: healthy dips and collapses that look alike one row in (real runs: calibration and test halves)
LOOKALIKES = (
    ("trl_w1t_gate2_rho0p70_seed44", 90, "healthy: two records at 15% of its level, then back"),
    ("trl_gates_gate2_rho1p00_seed42", 92, "healthy: two records at 0, then back"),
    ("trl_exp1a_rho0p50_seed43", 7, "collapsed at step 40 (row 7)"),
    ("trl_exp1a_rho0p30_seed43", 16, "collapsed at step 85 (row 16)"),
    ("trl_exp1a_rho1p00_seed42", 26, "collapsed at step 135 (row 26)"),
)


def lookalikes() -> list[str]:
    """Rows -1 .. +3 around each pair's first low record: reward, the CUSUM's level, noise and
    evidence, and whether the default watch raised a failure there."""
    from benchmarks.fixtures.real_runs import load_real

    lines = [
        "| run | what | row | reward | level | noise a record | evidence (needs) | failure raised |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, at, what in LOOKALIKES:
        recs = load_real(name).records
        det = RewardFall()
        w = CollapseWatch()
        for row, rec in enumerate(recs[: at + 4]):
            det.update(rec)
            raised = any(a.kind == "failure" for a in w.update(rec))
            if row >= at - 1:
                lines.append(
                    f"| {name} | {what} | {row} | {rec.reward_mean:.3g} | {det.level:.3g} | {det.sigma:.3g} | "
                    f"{det.cusum:.3g} ({det._need:g}) | {'yes' if raised else ''} |"
                )
    return lines


# --- the information limit: how soon could ANY detector raise each collapse? ------------------------
#: the watch's synthetic healthy dips (its generator): 1-3 updates at 20-50% of the level
WSYN_DIPS = (3, 0.2, 0.5)
#: the real healthy dips at a collapse's cadence (40 rollouts a row): trl_exp1a_rho1p00_seed42 rows
#: 7-8 fell to 0.07 and 0.03 (3-8% of its level 0.88) and came back; trl_exp2_vanilla_rho1p0_seed43
#: stayed below half for 4 rows (down to 9%): the class below keeps only the first (2 rows, >= 3%)
REAL_DIPS = (2, 0.03, 0.5)


def kl_binom(p1: float, p0: float, n: int) -> float:
    """KL of Binomial(n, p1)/n from Binomial(n, p0)/n in nats: the evidence one record of a mean of
    ``n`` Bernoulli draws carries, on average, for rate ``p1`` against ``p0``."""
    import math

    eps = 1e-9
    p1, p0 = min(max(p1, eps), 1 - eps), min(max(p0, eps), 1 - eps)
    return n * (p1 * math.log(p1 / p0) + (1 - p1) * math.log((1 - p1) / (1 - p0)))


def kl_gauss(p1: float, p0: float, n: int) -> float:
    """The same in the normal approximation: (shift / sd)^2 / 2 with sd = sqrt(p0 (1 - p0) / n)."""
    return (p1 - p0) ** 2 * n / (2 * max(p0 * (1 - p0), 1e-9))


def own_noise_kl(rewards: list[float]) -> Callable[[float, float, int], float]:
    """The normal KL with the noise the run itself shows before the change (median |first
    difference| / 0.954 of its last 32 records) where that exceeds the binomial's."""
    import numpy as np

    d = np.abs(np.diff(np.asarray(rewards[-33:], dtype=float)))
    sd = float(np.median(d)) / 0.954 if d.size else 0.0

    def kl(p1: float, p0: float, n: int) -> float:
        return (p1 - p0) ** 2 / (2 * max(sd * sd, p0 * (1 - p0) / n, 1e-9))

    return kl


def bound_row(
    rates: list[float],
    n: list[int],
    start: int,
    level: float,
    log_arl: float,
    log_dips: float,
    dips: tuple[int, float, float] | None,
    kl: Callable[[float, float, int], float] = kl_binom,
) -> int | None:
    """First row at which the expected evidence (Lorden/Lai: a CUSUM needs log ARL / KL records)
    against every healthy explanation reaches its threshold: the run going on at ``level``
    (``log_arl``: no false alarm over all the healthy records) and, with ``dips`` = (longest, lowest,
    highest fraction of the level), a healthy dip still under way at that row (``log_dips``: none
    over the healthy runs). ``rates[i]`` is row i's success rate, the change begins at ``start``.
    None: never within the run. Any detector, knowing the rates, raises no sooner on average."""
    import numpy as np

    grid = [] if dips is None else [float(d) for d in np.linspace(dips[1], dips[2], 31)]
    stay = np.cumsum([kl(rates[i], level, n[i]) for i in range(start, len(rates))])
    for r in range(start, len(rates)):
        j = r - start
        if stay[j] < log_arl:
            continue
        ok = True
        for length in range(1, (0 if dips is None else dips[0]) + 1):
            before = stay[j - length] if j - length >= 0 else 0.0
            lo = max(start, r - length + 1)
            for d in grid:
                ev = before + sum(kl(rates[i], d * level, n[i]) for i in range(lo, r + 1))
                if ev < log_dips:
                    ok = False
                    break
            if not ok:
                break
        if ok:
            return r
    return None


def bound_table(parts: tuple[str, ...] = ("calibration", "test")) -> list[str]:
    """Per collapse of the watch's synthetic set and of the real TRL runs: the information bound on
    the latency (rows after the collapse point; noise only, and with the healthy dips) beside the
    watch's latency at its raised failure."""
    import math

    from benchmarks.fixtures import watch_synthetic as ws
    from benchmarks.fixtures.real_runs import load_real

    first = watch_first_failure()
    lines = [
        "| half | run | kind | rollouts a row | level -> floor | bound, noise only (normal approx.) | "
        "bound with the healthy dips | the same, the run's own noise | the watch | watch - bound |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    summary_rows: dict[tuple[str, str], list[tuple[int | None, ...]]] = defaultdict(list)
    for part in parts:
        seeds = list(ws.runs(part))
        healthy = [run for _s, run, lab in seeds if lab["collapse_step"] is None]
        log_arl = math.log(sum(len(r.records) for r in healthy))
        log_dips = math.log(len(healthy))
        for seed, run, lab in seeds:
            c = lab["collapse_step"]
            if c is None:
                continue
            _r, _l, p = ws.draw(seed)
            rates = [float(x) for x in p]
            start = next(i for i in range(1, len(rates)) if rates[i] < rates[i - 1] - 1e-12)
            level, cidx = rates[start - 1], c - 1
            n = [lab["batch"]] * len(rates)
            b0 = bound_row(rates, n, start, level, log_arl, log_dips, None)
            bg = bound_row(rates, n, start, level, log_arl, log_dips, None, kl_gauss)
            bd = bound_row(rates, n, start, level, log_arl, log_dips, WSYN_DIPS)
            bo = None  # the noise is the binomial's here (the run's own estimate is lumpy at B <= 16)
            w = first(run)
            summary_rows[(part, lab["kind"])].append(
                tuple(None if x is None else x - cidx for x in (b0, bd, w, bo))
            )
            lines.append(
                _bound_line(
                    part, run.name, lab["kind"], lab["batch"], level, rates[-1], cidx, b0, bg, bd, w, bo
                )
            )
        real = [lr for lr in SOURCES["real"]() if lr.part == part]
        h_real = [lr for lr in real if not lr.failed]
        log_arl_r = math.log(sum(len(lr.run.records) for lr in h_real))
        log_dips_r = math.log(len(h_real))
        for lr in real:
            if not lr.failed:
                continue
            recs = lr.run.records
            cidx = next(i for i, r in enumerate(recs) if r.samples >= float(lr.failure_samples or 0.0))
            rates = [float(r.reward_mean) for r in recs]
            n = [
                max(recs[i].samples - recs[i - 1].samples, 1) if i else recs[0].samples
                for i in range(len(recs))
            ]
            level = float(statistics.median(rates[max(0, cidx - 8) : cidx]))
            start = cidx
            while start > 1 and rates[start - 1] < 0.95 * level:  # a slide's first rows belong to it
                start -= 1
            b0 = bound_row(rates, n, start, level, log_arl_r, log_dips_r, None)
            bg = bound_row(rates, n, start, level, log_arl_r, log_dips_r, None, kl_gauss)
            bd = bound_row(rates, n, start, level, log_arl_r, log_dips_r, REAL_DIPS)
            bo = bound_row(
                rates, n, start, level, log_arl_r, log_dips_r, REAL_DIPS, own_noise_kl(rates[:start])
            )
            w = first(load_real(lr.name))
            summary_rows[(part, "real cliff")].append(
                tuple(None if x is None else x - cidx for x in (b0, bd, w, bo))
            )
            lines.append(
                _bound_line(part, lr.name, "real cliff", n[cidx], level, rates[-1], cidx, b0, bg, bd, w, bo)
            )
    lines += [
        "",
        "| half | kind | collapses | bound with the dips: median (range) | bound > 2 rows | bound > 1 row | "
        "with the run's own noise: median (range), > 2 rows | the watch: median (range) | watch > bound + 1 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (part, kind), v in summary_rows.items():
        bd_ = [x[1] for x in v if x[1] is not None]
        wl = [x[2] for x in v if x[2] is not None]
        late = sum(1 for x in v if x[1] is not None and x[2] is not None and x[2] > x[1] + 1)
        bo_ = [x[3] for x in v if x[3] is not None]

        def mr(a: list) -> str:
            return f"{statistics.median(a):g} ({min(a)} .. {max(a)})" if a else "-"

        lines.append(
            f"| {part} | {kind} | {len(v)} | {mr(bd_)} | {sum(1 for x in bd_ if x > 2)} | "
            f"{sum(1 for x in bd_ if x > 1)} | {f'{mr(bo_)}, {sum(1 for x in bo_ if x > 2)}' if bo_ else '-'} | {mr(wl)} | {late} |"
        )
    return lines


def _bound_line(
    part: str,
    name: str,
    kind: str,
    b: int,
    level: float,
    floor: float,
    cidx: int,
    b0: int | None,
    bg: int | None,
    bd: int | None,
    w: int | None,
    bo: int | None,
) -> str:
    def rel(x: int | None) -> str:
        return "never" if x is None else f"{x - cidx:+d}"

    gap = "-" if w is None or bd is None else f"{w - bd:+d}"
    return (
        f"| {part} | {name} | {kind} | {b} | {level:.2f} -> {floor:.2f} | {rel(b0)} ({rel(bg)}) | {rel(bd)} | {rel(bo) if kind == 'real cliff' else '-'} | "
        f"{rel(w)} | {gap} |"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("calibration", "test"), default="calibration")
    p.add_argument("--source", nargs="*", default=["trainer", "real", "synthetic"], choices=sorted(SOURCES))
    p.add_argument("--real-checkpoints", action="store_true")
    p.add_argument("--latency", action="store_true", help="latency at the raised step, both halves")
    p.add_argument("--curve", action="store_true", help="latency vs false failures of reward_fall")
    p.add_argument("--river", action="store_true", help="river's ADWIN and Page-Hinkley beside the watch")
    p.add_argument("--per-run", action="store_true", help="with --latency: each collapse's latency")
    p.add_argument("--lookalike", action="store_true", help="healthy dips beside collapses, row by row")
    p.add_argument("--slide", nargs=2, type=float, metavar=("K", "H"), help="with --latency: drift=(K, H)")
    p.add_argument("--variants", action="store_true", help="reward_fall's variants tried, on --part")
    p.add_argument("--bound", action="store_true", help="each collapse's information bound beside the watch")
    a = p.parse_args(argv)
    if a.variants:
        print("\n".join(variants(a.source, a.part)))
        return 0
    if a.bound:
        print("\n".join(bound_table()))
        return 0
    if a.lookalike:
        print("\n".join(lookalikes()))
        return 0
    if a.latency or a.river:
        watchers = {"the watch (first raised failure)": watch_first_failure()}
        if a.slide:
            slide = (a.slide[0], a.slide[1])
            watchers[f"the watch, reward_fall's slow CUSUM at {slide}"] = watch_first_failure(
                fall_variant(3.0, 1.0, slide)
            )
        if a.river:
            watchers = {
                **watchers,
                "river ADWIN": river_first("adwin"),
                "river PageHinkley": river_first("page_hinkley"),
            }
        for label, first in watchers.items():
            lines, per = latency_table(a.source, ("calibration", "test"), first)
            print(f"\n{label}")
            print("\n".join(lines))
            if a.per_run:
                for (src, part), res in per.items():
                    for name, rows, ups in res["collapses"]:
                        print(f"  {src} {part} {name}: {rows} rows, {ups} updates")
                    for name in res["false"]:
                        print(f"  {src} {part} {name}: false failure")
        return 0
    if a.curve:
        print("\n".join(curve(a.source, a.part)))
        return 0
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
