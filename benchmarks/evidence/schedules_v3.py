"""Policy v3 against its baselines on the v3 synthetic tasks (docs/RESULTS.md section 3).

Tasks: :data:`rlvr_schedule.synthetic.tasks.TASKS` (committed before the policy was run on them).
Per task and seed (paired: every schedule sees the same random numbers):

- constants: every batch of the 16x range at the sweep's LR (the square-root rule from lr0 at 64);
- the same constants with LR decay on the same trigger (the v3 policy pinned at one batch: each
  failure trigger divides the LR by sqrt 2);
- a 3-point LR grid of constants: each batch at 1, 1/2 and 1/4 x the sweep's LR;
- the linear ramp 16 -> 256 over F/2 rollouts and the noise-scale rule (Pollux goodput, sqrt LR);
- the v3 two-clock policy with its defaults (start 1/4 x the known B* of 64 = 16);
- "two-clock (sweep clock)", the policy the bar is about: PolicyConfig's defaults (its operating point, not the
  smallest batch) with the known B* and the sweep's failure clock (a separate sweep:
  the five constants on seeds 90000 and 90001, fitted by ``FailureScalingFit`` with the runs that
  did not fail censored at 2F) as its failure trigger.

Tasks: the section 3a tasks (seeds 0..19) and the held-out tasks of ``heldout_tasks.py`` (h1-h21
in seven sets, each set with its own committed seeds; h4-h21 only when named in ``--tasks``), each
with its own B* and F.

Measures: best smoothed reward before failure (collapse or crash), smoothed reward at F, 1.5F and
2F rollouts, rollouts and updates to the target (the smoothed reward reaching 0.9 x the best
constant's mean best-before-failure reward). Smoothing: the trailing 5% of F rollouts.
Non-inferiority: the lower 95% t-bound of the paired difference >= -0.01.

With ``--prices 4,16,64`` the policy told each price (``rollouts_per_update``) runs beside the
default, and the priced bar is reported per task and price (:func:`priced_bar`): cost to the target,
rollouts + rho x updates (a seed that never reaches it charged its whole run), against the constant
cheapest at that price, c*(rho); the best reward against c*(rho) and against the best-reward constant.
The policy is told the task's true B* and the failure clock fitted to the sweep's true failure times;
with ``--fitted`` it is configured as a user would configure it instead: B* and the failure clock from
:func:`~rlvr_schedule.clocks.fit_sweep` (what ``rlvr-schedule fit`` reports) on that same sweep, its
failures read from the runs' own signals.

    python -m benchmarks.evidence.schedules_v3 --seeds 20 [--tasks c2_drift3,...] [--json out.json]
    python -m benchmarks.evidence.schedules_v3 --lean --seeds 20 --prices 4,16,64 --tasks ... --md F.md
    python -m benchmarks.evidence.schedules_v3 --lean --fitted --seeds 20 --prices 4,16,64 --tasks ...
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.evidence.heldout_tasks import HELDOUT, SETS
from rlvr_schedule.clocks import FailureScalingFit, fit_sweep
from rlvr_schedule.clocks._stats import t_quantile
from rlvr_schedule.policy import BatchConstraints, PolicyConfig, TwoClockScheduler
from rlvr_schedule.policy.baselines import LinearRampSchedule, NoiseScaleAdaptiveSchedule
from rlvr_schedule.records import BatchSchedule
from rlvr_schedule.synthetic import SyntheticEnvironment
from rlvr_schedule.synthetic.tasks import BATCHES, COMMON, TASKS
from rlvr_schedule.theory.scaling import lr_for_batch

GROUP = 8
SWEEP_SEEDS = (90_000, 90_001)
POLICY = "two-clock (sweep clock)"
LR0, BASE = COMMON["lr0"], COMMON["base_batch"]
F = COMMON["failure_samples"]
BUDGETS = (1.0, 1.5, 2.0)
LR_GRID = (1.0, 0.5, 0.25)


def smoothed(run, window: float) -> tuple[np.ndarray, np.ndarray]:
    """(rollouts, trailing-window mean reward weighted by batch) per record."""
    r = np.nan_to_num(run.array("reward_mean"), nan=0.0)
    b = run.array("batch")
    cs = np.concatenate([[0.0], np.cumsum(b)])
    cr = np.concatenate([[0.0], np.cumsum(b * r)])
    ends = np.arange(1, len(r) + 1)
    starts = np.clip(np.searchsorted(cs, cs[1:] - window, side="right") - 1, 0, ends - 1)
    return cs[1:], (cr[ends] - cr[starts]) / (cs[ends] - cs[starts])


#: A switch's label by its trigger (``Decision.trigger``); a schedule with no triggers (a baseline,
#: a static plan) switches as "stage".
KIND_LABELS = {
    "track_up": "track up",
    "track_down": "track down",
    "failure_clock": "failure clock",
    "forecast": "failure forecast",
    "alarm": "alarm",
    "auto": "auto",
}


def kind(trigger: str) -> str:
    """A switch's label, from the kind of its trigger (the reason is for people)."""
    return KIND_LABELS.get(trigger, trigger or "stage")


