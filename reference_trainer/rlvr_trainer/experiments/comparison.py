"""The comparison: the Two Clocks recipe against what users would do instead, resumable.

At each base LR (the scan's choice with ``seeds`` each, its side LRs with ``side_seeds``):

1. a **short sweep** (constant batches over the sweep's range, ``sweep_fraction`` of the budget,
   ``sweep_seeds``), then two candidates given its clocks:

   - **planned** (the paper's recipe): :func:`rlvr_schedule.planner.plan_schedule` on the short
     sweep, the planned stages run as a static schedule;
   - **live**: the live default policy given the short sweep's fit
     (:func:`rlvr_trainer.experiments.runs.policy_config` with ``fit=``, as ``rlvr-trainer demo`` does);

2. the baselines, on the full budget: **constants** over the sweep's range (the layout of
   :func:`~rlvr_trainer.experiments.runs.evidence`, so the scan's and evidence's runs are reused); an
   **LR grid** at the plan's first batch (``grid_factors`` x the rule's LR there, and the LR the plan
   ends at); **LR decay** (cosine to 0 over the budget at the plan's first batch); a **linear batch
   ramp** over half the budget (:class:`~rlvr_schedule.policy.baselines.LinearRampSchedule`); the
   **noise-scale** rule (:class:`~rlvr_schedule.policy.baselines.NoiseScaleAdaptiveSchedule`);
   ``arms`` picks which of these schedule arms run.

Every arm is read on the progress clock's metric: held-out accuracy where every constant logged it
(the trainer's ``eval_accuracy``), else the training reward; cost to target is ``rollouts + rho x
updates`` at the price rho measured from the constants' step times (:class:`StepTimeFit`).

Layout under ``out``: ``lr<L>/sweep/b<B>-s<seed>`` (constants, any base LR), ``lr<L>/short/b<B>-s<seed>``
(the short sweep), ``lr<L>/<arm>/s<seed>`` (planned, live, decay, ramp, noise), ``lr<L>/plan.json``.
Runs that finished (same config, same arm settings) are read back, so the command resumes in chunks;
two processes may share one ``out`` (each run is claimed by a lock, :func:`_claim`).
:func:`comparison_report` writes ``compare.md`` / ``compare.json`` from the logs alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr_schedule.clocks.progress import EVAL_METRIC, progress_metric
from rlvr_schedule.policy.price import StepTimeFit
from rlvr_trainer.config import TrainConfig
from rlvr_trainer.experiments.rundirs import finished, read_run
from rlvr_trainer.experiments.runs import policy_config, run_one
from rlvr_trainer.experiments.tables import jsonable

__all__ = [
    "RunSpec",
    "COST",
    "design",
    "estimate_seconds",
    "comparison",
    "comparison_report",
    "cosine_decay",
]

log = logging.getLogger("rlvr_trainer")

#: Per-update cost t0 + t1 x batch (s) and an engine start (s) of a tiny-task run on the 2-core dev
#: machine (vLLM CPU; RESULTS 1a / 3b runs): for the estimate printed before starting, and the
#: noise-scale rule's goodput model.
COST = {"t0": 0.046, "t1": 0.00139, "start_s": 25.0}

#: Every arm's reward is smoothed over this fraction of the budget (in rollouts) before it is
#: measured: one window for all, so an arm that fails early is not smoothed less than one that
#: runs the whole budget (2%, the progress clock's "auto" width for a run that never fails).
SMOOTH_FRACTION = 0.02

#: The arms that run at the plan's first batch or follow a schedule (besides the constants).
SCHEDULE_ARMS = ("planned", "live", "decay", "ramp", "noise")


@dataclass(frozen=True)
class RunSpec:
    """One run of the design: ``arm`` is ``short``, ``constant``, ``grid`` or one of
    :data:`SCHEDULE_ARMS`; ``lr`` is the comparison's base LR it belongs to; ``batch`` /
    ``run_lr`` are set for constants (``run_lr``: the run's own base LR; a grid point's is only
    known once the plan is) and None where the plan decides."""

    lr: float
    arm: str
    seed: int
    batch: int | None = None
    run_lr: float | None = None
    grid: str | None = None  # grid point: "x0.5", "end" ...

    @property
    def phase(self) -> int:
        return 1 if self.arm == "short" else 2


@dataclass
class Design:
    """What :func:`comparison` runs: the specs in order (every short sweep first) and the knobs."""

    lrs: list[float]
    seeds: dict[float, list[int]]
    batches: list[int]
    sweep_seeds: list[int]
    sweep_samples: int
    grid_factors: list[float]
    arms: tuple[str, ...] = SCHEDULE_ARMS
    specs: list[RunSpec] = field(default_factory=list)


def design(
    cfg: TrainConfig,
    *,
    base_lr: float,
    side_lrs: Sequence[float] = (),
    batches: Sequence[int] = (8, 16, 32, 64, 128),
    seeds: Sequence[int] = (0, 1, 2, 3, 4),
    side_seeds: Sequence[int] = (0, 1, 2),
    sweep_seeds: Sequence[int] = (0,),
    sweep_fraction: float = 0.25,
    grid_factors: Sequence[float] = (0.25, 0.5, 2.0),
    arms: Sequence[str] = SCHEDULE_ARMS,
) -> Design:
    """The run list: per LR, the short sweep, then constants, the LR grid (its points counted,
    their LRs set once the plan is known), and the schedule ``arms``, seed by seed."""
    if not 0 < sweep_fraction <= 1:
        raise ValueError(f"sweep_fraction must be in (0, 1], got {sweep_fraction!r}")
    unknown = [a for a in arms if a not in SCHEDULE_ARMS]
    if unknown:
        raise ValueError(f"unknown arm(s) {unknown} (choose from {', '.join(SCHEDULE_ARMS)})")
    lrs = [float(base_lr), *(float(x) for x in side_lrs if float(x) != float(base_lr))]
    d = Design(
        lrs=lrs,
        seeds={lr: list(seeds if lr == float(base_lr) else side_seeds) for lr in lrs},
        batches=sorted(int(b) for b in batches),
        sweep_seeds=list(sweep_seeds),
        # at least 3 updates at the largest batch (what a fit needs), at most the budget
        sweep_samples=min(cfg.max_samples, max(3 * max(batches), int(cfg.max_samples * sweep_fraction))),
        grid_factors=[float(f) for f in grid_factors],
        arms=tuple(a for a in SCHEDULE_ARMS if a in arms),
    )
    for lr in lrs:
        d.specs += [RunSpec(lr, "short", s, batch=b, run_lr=lr) for s in d.sweep_seeds for b in d.batches]
    for lr in lrs:
        for s in d.seeds[lr]:
            d.specs += [RunSpec(lr, "constant", s, batch=b, run_lr=lr) for b in d.batches]
            d.specs += [RunSpec(lr, "grid", s, grid=f"x{f:g}") for f in d.grid_factors]
            d.specs.append(RunSpec(lr, "grid", s, grid="end"))
            d.specs += [RunSpec(lr, a, s) for a in d.arms]
    return d


def estimate_seconds(cfg: TrainConfig, d: Design, *, cost: dict[str, float] = COST) -> float:
    """Seconds for the whole design by the cost model (schedules and grid points at the sweep's
    second batch: between the small batches they start at and the large ones they may grow to)."""

    def run_s(samples: int, b: int) -> float:
        return cost["start_s"] + samples / b * (cost["t0"] + cost["t1"] * b)

    mid = d.batches[1] if len(d.batches) > 1 else d.batches[0]
    return sum(
        run_s(d.sweep_samples if s.arm == "short" else cfg.max_samples, s.batch or mid) for s in d.specs
    )


# --- the plan and the arms' schedules ----------------------------------------------------------


def _dir(out: Path, s: RunSpec, run_lr: float | None = None) -> Path:
    if s.arm in ("constant", "grid"):
        return out / f"lr{(run_lr if run_lr is not None else s.run_lr):g}" / "sweep" / f"b{s.batch}-s{s.seed}"
    if s.arm == "short":
        return out / f"lr{s.lr:g}" / "short" / f"b{s.batch}-s{s.seed}"
    return out / f"lr{s.lr:g}" / s.arm / f"s{s.seed}"


def _short_runs(out: Path, d: Design, lr: float) -> list:
    return [
        read_run(_dir(out, RunSpec(lr, "short", s, batch=b, run_lr=lr)), f"short b{b}-s{s}")
        for s in d.sweep_seeds
        for b in d.batches
    ]


def make_plan(cfg: TrainConfig, out: Path, d: Design, lr: float) -> dict[str, Any]:
    """``plan_schedule`` and ``fit_sweep`` on the LR's short sweep (written to ``lr<L>/plan.json``):
    the stages, the first batch and LR, the LR it ends at, the closed-form postponement. A sweep
    with no critical batch plans one stage at the smallest batch (what a user could run), noted."""
    from rlvr_schedule.clocks import fit_sweep
    from rlvr_schedule.errors import RlvrScheduleError
    from rlvr_schedule.planner import plan_schedule
    from rlvr_schedule.policy import BatchConstraints, rules
    from rlvr_schedule.theory.scaling import lr_for_batch

    runs = _short_runs(out, d, lr)
    fit = fit_sweep(runs)
    cons = BatchConstraints(group_size=cfg.group_size, min_batch=d.batches[0], max_batch=d.batches[-1])
    plan = None
    try:
        plan = plan_schedule(
            runs,
            fit=fit,
            constraints=cons,
            lr_rule=cfg.lr_rule,
            base_batch=cfg.base_batch,
            base_lr=lr,
            budget=cfg.max_samples,
        )
        body = plan.to_dict()
    except RlvrScheduleError as exc:
        b = d.batches[0]
        rule_lr = float(lr_for_batch(b, cfg.base_batch, lr, rule=cfg.lr_rule))
        body = {
            "stages": [{"batch": b, "lr": rule_lr, "until_samples": None}],
            "predicted": {},
            "notes": [f"no plan ({exc}): one stage at the smallest batch"],
        }
    st = body["stages"]
    b1, lr1 = int(st[0]["batch"]), float(st[0]["lr"])
    closed = None
    fail = body.get("predicted", {}).get("failure_samples")
    clock = None
    if plan is not None and plan.config is not None and plan.config.failure_samples is not None:
        # the plan's own failure clock (the policy's, built from its config), pooled: no lower bound
        pooled = dataclasses.replace(plan.config, failure_samples_interval=None)
        clock = rules.failure_clock(pooled, plan.config.base_batch or b1)
    if fail is not None and clock is not None and len(st) > 1:
        held = clock.clock(b1, lr1)
        closed = float(fail) - float(held)  # the plan's failure point against its first stage held
    body.update(
        first_batch=b1,
        first_lr=lr1,
        end_lr=float(st[-1]["lr"]),
        rule_lr_at_first=float(lr_for_batch(b1, cfg.base_batch, lr, rule=cfg.lr_rule)),
        closed_form_postponement=closed,
        sweep_fit=fit.to_dict(),
    )
    path = out / f"lr{lr:g}" / "plan.json"
    path.write_text(json.dumps(jsonable(body), indent=2))
    return body


def grid_base_lr(cfg: TrainConfig, plan: dict[str, Any], point: str) -> float:
    """The base LR (at ``cfg.base_batch``) whose rule gives the grid point's LR at the plan's first
    batch: ``x<f>``: f x the rule's LR there; ``end``: the LR the plan ends at."""
    from rlvr_schedule.theory.scaling import lr_for_batch

    b1 = plan["first_batch"]
    per_unit = float(lr_for_batch(b1, cfg.base_batch, 1.0, rule=cfg.lr_rule))  # LR at b1 per unit base LR
    target = plan["end_lr"] if point == "end" else float(point[1:]) * plan["rule_lr_at_first"]
    return float(f"{target / per_unit:.4g}")


