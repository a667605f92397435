"""Sweep logs to a multi-step batch schedule, with predicted samples and updates to target.

From a constant-batch sweep, :func:`rlvr_schedule.clocks.fit_sweep` gives the critical batch B*,
the pooled failure samples F with their interval, their scaling with batch (F(B) ~ B^alpha) and the
batch and LR they were measured at. The plan is the live policy's failure side, written down: it
starts where :class:`~rlvr_schedule.policy.TwoClockScheduler` starts (the operating fraction
2 tol / (1 + tol) of B*, :func:`~rlvr_schedule.policy.triggers.start_batch`), and each stage ends
where the policy's failure-clock trigger (:class:`~rlvr_schedule.policy.triggers.FailureClockTrigger`)
fires: once it has spent ``clock_fraction`` of the clock's lower bound left at its start. A switch
follows the policy's one rule (:func:`~rlvr_schedule.policy.triggers.next_failure_stage`: batch x
``growth``, the LR held by default, LR / sqrt(growth) at the largest batch), which postpones the
rest of the clock by growth^(alpha + e - q). Predictions use the progress clock's fitted form: a
constant batch on the LR rule needs E(B) = E0 / (1 - B/(2B*)) rollouts to the target, and an LR s
times the rule's moves drift per rollout by s, so a stage of n rollouts does n s / E(B) of the climb.
Each constant run's measured samples and updates to target sit beside the prediction.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlvr_schedule.clocks.failure.scaling import clock_exponent
from rlvr_schedule.errors import RlvrScheduleError
from rlvr_schedule.policy.constraints import BatchConstraints
from rlvr_schedule.policy.scheduler import PolicyConfig
from rlvr_schedule.policy.static import StaticSchedule
from rlvr_schedule.policy.triggers import FailureClockTrigger, next_failure_stage, rule_exponent, start_batch
from rlvr_schedule.records import Run, Stage
from rlvr_schedule.theory.scaling import lr_for_batch

__all__ = ["Plan", "plan_schedule", "samples_to_target_model"]


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
            "notes": list(self.notes),
        }

    def to_schedule(self) -> StaticSchedule:
        """The plan as a :class:`StaticSchedule` a host can drive."""
        return StaticSchedule(self.stages, self.constraints)


def plan_schedule(
    runs: Sequence[Run],
    *,
    target: float | None = None,
    group_size: int = 1,
    constraints: BatchConstraints | None = None,
    sample_tolerance: float = PolicyConfig.sample_tolerance,
    start_fraction: float | None = None,
    growth: float = 2.0,
    clock_fraction: float = 0.5,
    clock_floor: float = 0.45,
    failure_lr_exponent: float = 0.0,
    max_stages: int = 16,
    min_stage_samples: int = 160,
    budget: float | None = None,
    lr_rule: str = "sqrt",
    base_batch: int | None = None,
    base_lr: float | None = None,
    fit: Any = None,
) -> Plan:
    """Plan a multi-step schedule from a constant-batch sweep.

    ``fit``: a precomputed :class:`~rlvr_schedule.clocks.SweepFit` (default: ``fit_sweep(runs,
    target)``). Batches satisfy ``constraints`` (default: whole groups of ``group_size``). The
    start is ``start_fraction`` x B* (default: the policy's operating fraction for
    ``sample_tolerance``, 2 tol / (1 + tol)); its LR follows ``lr_rule`` from (``base_batch``,
    ``base_lr``), by default the smallest run's. ``clock_fraction``, ``clock_floor``, ``growth``,
    ``failure_lr_exponent``: the failure-clock trigger's knobs (:class:`~rlvr_schedule.policy.PolicyConfig`'s
    ``failure_clock_fraction``, ``failure_clock_floor``, ``growth``, ``failure_lr_exponent``). Switches are planned within
    ``budget`` rollouts (default: twice the pooled failure samples) and ``max_stages`` stages, and
    stop at the first stage shorter than ``min_stage_samples`` (the policy's pacing).
    Raises :class:`~rlvr_schedule.errors.RlvrScheduleError` when the sweep gives no critical batch.
    """
    if start_fraction is None:
        if not 0 < sample_tolerance <= 1:
            raise ValueError(f"sample_tolerance must be in (0, 1], got {sample_tolerance!r}")
        start_fraction = 2 * sample_tolerance / (1 + sample_tolerance)
    if not 0 < start_fraction < 2:
        raise ValueError(f"start_fraction must be in (0, 2), got {start_fraction!r}")
    if not growth > 1:
        raise ValueError(f"growth must be > 1, got {growth!r}")
    if not 0 < clock_fraction <= 1:
        raise ValueError(
            "clock_fraction must be in (0, 1]: the part of the failure clock's lower bound left at a "
            f"stage's start that the stage spends, got {clock_fraction!r}"
        )
    if max_stages < 1:
        raise ValueError(f"max_stages must be >= 1, got {max_stages!r}")
    runs = list(runs)
    if not runs:
        raise RlvrScheduleError("cannot plan without runs")
    if fit is None:
        from rlvr_schedule.clocks import fit_sweep

        fit = fit_sweep(runs, target=target)
    cons = constraints if constraints is not None else BatchConstraints(group_size=group_size)
    bstar = float(fit.critical_batch) if _finite(fit.critical_batch) else math.nan
    if not bstar > 0:
        raise RlvrScheduleError(
            "cannot plan: the sweep gives no critical batch (need constant-batch runs at two or more "
            "batches whose reward reaches the target)"
        )
    notes: list[str] = []

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

    # --- failure clock: F(B) = F (B / B_ref)^alpha -------------------------------------------
    fail = float(fit.failure_samples) if _finite(fit.failure_samples) else None
    # the exponent the pooled clock was fitted with (alpha only where its interval excludes 0)
    alpha = clock_exponent(
        fit.failure_exponent, tuple(getattr(fit, "failure_exponent_interval", (math.nan,) * 2))
    )
    failed = [rf.batch for rf in fit.runs if _finite(rf.failure_samples)]
    b_ref = float(np.exp(np.mean(np.log(failed)))) if failed else 1.0

    # --- LR rule base ---------------------------------------------------------------------------
    smallest = min(runs, key=lambda r: r.batch)
    b0 = base_batch if base_batch is not None else smallest.batch
    if base_lr is not None:
        lr0 = base_lr
    else:
        # the LR the run trains at after its warm-up (its first record's LR is a warm-up value)
        from rlvr_schedule.ingest.lr import training_lr

        info = training_lr(smallest)
        lr0 = info.lr
        if info.warms_up or info.decays:
            notes.append(
                f"base LR {lr0:.3g} of run {smallest.name!r} is its LR after warm-up "
                f"({info.describe()}; first logged {info.first_lr:.3g})"
            )
    if not (_finite(lr0) and lr0 > 0):
        raise RlvrScheduleError(
            f"cannot plan: no usable base LR (run {smallest.name!r} has lr {lr0!r}); pass base_lr"
        )

    # --- the start and the failure-clock switches (the live policy's trigger) --------------------
    e = rule_exponent(lr_rule)
    b_first = start_batch(bstar, start_fraction, cons)
    if b_first >= bstar:
        notes.append(f"the smallest runnable batch {b_first} is not below the critical batch {bstar:.4g}")
    lr_first = float(lr_for_batch(b_first, b0, lr0, rule=lr_rule))
    points: list[tuple[float, int, float]] = []
    clock: FailureClockTrigger | None = None
    if fail is None:
        notes.append("no run collapsed: a single stage (nothing to switch ahead of)")
    else:
        iv = getattr(fit, "failure_samples_interval", None)
        lower = float(iv[0]) if iv is not None and _finite(iv[0]) else None
        fb: Any = getattr(fit, "failure_batch", None)
        ref_b = float(fb) if _finite(fb) else b_ref
        flr: Any = getattr(fit, "failure_lr", None)
        ref_lr = float(flr) if _finite(flr) else float(lr0 * (ref_b / b0) ** e)
        clock = FailureClockTrigger(
            fail,
            lower=lower,
            batch=ref_b,
            lr=ref_lr,
            exponent=alpha,
            rule_exponent=e,
            fraction=clock_fraction,
            floor=clock_floor,
        )
        fb_budget: Any = getattr(fit, "budget", None)
        horizon = float(budget) if budget is not None else 2.0 * fail
        if budget is None and _finite(fb_budget) and fb_budget > horizon:
            horizon = float(fb_budget)

        def step(b: int, lr: float) -> tuple[int, float]:
            return next_failure_stage(b, lr, growth=growth, lr_exponent=failure_lr_exponent, constraints=cons)

        points = clock.schedule(
            b_first, lr_first, horizon, step, max_switches=max_stages - 1, min_rollouts=min_stage_samples
        )
        if lower is not None:
            notes.append(
                f"failure clock {fail:.5g} rollouts (lower bound {lower:.5g}): the first switch at "
                f"{clock_fraction:g} of its lower bound at the start (not before {clock_floor:g} of the clock)"
            )
    stages: list[Stage] = []
    starts = [(0.0, b_first, lr_first), *points]
    for k, (at, b, lr) in enumerate(starts):
        last = k == len(starts) - 1
        until = None if last else math.ceil(starts[k + 1][0])
        if until is not None and until <= int(at):
            until = int(at) + 1
        reason = (
            f"initial: {start_fraction:.3g} x critical batch {bstar:.4g}"
            if k == 0
            else f"failure clock: {clock_fraction:g} of the rollouts left at stage {k - 1}'s start spent"
        )
        stages.append(
            Stage(batch=b, lr=lr, reason=reason, start_samples=int(math.ceil(at)), until_samples=until)
        )
    plan_failure = None
    if fail is not None:  # the pooled clock (not its lower bound) spent along the stages
        pooled = FailureClockTrigger(
            fail,
            batch=clock.batch if clock else b_ref,
            lr=clock.lr if clock else lr0,
            exponent=alpha,
            rule_exponent=e,
        )
        for st in stages[:-1]:
            pooled.spend(float(st.until_samples or 0) - st.start_samples, st.batch, st.lr)
        final = stages[-1]
        plan_failure = final.start_samples + pooled.left(final.batch, final.lr)

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
    predicted = {
        "samples_to_target": samples if reached else None,
        "steps_to_target": steps if reached else None,
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
                "failure_samples": _num(rf.failure_samples),
            }
        )
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
    )
