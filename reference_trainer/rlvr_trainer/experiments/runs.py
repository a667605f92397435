"""The two-clock experiments: a batch sweep, the live two-clock schedule, and their comparison.

Layout under ``out``::

    sweep/b<batch>-s<seed>/      metrics.jsonl, decisions.jsonl, checkpoint.pt, config.json
    schedule/s<seed>/            the same, batch chosen live by TwoClockScheduler
    report/                      index.html / index.md / PNGs from rlvr_schedule.report

Every sweep run uses the same seed (prompts and sampling seeds) and the same sample budget;
the LR follows the square-root rule from ``(base_batch, base_lr)``. Runs that already finished
are read back instead of re-run, and ``resume=True`` continues interrupted ones.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlvr_schedule.records import Run
from rlvr_trainer.config import TrainConfig
from rlvr_trainer.experiments.rundirs import finished, read_run
from rlvr_trainer.experiments.tables import interval, num

__all__ = [
    "run_one",
    "sweep",
    "schedule",
    "compare",
    "report",
    "evidence",
    "evidence_report",
    "run_chunk",
    "fits_by_lr",
    "lr_grid",
    "policy_config",
    "summarize",
]

log = logging.getLogger("rlvr_trainer")


def run_one(
    cfg: TrainConfig,
    out_dir: str | Path,
    *,
    policy: Any = None,
    resume: bool = False,
    progress: bool = True,
    desc: str | None = None,
) -> Run:
    """Train one run; ``policy`` is a :class:`~rlvr_schedule.policy.PolicyConfig` for the live
    two-clock schedule, or a schedule file (a plan's static stages or a two_clock file; None:
    constant ``cfg.batch``). A finished run is read back, not re-run."""
    from rlvr_trainer.train import Trainer

    out_dir = Path(out_dir)
    if resume and finished(out_dir, cfg):
        return read_run(out_dir, desc, schedule=policy is not None)
    schedule = None
    if isinstance(policy, (str, Path)):
        from rlvr_schedule.policy import load_schedule

        schedule = load_schedule(policy)
    elif policy is not None:
        from rlvr_schedule.policy import TwoClockScheduler

        schedule = TwoClockScheduler(policy)
    with Trainer(cfg, out_dir, schedule=schedule, progress=progress, desc=desc) as trainer:
        trainer.train(resume=resume)
    return read_run(out_dir, desc, schedule=policy is not None)


def sweep(
    cfg: TrainConfig,
    batches: Sequence[int],
    out: str | Path,
    *,
    seeds: Sequence[int] = (0,),
    resume: bool = True,
    progress: bool = True,
) -> list[Run]:
    """Constant-batch runs over ``batches`` (same seed and sample budget, LR by the rule)."""
    runs = []
    for seed in seeds:
        for b in batches:
            name = f"b{b}-s{seed}"
            runs.append(
                run_one(
                    cfg.replace(batch=b, seed=seed),
                    Path(out) / "sweep" / name,
                    resume=resume,
                    progress=progress,
                    desc=f"sweep {name}",
                )
            )
    return runs


def policy_config(
    cfg: TrainConfig,
    *,
    batches: Sequence[int] | None = None,
    critical_batch: float | None = None,
    fit: Any = None,
    **overrides: Any,
):
    """The two-clock policy for this trainer: starts at ``cfg.batch`` (or at the batch cheapest at the price below
    the critical batch when one is given), LR by the same rule as the sweep. ``fit``: a
    :class:`~rlvr_schedule.clocks.SweepFit` whose clocks the policy takes, as a user would after a
    sweep: its critical batch (with the LR it was measured at) and its failure clock (failure
    samples, interval, exponent, batch and LR), which then drives the failure switches."""
    from rlvr_schedule.policy import BatchConstraints, PolicyConfig

    lo = min(batches) if batches else cfg.group_size
    hi = max(batches) if batches else cfg.max_batch
    kw: dict[str, Any] = dict(
        initial_batch=cfg.batch,
        base_lr=cfg.base_lr,
        base_batch=cfg.base_batch,
        lr_rule=cfg.lr_rule,
        constraints=BatchConstraints(group_size=cfg.group_size, min_batch=lo, max_batch=hi),
    )
    if fit is not None and critical_batch is None:
        critical_batch = getattr(fit, "critical_batch", None)
    if critical_batch is not None and math.isfinite(critical_batch) and critical_batch > 0:
        kw.update(initial_batch="auto", critical_batch=float(critical_batch))
    if fit is not None and hasattr(fit, "failure_clock"):
        kw.update(fit.failure_clock())  # empty when no sweep run failed
    kw.update(overrides)
    return PolicyConfig(**kw)


def schedule(
    cfg: TrainConfig,
    out: str | Path,
    *,
    seeds: Sequence[int] = (0,),
    policy: Any = None,
    resume: bool = True,
    progress: bool = True,
) -> list[Run]:
    """The two-clock policy live in the loop (one run per seed); ``policy``: its config, or a
    schedule file (:func:`run_one`)."""
    runs = []
    for seed in seeds:
        c = cfg.replace(seed=seed)
        runs.append(
            run_one(
                c,
                Path(out) / "schedule" / f"s{seed}",
                policy=policy or policy_config(c),
                resume=resume,
                progress=progress,
                desc=f"schedule s{seed}",
            )
        )
    return runs


def summarize(runs: Sequence[Run], target: float | None, metric: str = "reward_mean") -> str:
    """A markdown table: final reward, best held-out accuracy (where logged), samples to ``target``
    (on ``metric``, the curve the sweep fit read) and the batches used.

    Samples to target come from the core's :class:`~rlvr_schedule.clocks.ProgressClock`, the
    same estimate as the report's fitted-clocks table, so the two tables agree.
    """
    import numpy as np

    from rlvr_schedule.clocks import ProgressClock

    rows = [
        "| run | batches | samples | updates | final reward (last 10%) | best held-out accuracy "
        "| eval time | samples to target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        rew = r.array("reward_mean")
        tail = rew[-max(1, len(rew) // 10) :]
        acc = r.array("eval_accuracy")
        best = f"{float(np.nanmax(acc)):.3f}" if np.isfinite(acc).any() else "n/a"
        # the share of the run's wall time spent on held-out evaluation
        ev = float(np.nansum(r.array("eval_s")))
        wall = float(sum(np.nansum(r.array(k)) for k in ("rollout_s", "update_s", "push_s"))) + ev
        share = f"{ev / wall:.1%}" if ev > 0 and wall > 0 else "n/a"
        hit = "n/a"
        if target is not None and target == target:
            clock = ProgressClock(target=target, metric=metric).fit(r)
            hit = f"{clock.samples_to_target_:.0f}" if clock.reached_target_ else "not reached"
        batches = "->".join(str(b) for b in dict.fromkeys(int(x) for x in r.array("batch")))
        rows.append(
            f"| {r.name} | {batches} | {int(r.samples[-1])} | {len(r)} | {float(np.nanmean(tail)):.3f} "
            f"| {best} | {share} | {hit} |"
        )
    return "\n".join(rows)


def compare(
    cfg: TrainConfig,
    out: str | Path,
    *,
    batches: Sequence[int],
    seeds: Sequence[int] = (0,),
    resume: bool = True,
    progress: bool = True,
    use_fit: bool = True,
    fits_by_lr: dict[float, dict] | None = None,
    schedule_seeds: Sequence[int] | None = None,
) -> Path:
    """Sweep, then the live schedule (seeded with the sweep's critical batch when ``use_fit`` and
    the fit is finite, else from the online gradient-noise estimate), then the report; returns
    the report's index.html."""
    from rlvr_schedule.clocks import fit_sweep
    from rlvr_schedule.errors import RlvrScheduleError

    out = Path(out)
    sweep_seeds = list(seeds)
    sweep_runs = sweep(cfg, batches, out, seeds=seeds, resume=resume, progress=progress)
    try:
        fit = fit_sweep(sweep_runs)
    except ValueError as exc:
        raise RlvrScheduleError(
            f"cannot fit the clocks to the sweep ({exc}); raise --max-samples so every "
            "run has several updates"
        ) from exc
    crit = getattr(fit, "critical_batch", None) if use_fit else None
    if crit is not None and math.isfinite(crit) and crit > 0:
        # start at the batch cheapest at the price below the sweep's critical batch (policy/price.py)
        start = cfg.replace(batch=min(batches))
        policy = policy_config(start, batches=batches, critical_batch=crit, fit=fit if use_fit else None)
    else:
        # no finite critical batch within the sweep: start at base_batch and let the online
        # gradient-noise estimate (grad_norm_micro) pick the batch live
        start = cfg.replace(batch=cfg.base_batch)
        policy = policy_config(
            start,
            batches=batches,
            fit=fit if use_fit else None,
            initial_batch="auto",
            fallback_batch=cfg.base_batch,
        )
    seeds = list(seeds if schedule_seeds is None else schedule_seeds)  # the live schedule's seeds
    schedule(start, out, seeds=seeds, resume=resume, progress=progress, policy=policy)
    return report(out, batches=batches, seeds=sweep_seeds, schedule_seeds=seeds, fits_by_lr=fits_by_lr)