def cosine_decay(batch: int, lr: float, budget: int, *, stages: int = 16, constraints: Any = None):
    """LR decay on the same budget: ``batch`` held, the LR a cosine from ``lr`` towards 0 in
    ``stages`` equal steps (a static schedule any host runs)."""
    from rlvr_schedule.policy import StaticSchedule
    from rlvr_schedule.records import Stage

    n = max(1, stages)
    cuts = [round(budget * k / n) for k in range(n + 1)]
    st = [
        Stage(
            batch=batch,
            lr=lr * 0.5 * (1 + math.cos(math.pi * (k + 0.5) / n)),
            reason=f"cosine decay step {k}",
            start_samples=cuts[k],
            until_samples=None if k == n - 1 else cuts[k + 1],
        )
        for k in range(n)
    ]
    return StaticSchedule(st, constraints)


def arm_schedule(
    cfg: TrainConfig, out: Path, d: Design, plan: dict[str, Any], s: RunSpec
) -> tuple[TrainConfig, Any, Any]:
    """(run config, schedule object or None, live policy or None) of a schedule arm at seed ``s.seed``."""
    from rlvr_schedule.policy import BatchConstraints, StaticSchedule
    from rlvr_schedule.policy.baselines import LinearRampSchedule, NoiseScaleAdaptiveSchedule
    from rlvr_schedule.theory.scaling import lr_for_batch

    lo, hi = d.batches[0], d.batches[-1]
    cons = BatchConstraints(group_size=cfg.group_size, min_batch=lo, max_batch=hi)
    c = cfg.replace(base_lr=s.lr, seed=s.seed)
    if s.arm == "planned":
        sched = StaticSchedule(plan["stages"], cons)
    elif s.arm == "live":
        from rlvr_schedule.clocks import fit_sweep
        from rlvr_schedule.policy import TwoClockScheduler

        fit = fit_sweep(_short_runs(out, d, s.lr))  # the clocks a user has after the short sweep
        crit = getattr(fit, "critical_batch", None)
        if crit is not None and math.isfinite(crit) and crit > 0:
            policy = policy_config(c.replace(batch=lo), batches=d.batches, fit=fit)
        else:  # as experiments.compare: no B* in the sweep, the online noise estimate picks the batch
            start = c.replace(batch=cfg.base_batch)
            policy = policy_config(
                start, batches=d.batches, fit=fit, initial_batch="auto", fallback_batch=cfg.base_batch
            )
        return c.replace(batch=TwoClockScheduler(policy).current.batch), None, policy
    elif s.arm == "decay":
        sched = cosine_decay(plan["first_batch"], plan["rule_lr_at_first"], cfg.max_samples, constraints=cons)
    elif s.arm == "ramp":
        sched = LinearRampSchedule(
            lo,
            lo,
            cfg.max_samples // 2,
            hi,
            base_lr=s.lr,
            base_batch=cfg.base_batch,
            lr_rule=cfg.lr_rule,
            constraints=cons,
        )
    elif s.arm == "noise":
        c = c.replace(
            micro_batch=min(c.micro_batch, cfg.group_size // 2 or 1)
        )  # grad_norm_micro at every batch
        sched = NoiseScaleAdaptiveSchedule(
            lo,
            base_lr=float(lr_for_batch(lo, cfg.base_batch, s.lr, rule=cfg.lr_rule)),
            t0=COST["t0"],
            t1=COST["t1"],
            lr_rule=cfg.lr_rule,
            max_batch=hi,
            constraints=cons,
        )
    else:
        raise ValueError(f"not a schedule arm: {s.arm!r}")
    return c.replace(batch=sched.current.batch), sched, None


def _fin(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


# --- running ------------------------------------------------------------------------------------

#: ``train(cfg, out_dir, schedule=..., policy=...)``: trains one run to ``cfg.max_samples`` (resuming).
Train = Callable[..., None]


def _train(cfg: TrainConfig, out_dir: Path, *, schedule: Any = None, policy: Any = None) -> None:
    from rlvr_trainer.train import Trainer

    if schedule is None:
        run_one(cfg, out_dir, policy=policy, resume=True, progress=False)
        return
    with Trainer(cfg, out_dir, schedule=schedule, progress=False) as trainer:
        trainer.train(resume=True)


def _settings(s: RunSpec, sched: Any, policy: Any) -> dict[str, Any]:
    return {"arm": s.arm, "schedule": repr(sched) if sched is not None else None, "policy": repr(policy)}


def _done(out_dir: Path, cfg: TrainConfig, settings: dict[str, Any] | None) -> bool:
    """Finished with this config (and, for a schedule arm, these settings); an unfinished run with
    other settings is set aside so that it starts over."""
    if settings is None:
        return finished(out_dir, cfg)
    side = out_dir / "arm.json"
    same = side.exists() and json.loads(side.read_text()) == settings
    if same and finished(out_dir, cfg):
        return True
    if out_dir.exists() and not same:
        import shutil

        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    side.write_text(json.dumps(settings))
    return False


def resolve(
    cfg: TrainConfig, out: Path, d: Design, s: RunSpec, plans: dict[float, dict]
) -> tuple[Path, TrainConfig, Any, Any, dict | None]:
    """(run directory, config, schedule, policy, arm settings or None for a constant) of ``s``;
    phase-2 specs need the LR's plan in ``plans``."""
    if s.arm == "short":
        c = cfg.replace(base_lr=s.lr, batch=s.batch, seed=s.seed, max_samples=d.sweep_samples)
        return _dir(out, s), c, None, None, None
    if s.arm == "constant":
        c = cfg.replace(base_lr=s.run_lr, batch=s.batch, seed=s.seed)
        return _dir(out, s), c, None, None, None
    plan = plans[s.lr]
    if s.arm == "grid":
        lr = grid_base_lr(cfg, plan, s.grid or "x1")
        b = plan["first_batch"]
        return (
            _dir(out, RunSpec(s.lr, "grid", s.seed, batch=b), lr),
            cfg.replace(base_lr=lr, batch=b, seed=s.seed),
            None,
            None,
            None,
        )
    c, sched, policy = arm_schedule(cfg, out, d, plan, s)
    return _dir(out, s), c, sched, policy, _settings(s, sched, policy)


def comparison(
    cfg: TrainConfig,
    out: str | Path,
    d: Design,
    *,
    chunk_minutes: float = 45.0,
    train: Train = _train,
    say: Callable[[str], None] = print,
) -> Path | None:
    """Run the design in chunks: stop starting runs once ``chunk_minutes`` have passed (at least one
    run per call) and return None; when every run is done, :func:`comparison_report`. Prints the run
    count and the estimated time first, and the runs left."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    say(
        f"comparison: {len(d.specs)} runs ({sum(s.phase == 1 for s in d.specs)} short-sweep runs first), "
        f"estimated {estimate_seconds(cfg, d) / 3600:.1f} h on the 2-core dev machine (cost model {COST})"
    )
    plans: dict[float, dict] = {}
    ran, held = 0, 0
    for i, s in enumerate(d.specs):
        if s.phase == 2 and s.lr not in plans:
            if not _short_sweep_done(cfg, out, d, s.lr):  # a short run held by another process
                held += 1
                continue
            plans[s.lr] = make_plan(cfg, out, d, s.lr)
        run_dir, c, sched, policy, settings = resolve(cfg, out, d, s, plans)
        with _claim(out, run_dir) as mine:
            if not mine:  # another process on the same --out is training it
                held += 1
                continue
            if _done(run_dir, c, settings):
                continue
            if ran and (time.monotonic() - t0) / 60 > chunk_minutes:
                say(
                    f"comparison: chunk of {chunk_minutes:g} min used, {len(d.specs) - i} of {len(d.specs)} runs left"
                )
                return None
            train(c, run_dir, schedule=sched, policy=policy)
            ran += 1
    if held:
        say(
            f"comparison: {held} runs held by another process on {out} (or waiting for a short sweep it "
            "holds); run the same command again when it ends"
        )
        return None
    return comparison_report(cfg, out, d)


def _short_sweep_done(cfg: TrainConfig, out: Path, d: Design, lr: float) -> bool:
    shorts = [x for x in d.specs if x.arm == "short" and x.lr == lr]
    return all(finished(*resolve(cfg, out, d, x, {})[:2]) for x in shorts)


@contextlib.contextmanager
def _claim(out: Path, run_dir: Path) -> Iterator[bool]:
    """An exclusive, non-blocking lock on ``run_dir`` (a file under ``out/.locks``, outside the run
    directory that :func:`_done` may clear): two processes on one ``--out`` (one per core, or
    different base LRs whose grid points meet) never train the same run; the lock goes with the
    process, so a killed chunk leaves none behind."""
    import fcntl

    locks = out / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    name = str(run_dir.resolve().relative_to(out.resolve())).replace("/", "__")
    with open(locks / f"{name}.lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --- the table ------------------------------------------------------------------------------------


def measure(
    run: Any,
    target: float,
    *,
    window: float | None = None,
    metric: str = "reward_mean",
    price: float | None = None,
) -> dict[str, Any]:
    """Rollouts, updates, cost (``rollouts + price x updates``; None without a price) and
    wall-clock (rollout + update seconds) to ``target`` on the progress clock's ``metric``, the
    best smoothed ``metric`` before failure (``best``), and the failure point (default detectors
    on the training signals). ``window``: the smoothing window in rollouts, the same for every arm
    (None: the clock's "auto", ~2% of each run's own pre-failure part, which smooths a run that
    fails early less, so its noise crosses the target sooner and peaks higher)."""
    import numpy as np

    from rlvr_schedule.clocks import FailureClock, ProgressClock
    from rlvr_schedule.policy.price import run_cost

    fail = FailureClock().fit(run).failure_samples_
    m: dict[str, Any] = {"rollouts": None, "updates": None, "cost": None, "wall_s": None}
    try:
        pc = ProgressClock(target=target, smooth_rollouts=window, metric=metric).fit(
            run, failure_samples=fail
        )
    except ValueError:  # failed before 3 evaluations: never at the target, its best is what it logged
        y = run.array(metric)
        keep = np.isfinite(y) & (run.array("samples") <= (fail if fail is not None else np.inf))
        m.update(best=float(y[keep].max()) if keep.any() else None, failure=fail)
        return m
    m.update(best=pc.best_reward_, failure=fail)
    if pc.reached_target_:
        samples = run.array("samples")
        k = min(int(np.searchsorted(samples, pc.samples_to_target_ - 1e-9, side="left")), len(samples) - 1)
        wall = np.nancumsum(run.array("rollout_s") + run.array("update_s"))
        m.update(rollouts=float(pc.samples_to_target_), updates=float(k + 1), wall_s=float(wall[k]))
        if price is not None and _fin(price):
            m["cost"] = run_cost(m["rollouts"], m["updates"], price)
    return m


def _t(xs: Sequence[float | None]) -> tuple[float, float, float, int]:
    """Mean, 95% t-interval over the finite values, and their count."""
    from rlvr_schedule.clocks._stats import t_quantile

    v = [float(x) for x in xs if _fin(x)]
    n = len(v)
    if not n:
        return math.nan, math.nan, math.nan, 0
    mean = sum(v) / n
    if n < 2:
        return mean, math.nan, math.nan, n
    sd = math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1))
    hw = float(t_quantile(0.975, n - 1)) * sd / math.sqrt(n)
    return mean, mean - hw, mean + hw, n


def _cell(xs: Sequence[float | None], fmt: str = "{:,.0f}") -> str:
    mean, lo, hi, n = _t(xs)
    if not n:
        return f"- (0/{len(xs)})"
    iv = f" [{fmt.format(lo)}, {fmt.format(hi)}]" if _fin(lo) else ""
    return f"{fmt.format(mean)}{iv} ({n}/{len(xs)})"


#: (key, format, which is better) of the measures, in the table's column order.
METRICS = (
    ("rollouts", "{:,.0f}", min),
    ("updates", "{:,.0f}", min),
    ("cost", "{:,.0f}", min),
    ("wall_s", "{:,.0f}", min),
    ("best", "{:.3f}", max),
)


def comparison_report(cfg: TrainConfig, out: str | Path, d: Design) -> Path:
    """(Re)write ``compare.md`` / ``compare.json`` from the logs (no training; runs not there yet
    are left out and counted). Per LR: the target (``fit_sweep``'s rule over the full-budget
    constants, read with the measures' window), each arm's measures over seeds (mean [95% t]
    (seeds that reached)), failures, (a) and (b) against the best constant and the best LR-grid
    point (paired differences over seeds), and the planned run's measured postponement of failure
    against the plan's closed form."""
    out = Path(out)
    md = [
        f"Comparison at base LRs {', '.join(f'{x:g}' for x in d.lrs)} (seeds: "
        + "; ".join(f"{x:g}: {len(d.seeds[x])}" for x in d.lrs)
        + f"), batches {d.batches}, {cfg.max_samples:,} rollouts per run, short sweep {d.sweep_samples:,} "
        f"rollouts x seeds {d.sweep_seeds}.",
        "",
    ]
    res: dict[str, Any] = {"lrs": {}}
    missing = 0
    for lr in d.lrs:
        plan_p = out / f"lr{lr:g}" / "plan.json"
        plan = json.loads(plan_p.read_text()) if plan_p.exists() else None
        arms: dict[str, list[tuple[int, Any]]] = {}
        for s in (x for x in d.specs if x.lr == lr and x.phase == 2):
            if plan is None:
                missing += 1
                continue
            if s.arm == "constant":
                label = f"constant B={s.batch}"
                run_dir = _dir(out, s)
            elif s.arm == "grid":
                glr = grid_base_lr(cfg, plan, s.grid or "x1")
                label = f"LR grid B={plan['first_batch']}, base LR {glr:g} ({s.grid})"
                run_dir = _dir(out, RunSpec(lr, "grid", s.seed, batch=plan["first_batch"]), glr)
            else:
                label, run_dir = s.arm, _dir(out, s)
            if not (run_dir / "metrics.jsonl").exists():
                missing += 1
                continue
            arms.setdefault(label, []).append((s.seed, read_run(run_dir, f"{label} s{s.seed}")))
        consts = [r for k, v in arms.items() if k.startswith("constant") for _, r in v]
        if not consts:
            md += [f"## base LR {lr:g}: no constant run yet", ""]
            continue
        window = SMOOTH_FRACTION * cfg.max_samples
        metric = progress_metric(consts)
        what = "held-out accuracy" if metric == EVAL_METRIC else "reward"
        target = _target(consts, window, metric)
        price = StepTimeFit.from_runs(consts, source=f"the constants' step times at base LR {lr:g}")
        rho = price.price_ if _fin(price.price_) else None
        meas = {
            k: {seed: measure(r, target, window=window, metric=metric, price=rho) for seed, r in v}
            for k, v in arms.items()
        }
        plo, phi = price.price_interval_
        rows = [
            f"## base LR {lr:g}: target {what} {target:.3f}",
            "",
            f"Progress read on {what} ({metric}), smoothed over {window:,.0f} rollouts in every arm; "
            "mean [95% t over seeds] (seeds that reached the target / seeds run). Cost to target: "
            f"rollouts + rho x updates at the price measured from {price.source_}: rho "
            + (
                f"{rho:.1f} [{_num1(plo)}, {_num1(phi)}] rollouts per update."
                if rho is not None
                else f"not identified ({price.unidentified_}); no cost column."
            )
            + " The failure point is the training signals' (default detectors).",
            "",
            f"Plan (short sweep): {_stages(plan)}; closed-form postponement "
            f"{_num(plan.get('closed_form_postponement'))} rollouts.",
            "",
            "| arm | rollouts to target | updates to target | cost to target | wall-clock s to target | "
            f"best {what} before failure | failed |",
            "|---|---|---|---|---|---|---|",
        ]
        for k, per in meas.items():
            ms = list(per.values())
            rows.append(
                f"| {k} | "
                + " | ".join(_cell([m[key] for m in ms], fmt) for key, fmt, _ in METRICS)
                + f" | {sum(m['failure'] is not None for m in ms)}/{len(ms)} |"
            )
        verdicts = _versus(meas)
        rows += ["", *verdicts["lines"], "", _postponement(meas, plan, cfg.max_samples), ""]
        md += rows
        res["lrs"][f"{lr:g}"] = {
            "metric": metric,
            "target": target,
            "price": price.to_dict(),
            "plan": plan,
            "measures": meas,
            "versus": verdicts["table"],
        }
    if missing:
        md.append(f"({missing} runs of the design not there yet.)")
    (out / "compare.json").write_text(json.dumps(jsonable(res), indent=2))
    path = out / "compare.md"
    path.write_text("\n".join(md) + "\n")
    return path


def _target(consts: Sequence[Any], window: float, metric: str = "reward_mean") -> float:
    """Half-way from the constants' initial reward (median) to the best pre-failure reward of any
    of them (:func:`~rlvr_schedule.clocks.fit_sweep`'s rule), both read with the same ``window``
    as the measures, so a constant that crashes early does not lift the target with its noise.
    A constant that failed before its third evaluation has no curve and is left out (NaN if all did)."""
    from rlvr_schedule.clocks import FailureClock, ProgressClock, default_target

    pcs = []
    for r in consts:
        try:
            pcs.append(
                ProgressClock(smooth_rollouts=window, metric=metric).fit(
                    r, failure_samples=FailureClock().fit(r).failure_samples_
                )
            )
        except ValueError:
            continue
    if not pcs:
        return math.nan
    return float(default_target([p.initial_reward_ for p in pcs], [p.best_reward_ for p in pcs]))


def _stages(plan: dict[str, Any] | None) -> str:
    if not plan:
        return "-"
    return " -> ".join(
        f"B={s['batch']} lr {s['lr']:.3g}"
        + (f" until {s['until_samples']:,}" if s.get("until_samples") else "")
        for s in plan["stages"]
    )


def _num(x: Any) -> str:
    return f"{x:,.0f}" if _fin(x) else "-"


def _num1(x: Any) -> str:
    return f"{x:.1f}" if _fin(x) else "-"


def _versus(meas: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """(a) planned and (b) live against the best constant and the best LR-grid point, per metric:
    the best by mean (among the arms that reached the target in every seed, where any did), then
    the paired difference over the seeds both have (arm - best)."""
    lines, table = [], {}
    for arm in ("planned", "live"):
        if arm not in meas:
            continue
        for family in ("constant", "LR grid"):
            cands = [k for k in meas if k.startswith(family)]
            for key, fmt, better in METRICS:
                # a best "to target" must reach it in every seed it ran (one lucky seed is no best)
                every = [k for k in cands if all(_fin(m[key]) for m in meas[k].values())]
                scored = [(k, _t([m[key] for m in meas[k].values()])[0]) for k in (every or cands)]
                scored = [(k, v) for k, v in scored if _fin(v)]
                if not scored:
                    continue
                best = better(scored, key=lambda kv: kv[1])[0]
                seeds = sorted(set(meas[arm]) & set(meas[best]))
                diff = [
                    meas[arm][s][key] - meas[best][s][key]
                    for s in seeds
                    if _fin(meas[arm][s][key]) and _fin(meas[best][s][key])
                ]
                mean, lo, hi, n = _t(diff)
                win = (hi < 0) if better is min else (lo > 0)
                lose = (lo > 0) if better is min else (hi < 0)
                verdict = "beats" if win else "loses to" if lose else "not separated from"
                table[f"{arm} vs best {family} ({key})"] = {
                    "best": best,
                    "diff": mean,
                    "interval": [lo, hi],
                    "n": n,
                    "verdict": verdict,
                }
                iv = f"[{fmt.format(lo)}, {fmt.format(hi)}]" if _fin(lo) else "[-]"
                lines.append(
                    f"- {arm} vs the best {family} on {key} ({best}): {verdict} "
                    f"(difference {fmt.format(mean) if _fin(mean) else '-'} {iv}, {n} paired seeds)"
                )
    return {"lines": lines, "table": table}


def _postponement(
    meas: dict[str, dict[int, dict[str, Any]]], plan: dict[str, Any] | None, budget: int
) -> str:
    """Measured postponement of failure by the planned schedule: its failure point minus that of the
    constant at the plan's first batch (same seed, the constant failed), against the closed form.
    Where the sweep has no constant at that batch, the LR grid's "end" point stands in when the plan
    holds its LR (then it is that batch at the plan's LR, held). Where the planned run did not fail
    within ``budget`` the postponement is censored: more than ``budget`` minus the constant's failure
    point, listed apart."""
    if not plan or "planned" not in meas:
        return "Postponement: -"
    b1 = plan["first_batch"]
    name = f"constant B={b1}"
    const = meas.get(name, {})
    held = plan.get("end_lr") is not None and math.isclose(plan["end_lr"], plan.get("first_lr", 0.0))
    if not const and held:
        end = [k for k in meas if k.startswith(f"LR grid B={b1},") and k.endswith("(end)")]
        if end:
            name, const = f"B={b1} held at the plan's LR (the grid's end point)", meas[end[0]]
    failed = {s: c["failure"] for s, c in const.items() if c["failure"] is not None and s in meas["planned"]}
    got = [
        meas["planned"][s]["failure"] - f
        for s, f in failed.items()
        if meas["planned"][s]["failure"] is not None
    ]
    beyond = [budget - f for s, f in failed.items() if meas["planned"][s]["failure"] is None]
    cens = ", ".join(f"> {x:,.0f}" for x in beyond) if beyond else "none"
    return (
        f"Postponement of failure, planned vs {name} (same seed, the constant "
        f"failed): both failed {_cell(got)}; planned did not fail within the budget (censored): {cens}; "
        f"closed form {_num(plan.get('closed_form_postponement'))} rollouts."
    )
