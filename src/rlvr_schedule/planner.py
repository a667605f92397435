"""Sweep logs to a multi-step batch schedule, with predicted samples and updates to target.

From a constant-batch sweep, :func:`rlvr_schedule.clocks.fit_sweep` gives the critical batch B*,
the pooled failure samples F with their interval, their scaling with batch (F(B) ~ B^alpha) and the
batch and LR they were measured at. The plan is the live policy's failure side, written down: it
starts where :class:`~rlvr_schedule.policy.TwoClockScheduler` starts (the batch cheapest at the
price, :func:`~rlvr_schedule.policy.rules.operating_batch`), and each stage ends
where the policy's failure-clock trigger (:class:`~rlvr_schedule.policy.triggers.FailureClockTrigger`)
fires: once it has spent ``clock_fraction`` of the clock's lower bound left at its start. A switch
follows the policy's one rule (:func:`~rlvr_schedule.policy.triggers.next_failure_stage`: batch x
``growth``, the LR held by default, LR / sqrt(growth) at the largest batch), which postpones the
rest of the clock by growth^(alpha + e - q). Predictions use the progress clock's fitted form: a
constant batch on the LR rule needs E(B) = E0 / (1 - B/(2B*)) rollouts to the target, and an LR s
times the rule's moves drift per rollout by s, so a stage of n rollouts does n s / E(B) of the climb.
Each constant run's measured samples and updates to target sit beside the prediction, and every
row's cost to target at the price (rollouts + price x updates), the cheapest marked. The price is
the config's, else fitted from the runs' step times (:class:`~rlvr_schedule.policy.price.StepTimeFit`),
else the default.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlvr_schedule.errors import RlvrScheduleError
from rlvr_schedule.policy import rules
from rlvr_schedule.policy.constraints import BatchConstraints
from rlvr_schedule.policy.policy_config import PolicyConfig
from rlvr_schedule.policy.price import DEFAULT_PRICE, StepTimeFit, run_cost
from rlvr_schedule.policy.static import StaticSchedule
from rlvr_schedule.policy.triggers import FailureClockTrigger, next_failure_stage
from rlvr_schedule.records import Run, Stage
from rlvr_schedule.theory.scaling import lr_for_batch

__all__ = ["BOUND_MULTIPLE", "Plan", "plan_schedule", "samples_to_target_model", "sweep_config"]


def _finite(x: Any) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def _num(x: Any) -> float | None:
    return float(x) if _finite(x) else None


def samples_to_target_model(batch: float, critical_batch: float, e0: float) -> float:
    """E(B) = E0 / (1 - B/(2B*)): rollouts to the target at a constant batch (inf at and past 2B*)."""
    f = 1.0 - batch / (2.0 * critical_batch)
    return e0 / f if f > 0 else math.inf


@dataclass
class Plan:
    """A planned schedule and what it is predicted to do, beside the sweep's constant runs.

    ``stages`` end at ``until_samples`` (None on the last). ``predicted`` has the plan's
    ``samples_to_target``, ``steps_to_target``, ``failure_samples`` and
    ``reaches_target_before_failure``; ``constant`` one row per sweep run (measured and predicted).
    """

    stages: list[Stage]
    critical_batch: float
    failure_samples: float | None
    failure_exponent: float
    target: float
    samples_to_target_at_zero: float
    predicted: dict[str, Any]
    constant: list[dict[str, Any]]
    constraints: BatchConstraints = field(default_factory=BatchConstraints)
    notes: list[str] = field(default_factory=list)
    failure_samples_interval: tuple[float, float] | None = None
    config: PolicyConfig | None = None
    price: dict[str, Any] = field(default_factory=dict)

    def operating_batch(self, critical_batch: float) -> int:
        """The batch the live policy built from :attr:`config` runs at a B* (at its LR)."""
        assert self.config is not None
        return rules.operating_batch(self.config, critical_batch, self.constraints)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (None where not estimable); ``stages`` is a schedule file's body."""
        return {
            "stages": [{"batch": s.batch, "lr": s.lr, "until_samples": s.until_samples} for s in self.stages],
            "predicted": dict(self.predicted),
            "constant": [dict(c) for c in self.constant],
            "critical_batch": _num(self.critical_batch),
            "failure_samples": _num(self.failure_samples),
            "failure_samples_interval": (
                [_num(v) for v in self.failure_samples_interval] if self.failure_samples_interval else None
            ),
            "failure_exponent": _num(self.failure_exponent),
            "target": _num(self.target),
            "samples_to_target_at_zero": _num(self.samples_to_target_at_zero),
            "constraints": self.constraints.to_dict(),
            "price": dict(self.price),
            "notes": list(self.notes),
        }

    def to_schedule(self) -> StaticSchedule:
        """The plan as a :class:`StaticSchedule` a host can drive."""
        return StaticSchedule(self.stages, self.constraints)