def _decisions(out: Path, seeds: Sequence[int]) -> tuple[list[dict], list[str]]:
    """The live schedule's decisions (all records) and one line per switch."""
    records, lines = [], []
    for seed in seeds:
        p = out / "schedule" / f"s{seed}" / "decisions.jsonl"
        if not p.exists():
            continue
        for line in p.read_text().splitlines():
            d = json.loads(line)
            records.append(d)
            if d.get("switched"):
                lines.append(
                    f"seed {seed}: step {d['step']} samples {d['samples']} -> batch {d['batch']} "
                    f"lr {d['lr']:.3g} ({d['reason']})"
                )
    return records, lines


def report(
    out: str | Path,
    *,
    batches: Sequence[int],
    seeds: Sequence[int] = (0,),
    schedule_seeds: Sequence[int] | None = None,
    fits_by_lr: dict[float, dict] | None = None,
    extra_sections: Sequence[tuple[str, str]] = (),
    title: str = "rlvr-trainer: sweep vs two-clock schedule",
) -> Path:
    """(Re)write the report of a :func:`compare` directory from its logs alone (no training):
    the clocks fitted to the sweep (the schedule's runs shown beside it, left out of the fit),
    a verdict per prediction, the schedule against the constants. Returns index.html."""
    from rlvr_schedule.clocks import fit_sweep
    from rlvr_schedule.report import write_report
    from rlvr_schedule.verdicts import verdicts

    out = Path(out)
    sweep_runs = [read_run(out / "sweep" / f"b{b}-s{s}", f"b{b}-s{s}") for s in seeds for b in batches]
    sched_seeds = [s for s in (seeds if schedule_seeds is None else schedule_seeds)]
    sched_runs = [
        read_run(out / "schedule" / f"s{s}", f"schedule s{s}", schedule=True)
        for s in sched_seeds
        if (out / "schedule" / f"s{s}" / "metrics.jsonl").exists()
    ]
    # batch-changing runs are reported but left out of B* and the failure exponent (fit_sweep)
    fit = fit_sweep(sweep_runs + sched_runs)
    records, lines = _decisions(out, sched_seeds)
    table = summarize(sweep_runs + sched_runs, getattr(fit, "target", None), fit.metric)
    return write_report(
        sweep_runs + sched_runs,
        out / "report",
        fit=fit,
        title=title,
        verdicts=verdicts(fit.to_dict(), decisions=records, fits_by_lr=fits_by_lr),
        glance=[("The live schedule and why", _schedule_why(fit, sched_runs, lines))],
        extra_sections=[("Schedule vs constant batches", table), *extra_sections],
    )