#: --lean: only the sweep-LR constants, v3 and the sweep-clock policy (no LR grid, decay, ramp, noise-scale)
LEAN = False
FRACTION_USED: float = math.nan
#: --prices: the policy told each price (rollouts per update) runs beside the default, and the
#: priced bar (cost to target at the price against the constant cheapest at it) is reported
PRICES: tuple[float, ...] = ()
#: --policy-kw: PolicyConfig overrides for the sweep-clock policy (post-hoc variants, not defaults)
POLICY_KW: dict[str, Any] = {}
#: --clock-fraction: the sweep-clock policy's failure_clock_fraction (None: the policy's default)
CLOCK_FRACTION: float | None = None
#: diagnostics (``priced_rule.py``): ``(task, sweep clock) -> schedule`` run in the policy's place; a
#: schedule with a ``bind(env)`` method is handed each seed's task before the run (an oracle's state)
POLICY_MAKER: Callable[[str, dict[str, Any]], BatchSchedule] | None = None


#: each task table with its committed seeds (None: seeds 0.. for the section 3a tasks)
_TASK_SETS: tuple[tuple[dict[str, dict[str, Any]], tuple[int, ...] | None], ...] = (
    (TASKS, None),
    *SETS.values(),
)


def _task_set(name: str) -> tuple[dict[str, dict[str, Any]], tuple[int, ...] | None]:
    for table, seeds in _TASK_SETS:
        if name in table:
            return table, seeds
    raise KeyError(f"unknown task {name!r}")


def task_kw(name: str) -> dict[str, Any]:
    return dict(COMMON, **_task_set(name)[0][name])


def task_seeds(name: str, seeds: int) -> list[int]:
    """The task's seeds: 0.. for the section 3a tasks, each held-out set's own committed range."""
    committed = _task_set(name)[1]
    return list(range(seeds)) if committed is None else list(committed[:seeds])


def sweep_clock(name: str) -> dict[str, Any]:
    """The failure-clock knobs a user's sweep would give: the constants of the 16x range on two
    seeds of their own, fitted with the runs that did not fail censored at their length."""
    kw = task_kw(name)
    horizon = max(BUDGETS) * kw["failure_samples"]
    runs, fails = [], []
    for seed in SWEEP_SEEDS:
        for b in BATCHES:
            env = SyntheticEnvironment(seed=seed, **kw)
            runs.append(env.run_constant(b, horizon, lr=lr_for_batch(b, BASE, LR0)))
            fails.append(env.collapsed_at)
    if FITTED:
        return _fitted_clock(name, runs)
    fit = FailureScalingFit().fit(runs, fails, [False] * len(runs))
    # the batch with the best mean pre-failure reward in this sweep (for --floor-best-reward)
    bests: dict[int, list[float]] = {}
    for run, fail in zip(runs, fails, strict=True):
        s, r = smoothed(run, 0.05 * kw["failure_samples"])
        before = r[s <= fail] if fail is not None else r
        bests.setdefault(run.batch, []).append(float(before.max()) if before.size else float(r[0]))
    SWEEP_BEST[name] = max(bests, key=lambda b: float(np.mean(bests[b])))
    alo, ahi = fit.alpha_interval_
    # as SweepFit.failure_clock(): the fitted alpha only where its interval excludes 0
    alpha = fit.alpha_ if math.isfinite(fit.alpha_) and (alo > 0 or ahi < 0) else 0.0
    lo, hi = fit.failure_samples_interval_
    return dict(
        failure_samples=fit.failure_samples_,
        failure_samples_interval=(lo, hi) if math.isfinite(lo) else None,
        failure_exponent=alpha,
        failure_batch=fit.batch_,
        failure_lr=lr_for_batch(fit.batch_, BASE, LR0),
    )