#: Without a stated ``max_batch``, a plan's batches stop at this multiple of the sweep's largest batch
#: (a plan should not run off the end of any host; there, switches divide the LR instead).
BOUND_MULTIPLE = 4
#: A planned stage shorter than this part of the sweep's failure clock is merged into the last stage:
#: the closed form's stages shorten geometrically, and past this they are too short to matter.
SHORT_STAGE = 0.02


def sweep_config(
    runs: Sequence[Run], fit: Any, config: PolicyConfig | None = None, **knobs: Any
) -> PolicyConfig:
    """The policy's config for a sweep: ``config`` (default: the defaults with the LR rule's base at
    the smallest run, its batch and its LR after warm-up), with the fit's critical batch and failure
    clock (:meth:`~rlvr_schedule.clocks.SweepFit.failure_clock`) where the config states none, and
    ``knobs`` (:class:`~rlvr_schedule.policy.PolicyConfig` fields) on top."""
    smallest = min(runs, key=lambda r: r.batch)
    base: dict[str, Any] = {}
    if config is None:
        from rlvr_schedule.ingest.lr import training_lr

        base = {"base_batch": int(smallest.batch), "base_lr": training_lr(smallest).lr}
        config = PolicyConfig()
    d = {**config.to_dict(), **base}
    if d["critical_batch"] is None and _finite(fit.critical_batch) and fit.critical_batch > 0:
        d["critical_batch"], d["critical_batch_lr"] = float(fit.critical_batch), None
    if d["failure_samples"] is None and hasattr(fit, "failure_clock"):
        d.update(fit.failure_clock())
    d.update(knobs)
    if isinstance(d.get("constraints"), BatchConstraints):
        d["constraints"] = d["constraints"].to_dict()
    return PolicyConfig.from_dict(d)