def _schedule_why(fit: Any, sched_runs: Sequence[Run], switch_lines: Sequence[str]) -> str:
    """Where the live schedule started against the sweep's B*, and each switch with its reason."""
    bstar = getattr(fit, "critical_batch", math.nan)
    f = getattr(fit, "failure_samples", math.nan)
    out = []
    for r in sched_runs:
        b0 = r.batch
        at = f"{b0 / bstar:.2g} x the sweep's B* ({bstar:,.0f})" if math.isfinite(bstar) and bstar > 0 else ""
        out.append(
            f"{r.name}: started at batch {b0}"
            + (f" = {at}, where per-rollout progress is near its small-batch best" if at else "")
        )
    if math.isfinite(f):
        out.append(f"failure clock: {f:,.0f} rollouts; switches to larger batches come before it")
    return "\n".join([*out, *(switch_lines or ["no switch"])])


def evidence(
    cfg: TrainConfig,
    out: str | Path,
    *,
    batches: Sequence[int],
    lrs: Sequence[float],
    seeds: Sequence[int] = (0, 1, 2),
    chunk_minutes: float = 45.0,
    progress: bool = True,
) -> Path | None:
    """The full experiment, resumable in chunks: constant-batch sweeps at every base LR in ``lrs``
    (``seeds`` each), then the live schedule against the constants at ``cfg.base_lr`` and the report
    with a verdict per prediction (B* ~ 1/lr from the per-LR fits).

    Stops starting runs once ``chunk_minutes`` have passed (a run in progress finishes; a killed one
    resumes from its checkpoint) and returns None; call again to continue. Returns the report's
    index.html when everything is done. ``out/lr<base_lr>/`` has :func:`compare`'s layout.
    """
    import time

    out = Path(out)
    lrs = sorted(set(float(x) for x in lrs) | {float(cfg.base_lr)})
    t0 = time.monotonic()
    todo = [(lr, seed, b) for seed in seeds for lr in lrs for b in batches]
    done, ran = run_chunk(cfg, out, todo, t0, chunk_minutes, progress, "evidence")
    if not done or (ran and (time.monotonic() - t0) / 60 > chunk_minutes):
        return None  # the rest (or the schedule runs and the report) in the next chunk
    fits = fits_by_lr(out, lrs=lrs, batches=batches, seeds=seeds)
    base = out / f"lr{cfg.base_lr:g}"
    compare(cfg, base, batches=batches, seeds=seeds, resume=True, progress=progress, fits_by_lr=fits)
    return evidence_report(out, base_lr=cfg.base_lr, lrs=lrs, batches=batches, seeds=seeds, fits=fits)