def _fitted_clock(name: str, runs: list[Any]) -> dict[str, Any]:
    """``--fitted``: B* and the failure clock as ``rlvr-schedule fit`` gives them from the task's sweep
    (:func:`~rlvr_schedule.clocks.fit_sweep`: failures from the runs' own signals, the target half-way
    to the best reward); B* stored in ``FITTED_BSTAR`` (None: not identified, the policy starts on
    ``auto``)."""
    fit = fit_sweep(runs)
    bstar = fit.critical_batch
    FITTED_BSTAR[name] = float(bstar) if math.isfinite(bstar) and bstar > 0 else None
    FITTED_INFO[name] = dict(
        critical_batch=FITTED_BSTAR[name],
        critical_batch_interval=[float(x) for x in fit.critical_batch_interval],
        true_critical_batch=float(task_kw(name)["critical_batch"]),
        unidentified=fit.unidentified(),
    )
    return fit.failure_clock()


#: --fitted: the policy configured as a user would, its B* and failure clock from ``fit`` on the
#: task's sweep (seeds 90000-90001) instead of the task's true B* and the true failure times
FITTED = False
FITTED_BSTAR: dict[str, float | None] = {}
FITTED_INFO: dict[str, dict[str, Any]] = {}


def policy_critical_batch(name: str) -> float | None:
    """The B* the policy is told: the fitted one with ``--fitted``, else the task's true B*."""
    return FITTED_BSTAR.get(name) if FITTED else float(task_kw(name)["critical_batch"])


#: --floor-best-reward (an experiment of an earlier tuning round): the policy never runs below the batch
#: with the best pre-failure reward in the task's sweep (``SWEEP_BEST``, filled by ``sweep_clock``)
FLOOR = False
SWEEP_BEST: dict[str, int] = {}


def v3(batch_lo: int, hi: int, bstar: float | None = 64.0, floor: int = 1, **kw: Any) -> TwoClockScheduler:
    cfg = dict(
        initial_batch="auto",
        critical_batch=bstar,
        # operating fraction batch_lo / B* (no B* known: the policy's own default)
        sample_tolerance=None if bstar is None else batch_lo / (2 * bstar - batch_lo),
        base_batch=BASE,
        base_lr=LR0,
        constraints=BatchConstraints(group_size=GROUP, min_batch=floor, max_batch=hi),
    )
    cfg.update(kw)
    return TwoClockScheduler(PolicyConfig(**cfg))


#: the policy's default; --switch-fraction changes it (for both v3 and the decay baseline)
SWITCH_FRACTION = 0.25