def plan_schedule(
    runs: Sequence[Run],
    config: PolicyConfig | None = None,
    *,
    target: float | None = None,
    fit: Any = None,
    budget: float | None = None,
    **knobs: Any,
) -> Plan:
    """Plan a multi-step schedule from a constant-batch sweep, as the live policy built from
    ``config`` would run it on the failure clock.

    ``config``: the policy's (a ``two_clock`` schedule file's; default: :func:`sweep_config`'s, the
    LR rule based at the smallest run); the fit's B* and failure clock fill in what it does not
    state; ``knobs``: :class:`~rlvr_schedule.policy.PolicyConfig` fields on top. The start, the LR
    rule and the failure-clock trigger are built from it as the live policy builds them
    (:mod:`rlvr_schedule.policy.rules`). ``fit``: a precomputed
    :class:`~rlvr_schedule.clocks.SweepFit` (default: ``fit_sweep(runs, target)``). Switches are
    planned within ``budget`` rollouts (default: twice the pooled failure samples) and
    ``max_stages`` stages; stages shorter than :data:`SHORT_STAGE` of the failure clock (or than
    ``min_stage_samples``) are merged into the last; without a stated ``max_batch`` batches stop at
    :data:`BOUND_MULTIPLE` x the sweep's largest batch. Raises
    :class:`~rlvr_schedule.errors.RlvrScheduleError` when no critical batch is known.
    """
    runs = list(runs)
    if not runs:
        raise RlvrScheduleError("cannot plan without runs")
    if fit is None:
        from rlvr_schedule.clocks import fit_sweep

        fit = fit_sweep(runs, target=target)
    bstar = float(fit.critical_batch) if _finite(fit.critical_batch) else math.nan
    cfg = sweep_config(runs, fit, config, **knobs)
    if cfg.critical_batch is None:
        raise RlvrScheduleError(
            "cannot plan: the sweep gives no critical batch (need constant-batch runs at two or more "
            "batches whose reward reaches the target)"
        )
    if not bstar > 0:
        bstar = float(cfg.critical_batch)
    notes: list[str] = []
    cfg, price = _priced(cfg, runs, notes)
    assert cfg.critical_batch is not None  # checked above; _priced changes only the price
    if not (_finite(cfg.base_lr) and cfg.base_lr > 0):
        raise RlvrScheduleError(f"cannot plan: no usable base LR ({cfg.base_lr!r}); give base_lr")
    if config is None and "base_lr" not in knobs:
        from rlvr_schedule.ingest.lr import training_lr

        smallest = min(runs, key=lambda r: r.batch)
        info = training_lr(smallest)
        if info.warms_up or info.decays:
            notes.append(
                f"base LR {cfg.base_lr:.3g} of run {smallest.name!r} is its LR after warm-up "
                f"({info.describe()}; first logged {info.first_lr:.3g})"
            )
    elif config is not None and config.critical_batch is None:
        notes.append(
            f"critical batch {cfg.critical_batch:.4g} from the sweep's fit (the schedule states none: "
            "give critical_batch for the live policy to start where the plan does)"
        )
    cons = cfg.constraints
    if cons.multiple == 1 and cons.min_batch == 1:
        # no group size stated: the host ran every sweep batch, so a whole number of its groups is
        # a multiple of their greatest common divisor (GRPO's group size divides each batch)
        unit = math.gcd(*(int(r.batch) for r in runs))
        if unit > 1:
            cons = BatchConstraints(
                group_size=cons.group_size, min_batch=unit, max_batch=cons.max_batch, divisor=unit
            )
            cfg = dataclasses.replace(cfg, constraints=cons)
            notes.append(
                f"no group size stated: batches are multiples of {unit}, the greatest common divisor of "
                "the sweep's batches (the host ran each); give --group-size to plan in other steps"
            )
    if cons.max_batch is None:
        top = BOUND_MULTIPLE * max(int(r.batch) for r in runs)
        cons = BatchConstraints(
            group_size=cons.group_size,
            min_batch=cons.min_batch,
            max_batch=max(top, cons.lowest),
            divisor=cons.divisor,
        )
        notes.append(
            f"no max_batch stated: batches stop at {BOUND_MULTIPLE}x the sweep's largest batch ({cons.highest}); "
            "state constraints.max_batch to plan beyond"
        )
    # --- progress clock: E0 from the runs' measured samples to target -------------------------
    e0s = [
        rf.samples_to_target * (1 - rf.batch / (2 * bstar))
        for rf in fit.runs
        if getattr(rf, "constant_batch", True) and _finite(rf.samples_to_target) and rf.batch < 2 * bstar
    ]
    if e0s:
        e0 = float(np.median(e0s))
    elif _finite(getattr(fit, "rate_at_zero", None)) and fit.rate_at_zero > 0:
        e0 = (fit.target - fit.initial_reward) / fit.rate_at_zero
        notes.append("no run reached the target below 2B*: E0 from the fitted rate at zero batch")
    else:
        e0 = math.nan
        notes.append("samples to target not estimable: predictions left empty")

    # --- the start and the failure-clock switches (the live policy's, built from the config) -------
    b_first, _ = rules.initial_stage(cfg, cons)
    b0 = int(cfg.base_batch or b_first)
    if b_first >= bstar:
        notes.append(f"the smallest runnable batch {b_first} is not below the critical batch {bstar:.4g}")
    lr_first = rules.lr_at(cfg, b_first, b0)
    clock = rules.failure_clock(cfg, b0)
    fail = clock.failure_samples if clock is not None else None
    alpha = float(cfg.failure_exponent)
    points: list[tuple[float, int, float]] = []
    if clock is None:
        notes.append("no run collapsed: a single stage (nothing to switch ahead of)")
    else:
        fb_budget: Any = getattr(fit, "budget", None)
        horizon = float(budget) if budget is not None else 2.0 * clock.failure_samples
        if budget is None and _finite(fb_budget) and fb_budget > horizon:
            horizon = float(fb_budget)

        def step(b: int, lr: float) -> tuple[int, float]:
            return next_failure_stage(
                b, lr, growth=cfg.growth, lr_exponent=cfg.failure_lr_exponent, constraints=cons
            )

        shortest = max(float(cfg.min_stage_samples), SHORT_STAGE * clock.failure_samples)
        points = clock.schedule(
            b_first,
            lr_first,
            horizon,
            step,
            max_switches=cfg.max_stages - 1,
            min_rollouts=cfg.min_stage_samples,
        )
        n_all = len(points)
        points = clock.schedule(
            b_first, lr_first, horizon, step, max_switches=cfg.max_stages - 1, min_rollouts=shortest
        )
        if len(points) < n_all:
            notes.append(
                f"{n_all - len(points)} later stages shorter than {SHORT_STAGE:g} of the failure clock "
                f"({shortest:.5g} rollouts) merged into the last"
            )
        if cfg.failure_samples_interval is not None:
            notes.append(
                f"failure clock {clock.failure_samples:.5g} rollouts (lower bound {clock.lower:.5g}): the "
                f"first switch at {cfg.failure_clock_fraction:g} of its lower bound at the start (not before "
                f"{cfg.failure_clock_floor:g} of the clock)"
            )
    assert cfg.critical_batch is not None  # the replaces above change the constraints and the price only
    start_fraction = rules.operating_fraction_at(cfg, float(rules.known_critical_batch(cfg) or bstar))
    stages: list[Stage] = []
    starts = [(0.0, b_first, lr_first), *points]
    for k, (at, b, lr) in enumerate(starts):
        last = k == len(starts) - 1
        until = None if last else math.ceil(starts[k + 1][0])
        if until is not None and until <= int(at):
            until = int(at) + 1
        reason = (
            f"initial: {start_fraction:.3g} x critical batch {float(cfg.critical_batch):.4g}"
            if k == 0
            else f"failure clock: {cfg.failure_clock_fraction:g} of the rollouts left at stage {k - 1}'s start spent"
        )
        stages.append(
            Stage(batch=b, lr=lr, reason=reason, start_samples=int(math.ceil(at)), until_samples=until)
        )
    plan_failure = None
    if clock is not None:  # the pooled clock (not its lower bound) spent along the stages
        pooled = FailureClockTrigger(
            clock.failure_samples,
            batch=clock.batch,
            lr=clock.lr,
            exponent=alpha,
            rule_exponent=clock.rule_exponent,
        )
        for st in stages[:-1]:
            pooled.spend(float(st.until_samples or 0) - st.start_samples, st.batch, st.lr)
        final = stages[-1]
        plan_failure = final.start_samples + pooled.left(final.batch, final.lr)
    lr_rule, lr0 = cfg.lr_rule, cfg.base_lr

    # --- predictions ------------------------------------------------------------------------------
    samples, steps, left = 0.0, 0.0, 1.0
    reached = None
    if _finite(e0):
        for st in stages:
            drift = st.lr / float(lr_for_batch(st.batch, b0, lr0, rule=lr_rule))  # the LR off the rule
            e = samples_to_target_model(st.batch, bstar, e0) / drift
            n = math.inf if st.until_samples is None else st.until_samples - st.start_samples
            if n / e >= left:
                samples += left * e
                steps += left * e / st.batch
                reached = True
                break
            left -= n / e
            samples += n
            steps += n / st.batch
    rho = float(price["rollouts_per_update"])
    predicted = {
        "samples_to_target": samples if reached else None,
        "steps_to_target": steps if reached else None,
        "cost_to_target": run_cost(samples, steps, rho) if reached else None,
        "failure_samples": plan_failure,
        "reaches_target_before_failure": (bool(reached) and (plan_failure is None or samples < plan_failure)),
    }
    constant = []
    from rlvr_schedule.ingest.lr import training_lr

    train_lrs = {r.name: training_lr(r).lr for r in runs}
    for rf in fit.runs:
        stt = _num(rf.samples_to_target)
        pred = _num(samples_to_target_model(rf.batch, bstar, e0)) if _finite(e0) else None
        constant.append(
            {
                "name": rf.name,
                "batch": rf.batch,
                "lr": _num(train_lrs.get(rf.name, rf.lr)),
                "samples_to_target": stt,
                "steps_to_target": None if stt is None else stt / rf.batch,
                "predicted_samples_to_target": pred,
                "predicted_steps_to_target": None if pred is None else pred / rf.batch,
                "cost_to_target": None if stt is None else run_cost(stt, stt / rf.batch, rho),
                "predicted_cost_to_target": None if pred is None else run_cost(pred, pred / rf.batch, rho),
                "failure_samples": _num(rf.failure_samples),
            }
        )
    _mark_cheapest(predicted, constant)
    return Plan(
        stages=stages,
        critical_batch=bstar,
        failure_samples=fail,
        failure_exponent=alpha,
        target=float(fit.target),
        samples_to_target_at_zero=e0,
        predicted=predicted,
        constant=constant,
        constraints=cons,
        notes=notes,
        failure_samples_interval=(
            (float(iv0[0]), float(iv0[1]))
            if (iv0 := getattr(fit, "failure_samples_interval", None)) is not None
            and _finite(iv0[0])
            and _finite(iv0[1])
            else None
        ),
        config=cfg,
        price=price,
    )