def run_chunk(
    cfg: TrainConfig,
    out: Path,
    todo: Sequence[tuple[float, int, int]],
    t0: float,
    chunk_minutes: float,
    progress: bool,
    what: str,
) -> tuple[bool, int]:
    """Train the (base LR, seed, batch) constant runs of ``todo`` not finished yet, under
    ``out/lr<base LR>/sweep/b<batch>-s<seed>``; stop starting runs once ``chunk_minutes`` have
    passed since ``t0`` (at least one run per call). Returns (every run finished, runs trained)."""
    import time

    ran = 0
    for i, (lr, seed, b) in enumerate(todo):
        c = cfg.replace(base_lr=lr, batch=b, seed=seed)
        d = out / f"lr{lr:g}" / "sweep" / f"b{b}-s{seed}"
        if finished(d, c):
            continue
        if ran and (time.monotonic() - t0) / 60 > chunk_minutes:
            log.warning(
                "%s: chunk of %.0f min used, %d of %d runs left; run again to continue",
                what,
                chunk_minutes,
                len(todo) - i,
                len(todo),
            )
            return False, ran
        run_one(c, d, resume=True, progress=progress, desc=f"lr {lr:g} b{b}-s{seed}")
        ran += 1
    return True, ran


def fits_by_lr(
    out: str | Path, *, lrs: Sequence[float], batches: Sequence[int], seeds: Sequence[int]
) -> dict[float, dict]:
    """The sweep fit (``SweepFit.to_dict()``) at each base LR of an :func:`evidence` directory,
    also written to ``out/fits_by_lr.json``."""
    from rlvr_schedule.clocks import fit_sweep

    out = Path(out)
    fits = {}
    for lr in lrs:
        d = out / f"lr{lr:g}" / "sweep"
        runs = [read_run(d / f"b{b}-s{s}", f"b{b}-s{s}") for s in seeds for b in batches]
        fits[float(lr)] = fit_sweep(runs).to_dict()
    (out / "fits_by_lr.json").write_text(json.dumps({f"{lr:g}": f for lr, f in fits.items()}, indent=2))
    return fits