def makers(name: str, clock: dict[str, Any]) -> dict[str, Callable[[], BatchSchedule | tuple[int, float]]]:
    lo, hi = BATCHES[0], BATCHES[-1]
    bstar = float(task_kw(name)["critical_batch"])
    F = float(task_kw(name)["failure_samples"])
    out: dict[str, Callable[[], Any]] = {}

    def constant(b: int, g: float) -> tuple[int, float]:
        return b, g * lr_for_batch(b, BASE, LR0)

    def decay(b: int) -> BatchSchedule:
        return TwoClockScheduler(
            PolicyConfig(
                initial_batch=b,
                base_batch=BASE,
                base_lr=LR0,
                track_critical_batch=False,
                failure_switch_fraction=SWITCH_FRACTION,
                constraints=BatchConstraints(group_size=GROUP, min_batch=b, max_batch=b),
            )
        )

    for b in BATCHES:
        for g in LR_GRID:
            out[f"constant {b} x{g:g} LR"] = functools.partial(constant, b, g)
        out[f"decay {b}"] = functools.partial(decay, b)
    out["linear ramp"] = lambda: LinearRampSchedule(
        lo,
        lo,
        int(F // 2),
        hi,
        base_lr=LR0,
        base_batch=BASE,
        constraints=BatchConstraints(group_size=GROUP, max_batch=hi),
    )
    out["noise-scale"] = lambda: NoiseScaleAdaptiveSchedule(
        lo,
        base_lr=lr_for_batch(lo, BASE, LR0),
        t0=40.0,
        t1=1.0,
        lr_rule="sqrt",
        max_batch=hi,
        constraints=BatchConstraints(group_size=GROUP, max_batch=hi),
    )
    out["v3 two-clock"] = lambda: v3(lo, hi, bstar, failure_switch_fraction=SWITCH_FRACTION, forecast="on")
    # the sweep-clock policy runs PolicyConfig's default operating point (v3 starts at the smallest batch)
    extra: dict[str, Any] = {"sample_tolerance": PolicyConfig.sample_tolerance}
    if CLOCK_FRACTION is not None:
        extra["failure_clock_fraction"] = CLOCK_FRACTION
    extra.update(POLICY_KW)
    floor = SWEEP_BEST[name] if FLOOR else 1
    told = policy_critical_batch(name)  # the true B*, or with --fitted the sweep's fit
    out[POLICY] = lambda: v3(lo, hi, told, floor, **clock, **extra)
    if POLICY_MAKER is not None:
        out[POLICY] = lambda: POLICY_MAKER(name, clock)

    def at_price(rho: float) -> BatchSchedule:
        return v3(lo, hi, told, floor, **clock, **{**extra, "rollouts_per_update": rho})

    for rho in PRICES:
        out[priced(rho)] = functools.partial(at_price, rho)
    if LEAN:  # the lean comparison only: the sweep's constants, v3 (forecast on) and the policy
        keep = (
            {f"constant {b} x1 LR" for b in BATCHES} | {"v3 two-clock", POLICY} | {priced(r) for r in PRICES}
        )
        out = {k: v for k, v in out.items() if k in keep}
    return out


def priced(rho: float) -> str:
    """The label of the policy told the price ``rho``."""
    return f"{POLICY} rho={rho:g}"


def run_task(name: str, seeds: int) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    kw = task_kw(name)
    F = kw["failure_samples"]
    window = 0.05 * F
    horizon = max(BUDGETS) * F
    clock = sweep_clock(name)
    curves: dict[str, list[dict[str, Any]]] = {}
    seed_list = task_seeds(name, seeds)
    for seed in seed_list:
        env = SyntheticEnvironment(seed=seed, **kw)
        for label, make in makers(name, clock).items():
            obj = make()
            if hasattr(obj, "bind"):
                obj.bind(env)
            if isinstance(obj, tuple):
                run = env.run_constant(obj[0], horizon, lr=obj[1])
                switches, kinds, first_clock = 0, [], None
            else:
                run = env.run(obj, horizon)
                switches = sum(d.switched for d in env.decisions)
                kinds = [kind(d.trigger) for d in env.decisions if d.switched]
                first_clock = next(
                    (d.samples for d in env.decisions if d.switched and d.trigger == "failure_clock"),
                    None,
                )
            s, r = smoothed(run, window)
            fail = env.collapsed_at
            before = r[s <= fail] if fail is not None else r
            curves.setdefault(label, []).append(
                dict(
                    s=s,
                    r=r,
                    steps=np.arange(1, len(s) + 1),
                    fail=fail,
                    cause=env.crash_cause,
                    best=float(before.max()) if before.size else float(r[0]),
                    switches=switches,
                    kinds=kinds,
                    first_clock=first_clock,
                    at={f: float(r[min(np.searchsorted(s, f * F), len(r) - 1)]) for f in BUDGETS},
                    total=(float(s[-1]), float(len(s))),
                )
            )
    return curves, clock


def t_ci(x: np.ndarray) -> tuple[float, float, float]:
    m = float(np.mean(x))
    if len(x) < 2:
        return m, math.nan, math.nan
    h = float(t_quantile(0.975, len(x) - 1) * np.std(x, ddof=1) / math.sqrt(len(x)))
    return m, m - h, m + h


def to_target(c: dict[str, Any], target: float) -> tuple[float, float]:
    hit = np.flatnonzero(c["r"] >= target)
    if not hit.size or (c["fail"] is not None and c["s"][hit[0]] > c["fail"]):
        return math.nan, math.nan
    return float(c["s"][hit[0]]), float(c["steps"][hit[0]])


def _nanmean(x: np.ndarray) -> float | None:
    return None if np.isnan(x).all() else float(np.nanmean(x))


def closed_form_switches(name: str, clock: dict[str, Any]) -> dict[str, float]:
    """The closed-form bound on the median switches per run: the failure switches the sweep's clock
    predicts within the horizon (no other switch), plus log_track_step(B* rise), plus 1."""
    from rlvr_schedule.policy.triggers import FailureClockTrigger, next_failure_stage

    kw = task_kw(name)
    # the sweep-clock policy runs PolicyConfig's default operating point (v3 starts at the smallest batch)
    extra: dict[str, Any] = {"sample_tolerance": PolicyConfig.sample_tolerance}
    if CLOCK_FRACTION is not None:
        extra["failure_clock_fraction"] = CLOCK_FRACTION
    extra.update(POLICY_KW)
    floor = SWEEP_BEST[name] if FLOOR else 1
    sched = v3(BATCHES[0], BATCHES[-1], policy_critical_batch(name), floor, **clock, **extra)
    cfg = sched.config
    if "failure_samples" not in clock:  # --fitted: no sweep run failed, so no clock
        return dict(failure=0, first=math.nan, track=math.nan, bound=math.nan)
    iv = clock.get("failure_samples_interval")
    trig = FailureClockTrigger(
        clock["failure_samples"],
        lower=iv[0] if iv else None,
        batch=clock["failure_batch"],
        lr=clock["failure_lr"],
        exponent=clock["failure_exponent"],
        fraction=cfg.failure_clock_fraction,
        floor=cfg.failure_clock_floor,
    )
    cur = sched.current
    plan = trig.schedule(
        cur.batch,
        cur.lr,
        max(BUDGETS) * kw["failure_samples"],
        lambda b, lr: next_failure_stage(
            b, lr, growth=cfg.growth, lr_exponent=cfg.failure_lr_exponent, constraints=cfg.constraints
        ),
        max_switches=cfg.max_stages - 1,
        min_rollouts=cfg.min_stage_samples,
    )
    rise = 1.0 + float(kw.get("drift", 0.0))
    track = math.log(rise) / math.log(cfg.track_step)
    return dict(
        failure=len(plan), first=plan[0][0] if plan else math.nan, track=track, bound=len(plan) + track + 1
    )


def summarise(name: str, curves: dict[str, list[dict[str, Any]]], clock: dict[str, Any]) -> dict[str, Any]:
    sweep = [f"constant {b} x1 LR" for b in BATCHES]
    grid = [k for k in curves if k.startswith("constant")]
    best_const = max(sweep, key=lambda k: np.mean([c["best"] for c in curves[k]]))
    target = 0.9 * float(np.mean([c["best"] for c in curves[best_const]]))
    tt = {k: np.array([to_target(c, target) for c in v]) for k, v in curves.items()}
    # the most sample-efficient constant: fewest mean rollouts to target among those reaching it in every seed
    n = len(curves[pol := POLICY])
    # reached in at least half the seeds
    reach = [k for k in sweep if (~np.isnan(tt[k][:, 0])).sum() >= n / 2]
    eff = min(reach, key=lambda k: np.nanmean(tt[k][:, 0])) if reach else None
    P = curves[pol]
    res: dict[str, Any] = dict(task=name, target=target, best_constant=best_const, efficient_constant=eff)
    res["clock"] = clock
    if FITTED:
        res["fitted"] = FITTED_INFO.get(name)
    res["sweep_best_reward_batch"] = SWEEP_BEST.get(name)
    res["floor"] = SWEEP_BEST[name] if FLOOR else None
    res["closed_form"] = closed_form_switches(name, clock)
    P = curves[pol]
    res["median_switches"] = float(np.median([c["switches"] for c in P]))
    firsts = [c["first_clock"] for c in P if c["first_clock"] is not None]
    res["first_clock_switch"] = float(np.median(firsts)) if firsts else None
    res["kinds"] = {
        k: float(np.mean([c["kinds"].count(k) for c in P]))
        for k in sorted({k for c in P for k in c["kinds"]})
    }
    okb = ~np.isnan(tt[pol][:, 0]) & ~np.isnan(tt[best_const][:, 0])
    res["rollouts_vs_best"] = (
        float(tt[pol][okb, 0].mean() / tt[best_const][okb, 0].mean()) if okb.any() else None
    )
    res["updates_vs_best"] = (
        float(tt[pol][okb, 1].mean() / tt[best_const][okb, 1].mean()) if okb.any() else None
    )
    res["table"] = {
        k: dict(
            best=float(np.mean([c["best"] for c in v])),
            **{f"at{f:g}F": float(np.mean([c["at"][f] for c in v])) for f in BUDGETS},
            rollouts=_nanmean(tt[k][:, 0]),
            updates=_nanmean(tt[k][:, 1]),
            reached=int((~np.isnan(tt[k][:, 0])).sum()),
            failed=int(sum(c["fail"] is not None for c in v)),
            switches=float(np.mean([c["switches"] for c in v])),
        )
        for k, v in curves.items()
    }

    def diff(key: Callable[[dict[str, Any]], float], other: str) -> tuple[float, float, float]:
        return t_ci(np.array([key(a) - key(b) for a, b in zip(P, curves[other], strict=True)]))

    res["best_vs_best_constant"] = diff(lambda c: c["best"], best_const)
    res["at1.5F_vs_sweep_constants"] = {k: diff(lambda c: c["at"][1.5], k) for k in sweep}
    best_grid = max(grid, key=lambda k: np.mean([c["at"][1.5] for c in curves[k]]))
    res["best_grid_at1.5F"] = best_grid
    res["at1.5F_vs_best_grid"] = diff(lambda c: c["at"][1.5], best_grid)
    if eff is not None:
        ok = ~np.isnan(tt[pol][:, 0]) & ~np.isnan(tt[eff][:, 0])  # seeds where both reached the target
        res["policy_reached"] = int((~np.isnan(tt[pol][:, 0])).sum())
        res["paired_reached"] = int(ok.sum())
        res["rollouts_ratio"] = float(tt[pol][ok, 0].mean() / tt[eff][ok, 0].mean()) if ok.any() else None
        res["updates_ratio"] = float(tt[pol][ok, 1].mean() / tt[eff][ok, 1].mean()) if ok.any() else None
    if PRICES:
        res["priced"] = {f"{rho:g}": priced_bar(curves, tt, rho, best_const) for rho in PRICES}
    if LEAN:
        return res
    decays = [f"decay {b}" for b in BATCHES]
    best_decay = max(decays, key=lambda k: np.mean([c["best"] for c in curves[k]]))
    res["best_decay"] = best_decay
    res["best_vs_best_decay"] = diff(lambda c: c["best"], best_decay)
    ok = ~np.isnan(tt[best_decay][:, 1]) & ~np.isnan(tt[pol][:, 1])
    res["updates_vs_decay"] = (
        float(tt[pol][ok, 1].mean() / tt[best_decay][ok, 1].mean()) if ok.any() else None
    )
    return res


def seed_costs(c: dict[str, Any], hit: np.ndarray, rho: float) -> float:
    """A seed's cost to the target at the price: rollouts + rho x updates there, its whole run
    where it never reaches the target (before failure)."""
    s, u = (hit[0], hit[1]) if not np.isnan(hit[0]) else c["total"]
    return float(s + rho * u)


def priced_bar(
    curves: dict[str, list[dict[str, Any]]], tt: dict[str, np.ndarray], rho: float, best_const: str
) -> dict[str, Any]:
    """The bar at price ``rho`` for the policy told it: (1) mean cost <= c*(rho)'s and the upper 95%
    bound of the paired difference <= 0.05 x c*'s mean; (2) the paired best-reward difference
    against c* has a lower bound > 0; (3) against the best-reward constant a lower bound >= -0.01,
    and the target reached on at least as many seeds."""
    pol = priced(rho)
    sweep = [f"constant {b} x1 LR" for b in BATCHES]
    cost = {
        k: np.array([seed_costs(c, h, rho) for c, h in zip(curves[k], tt[k], strict=True)])
        for k in [*sweep, pol, POLICY]
    }
    cstar = min(sweep, key=lambda k: float(cost[k].mean()))
    ref = float(cost[cstar].mean())
    d_cost = t_ci(cost[pol] - cost[cstar])
    d_best_c = t_ci(
        np.array([a["best"] - b["best"] for a, b in zip(curves[pol], curves[cstar], strict=True)])
    )
    d_best_b = t_ci(
        np.array([a["best"] - b["best"] for a, b in zip(curves[pol], curves[best_const], strict=True)])
    )
    reached = int((~np.isnan(tt[pol][:, 0])).sum())
    reached_b = int((~np.isnan(tt[best_const][:, 0])).sum())
    ok_cost = float(cost[pol].mean()) <= ref and d_cost[2] <= 0.05 * ref
    ok_reward = d_best_c[1] > 0
    ok_safe = d_best_b[1] >= -0.01 and reached >= reached_b
    return dict(
        cstar=cstar,
        cost_ratio=float(cost[pol].mean()) / ref,
        cost_upper=d_cost[2] / ref,
        default_cost_ratio=float(cost[POLICY].mean()) / ref,
        costs={k: float(v.mean()) for k, v in cost.items()},
        best_vs_cstar=d_best_c,
        best_vs_best=d_best_b,
        reached=reached,
        reached_best=reached_b,
        ok=dict(cost=bool(ok_cost), reward=bool(ok_reward), safety=bool(ok_safe)),
        passed=bool(ok_cost and ok_reward and ok_safe),
    )


def priced_report(out: list[dict[str, Any]], seeds: int) -> list[str]:
    """The priced bar's table: per task and price, the cost ratio against the constant cheapest at
    that price and the three parts of the bar."""
    lines = [
        f"# The priced bar ({seeds} paired seeds; cost = rollouts + rho x updates to the target, a seed "
        "that never reaches it charged its whole run)",
        "",
        "Cells: cost / c*(rho)'s [upper 95% bound of the paired difference / c*'s mean]; best reward minus "
        "c*'s, lower 95% bound; best reward minus the best-reward constant's, lower bound; seeds reaching "
        "the target (the best-reward constant's); the default policy's cost ratio (price 16 assumed).",
        "",
        "| task | rho | c*(rho) | cost ratio [upper] | best vs c* (lower) | best vs best constant (lower) | "
        "reached | default's cost ratio | cost / reward / safety | pass |",
        "|---" * 10 + "|",
    ]
    if FITTED:
        lines[1:1] = [
            "",
            "Configuration: fitted. The policy's B* and failure clock come from `fit_sweep` on the task's "
            "sweep (the five constants 16-256 on seeds 90000-90001, horizon 2F), as `rlvr-schedule fit` "
            "gives them; B* fitted [interval] / true: "
            + "; ".join(
                f"{r['task']} {_g(r['fitted']['critical_batch'])} "
                f"[{', '.join(_g(x) for x in r['fitted']['critical_batch_interval'])}] / "
                f"{r['fitted']['true_critical_batch']:g}"
                for r in out
                if r.get("fitted")
            )
            + ". Failure clock fitted F [interval], alpha: "
            + "; ".join(
                f"{r['task']} {_g(r['clock'].get('failure_samples'))} "
                f"[{', '.join(_g(x) for x in r['clock'].get('failure_samples_interval') or (None, None))}], "
                f"{r['clock'].get('failure_exponent', math.nan):.2f}"
                for r in out
                if r.get("fitted")
            )
            + ".",
        ]
    tally: dict[str, int] = {}
    for r in out:
        for rho, p in r.get("priced", {}).items():
            ok = p["ok"]
            tally[rho] = tally.get(rho, 0) + int(p["passed"])
            lines.append(
                f"| {r['task']} | {rho} | {p['cstar'].split(' x')[0]} | {p['cost_ratio']:.3f} "
                f"[{p['cost_upper']:+.3f}] | {p['best_vs_cstar'][1]:+.3f} | {p['best_vs_best'][1]:+.3f} | "
                f"{p['reached']} ({p['reached_best']}) | {p['default_cost_ratio']:.3f} | "
                + " / ".join("yes" if ok[k] else "**no**" for k in ("cost", "reward", "safety"))
                + f" | {'**yes**' if p['passed'] else 'no'} |"
            )
    lines += [
        "",
        "Tasks passing, per price: " + ", ".join(f"rho {k}: {v}/{len(out)}" for k, v in tally.items()),
        "",
    ]
    return lines


def _g(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.0f}"


def _ci(x) -> str:
    return f"{x[0]:+.3f} [{x[1]:+.3f}, {x[2]:+.3f}]"


def report(out: list[dict[str, Any]], seeds: int) -> list[str]:
    global FRACTION_USED
    FRACTION_USED = POLICY_KW.get(
        "failure_clock_fraction", CLOCK_FRACTION or PolicyConfig().failure_clock_fraction
    )
    """The markdown page: the goal's checks per task, then each task's table."""
    lines = [
        f"# The sweep's failure clock as the trigger ({seeds} seeds, paired)",
        "",
        f"Policy: `{POLICY}` (PolicyConfig defaults, failure_clock_fraction {FRACTION_USED}, forecast "
        f"advisory; overrides {json.dumps(POLICY_KW)}). Ratios on the seeds "
        "where both reached the target; differences policy minus baseline, mean [95% t-interval].",
        "",
        "| task | sweep clock F [interval] | first clock switch (median) | best vs best constant | "
        "updates / best constant | rollouts / best constant | updates / most efficient | "
        "rollouts / most efficient | median switches | bound (failure + track + 1) |",
        "|---" * 10 + "|",
    ]
    for r in out:
        ck, cf = r["clock"], r["closed_form"]
        iv = ck.get("failure_samples_interval") or (math.nan, math.nan)

        def g(x: float | None, f: str = ".2f") -> str:
            return "n/a" if x is None else format(x, f)

        lines.append(
            f"| {r['task']} | {g(ck.get('failure_samples'), '.0f')} "
            f"[{g(iv[0], '.0f')}, {g(iv[1], '.0f')}] | {g(r['first_clock_switch'], '.0f')} | "
            f"{_ci(r['best_vs_best_constant'])} ({r['best_constant']}) | {g(r['updates_vs_best'])} | "
            f"{g(r['rollouts_vs_best'])} | {g(r.get('updates_ratio'))} | {g(r.get('rollouts_ratio'))} "
            f"({r['efficient_constant']}) | {r['median_switches']:.0f} | {cf['failure']} + {cf['track']:.1f} + 1 "
            f"= {cf['bound']:.1f} |"
        )
    lines += ["", "Switch kinds per run (mean): " + "; ".join(f"{r['task']}: {r['kinds']}" for r in out), ""]
    if not LEAN:
        lines += [
            f"# Policy v3 on the v3 synthetic tasks ({seeds} seeds, paired; failure_switch_fraction "
            f"{SWITCH_FRACTION:g})",
            "",
            "Generated by `benchmarks/evidence/schedules_v3.py`. Differences: policy minus baseline, "
            "mean [95% t-interval]; non-inferior = lower bound >= -0.01.",
            "",
            "| task | best before failure vs best constant | at 1.5F vs the sweep constant it beats least | "
            "at 1.5F vs best LR-grid constant | rollouts / most efficient | updates / most efficient | "
            "best vs LR decay (same trigger) | updates / LR decay |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in out:
            sweep = r["at1.5F_vs_sweep_constants"]
            worst = min(sweep, key=lambda k: sweep[k][1])

            def fmt(x: float | None) -> str:
                return "n/a" if x is None else f"{x:.2f}"

            cells = [
                r["task"],
                f"{_ci(r['best_vs_best_constant'])} ({r['best_constant']})",
                f"{_ci(sweep[worst])} ({worst})",
                f"{_ci(r['at1.5F_vs_best_grid'])} ({r['best_grid_at1.5F']})",
                f"{fmt(r.get('rollouts_ratio'))} ({r['efficient_constant']})",
                fmt(r.get("updates_ratio")),
                f"{_ci(r['best_vs_best_decay'])} ({r['best_decay']})",
                fmt(r["updates_vs_decay"]),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    for r in out:
        lines += [
            "",
            f"## {r['task']}: target {r['target']:.3f}",
            "",
            "| schedule | best before failure | at F | at 1.5F | at 2F | rollouts to target "
            "| updates to target | reached | failed | switches |",
            "|---" * 10 + "|",
        ]
        for k, v in r["table"].items():

            def f(x: float | None) -> str:
                return "-" if x is None else f"{x:.0f}"

            lines.append(
                f"| {k} | {v['best']:.3f} | {v['at1F']:.3f} | {v['at1.5F']:.3f} | {v['at2F']:.3f} | "
                f"{f(v['rollouts'])} | {f(v['updates'])} | {v['reached']}/{seeds} | "
                f"{v['failed']}/{seeds} | {v['switches']:.1f} |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--tasks", default=",".join([*TASKS, *HELDOUT]))
    ap.add_argument("--json", default=None)
    ap.add_argument("--md", default=None, help="write the markdown report here")
    ap.add_argument("--switch-fraction", type=float, default=0.25)
    ap.add_argument("--clock-fraction", type=float, default=None)
    ap.add_argument(
        "--lean", action="store_true", help="the sweep's constants, v3 and the sweep-clock policy only"
    )
    ap.add_argument(
        "--prices", default="", help="comma-separated prices (rollouts per update): the priced bar"
    )
    ap.add_argument(
        "--fitted",
        action="store_true",
        help="the policy's B* and failure clock from fit on the task's sweep (seeds 90000-90001), as a "
        "user would configure it, instead of the true B*",
    )
    ap.add_argument(
        "--policy-kw", default="{}", help="JSON PolicyConfig overrides for the sweep-clock policy"
    )
    ap.add_argument(
        "--floor-best-reward",
        action="store_true",
        help="experiment: the sweep-clock policy never runs below the sweep's best-reward batch",
    )
    args = ap.parse_args(argv)
    global SWITCH_FRACTION, CLOCK_FRACTION, LEAN, FLOOR, PRICES, FITTED
    LEAN = args.lean
    FITTED = args.fitted
    PRICES = tuple(float(x) for x in args.prices.split(",") if x.strip())
    FLOOR = args.floor_best_reward
    POLICY_KW.update(json.loads(args.policy_kw))
    CLOCK_FRACTION = args.clock_fraction
    SWITCH_FRACTION = args.switch_fraction
    out = []
    for name in args.tasks.split(","):
        t = time.perf_counter()
        res = summarise(name, *run_task(name, args.seeds))
        res["seconds"] = time.perf_counter() - t
        out.append(res)
        print(json.dumps({k: v for k, v in res.items() if k != "table"}, default=float), file=sys.stderr)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            doc = dict(
                seeds=args.seeds,
                switch_fraction=SWITCH_FRACTION,
                prices=list(PRICES),
                policy_kw=POLICY_KW,
                fitted=FITTED,
                results=out,
            )
            json.dump(doc, fh, indent=1, default=float)
    text = "\n".join((priced_report(out, args.seeds) if PRICES else []) + report(out, args.seeds)) + "\n"
    if args.md:
        with open(args.md, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