def _priced(cfg: PolicyConfig, runs: Sequence[Run], notes: list[str]) -> tuple[PolicyConfig, dict[str, Any]]:
    """The plan's price (rollouts per update) and where it comes from: the config's, else the runs'
    step times (then written into the config, so the live policy starts where the plan does), else
    the default."""
    fit = StepTimeFit.from_runs(runs)
    measured = fit.to_dict()
    if cfg.price is not None:
        return cfg, dict(rollouts_per_update=cfg.price, source="stated", measured=measured)
    if cfg.sample_tolerance is not None:
        rho = rules.price_for_tolerance(cfg)
        notes.append(cfg.tolerance_warning() or "")
        return cfg, dict(rollouts_per_update=rho, source="sample_tolerance", measured=measured)
    if fit.unidentified_ is None:
        notes.append(
            f"price {fit.price_:.3g} rollouts/update measured from the runs' step times "
            f"(interval [{fit.price_interval_[0]:.3g}, {fit.price_interval_[1]:.3g}]); state "
            "rollouts_per_update to override"
        )
        cfg = dataclasses.replace(cfg, rollouts_per_update=float(fit.price_))
        return cfg, dict(rollouts_per_update=float(fit.price_), source="measured", measured=measured)
    notes.append(
        f"price not identified ({fit.unidentified_}): the default {DEFAULT_PRICE:g} rollouts/update; "
        "give --price"
    )
    return cfg, dict(rollouts_per_update=DEFAULT_PRICE, source="default", measured=measured)


def _mark_cheapest(predicted: dict[str, Any], constant: list[dict[str, Any]]) -> None:
    """``cheapest: true`` on the row (the plan's prediction or a constant run's measured cost) with
    the least cost to target at the price."""
    rows: list[tuple[float, dict[str, Any]]] = (
        [(float(predicted["cost_to_target"]), predicted)]
        if predicted.get("cost_to_target") is not None
        else []
    )
    rows += [(float(c["cost_to_target"]), c) for c in constant if c.get("cost_to_target") is not None]
    for _, r in rows:
        r["cheapest"] = False
    if rows:
        min(rows, key=lambda x: x[0])[1]["cheapest"] = True