def lr_grid(
    out: str | Path,
    *,
    lrs: Sequence[float],
    batches: Sequence[int],
    seeds: Sequence[int],
    schedule_dir: str | Path,
    target: float,
) -> str:
    """Markdown: every constant (base LR x batch) and the live schedule, over ``seeds``: final
    reward (last 10% of records, mean and min-max over seeds), rollouts to the shared ``target``
    (median over seeds; n/m: how many seeds reached it) and failures."""
    import numpy as np

    from rlvr_schedule.clocks import ProgressClock

    def row(label: str, runs: list[Run]) -> str:
        fin, stt, fails = [], [], 0
        for r in runs:
            rew = r.array("reward_mean")
            fin.append(float(np.nanmean(rew[-max(1, len(rew) // 10) :])))
            c = ProgressClock(target=target).fit(r)
            if c.reached_target_:
                stt.append(c.samples_to_target_)
            fails += c.failure_samples_ is not None
        med = (
            f"{float(np.median(stt)):,.0f} ({len(stt)}/{len(runs)})"
            if stt
            else f"not reached (0/{len(runs)})"
        )
        return (
            f"| {label} | {np.mean(fin):.3f} [{min(fin):.3f}, {max(fin):.3f}] | {med} | {fails}/{len(runs)} |"
        )

    out = Path(out)
    lines = [
        f"| run (seeds {', '.join(map(str, seeds))}) | final reward, mean [min, max] | "
        f"rollouts to reward {target:.3f} (median) | failed |",
        "|---|---|---|---|",
    ]
    for lr in lrs:
        for b in batches:
            runs = [read_run(out / f"lr{lr:g}" / "sweep" / f"b{b}-s{s}", f"b{b}-s{s}") for s in seeds]
            lines.append(row(f"constant B={b}, base LR {lr:g}", runs))
    sched = [
        read_run(Path(schedule_dir) / f"s{s}", f"schedule s{s}", schedule=True)
        for s in seeds
        if (Path(schedule_dir) / f"s{s}" / "metrics.jsonl").exists()
    ]
    if sched:
        path = " / ".join(
            "->".join(str(b) for b in dict.fromkeys(int(x) for x in r.array("batch"))) for r in sched
        )
        lines.append(row(f"two-clock schedule ({path})", sched))
    return "\n".join(lines)


def evidence_report(
    out: str | Path,
    *,
    base_lr: float,
    lrs: Sequence[float],
    batches: Sequence[int],
    seeds: Sequence[int],
    fits: dict[float, dict] | None = None,
) -> Path:
    """(Re)write the evidence report from the logs (no training): the base LR's sweep and
    schedule with verdicts, B* ~ 1/lr from the per-LR fits, and the LR grid of constants."""
    out = Path(out)
    lrs = sorted(set(float(x) for x in lrs) | {float(base_lr)})
    fits = fits or fits_by_lr(out, lrs=lrs, batches=batches, seeds=seeds)
    base = out / f"lr{base_lr:g}"
    target = float(fits[float(base_lr)]["target"])
    per_lr = "\n".join(
        f"- base LR {lr:g}: B* = {num(f.get('critical_batch'))} {interval(f.get('critical_batch_interval'))}, "
        f"failure exponent {num(f.get('failure_exponent'))} {interval(f.get('failure_exponent_interval'))}, "
        f"pooled failure {num(f.get('failure_samples'))} rollouts"
        for lr, f in sorted(fits.items())
    )
    grid = lr_grid(out, lrs=lrs, batches=batches, seeds=seeds, schedule_dir=base / "schedule", target=target)
    return report(
        base,
        batches=batches,
        seeds=seeds,
        fits_by_lr=fits,
        extra_sections=[("Fits at each base LR", per_lr), ("LR grid of constants vs the schedule", grid)],
        title=f"rlvr-trainer evidence: base LR {base_lr:g} sweep vs two-clock schedule, {len(lrs)} base LRs",
    )
