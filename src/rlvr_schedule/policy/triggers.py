"""The two-clock policy's triggers: each small, each returning a :class:`Proposal` with its kind.

A proposal's ``kind`` (:data:`KINDS`) is what the gate decides by and what a
:class:`~rlvr_schedule.records.Decision` carries as its ``trigger``; its ``reason`` is free text
for people, which no code reads.

:class:`~rlvr_schedule.policy.TwoClockScheduler` asks them in order (auto start, failure clock,
forecast, alarm, B* tracker up and down) and hands the first proposal to its one gate, which applies
the pacing and snaps to the runnable grid. The planner (``rlvr-schedule plan``) uses the same
:func:`start_batch` and :class:`FailureClockTrigger`, so a planned schedule and the live policy
start at the same batch, switch at the same point of the failure clock and set the same LR.

Failure clock: a sweep measures F rollouts to failure at batch B_ref and LR
r_ref. Drift per rollout is lr / B^e (e the LR rule's exponent, 1/2 for Adam's square root), so a
stage held at (B, lr) runs out after F(B, lr) = F (B/B_ref)^(alpha + e) (r_ref / lr) rollouts, the
sweep's batch scaling alpha included. The trigger spends the clock's lower bound at 1/F(B, lr) per
rollout and proposes a failure switch once the stage has spent ``fraction`` of what was left when
it began; the switch (batch x growth, LR x growth^q; LR / sqrt(growth) at the largest batch) moves
the rollouts left from R to R k^(alpha + e - q): the closed-form postponement.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr_schedule.policy.constraints import BatchConstraints
from rlvr_schedule.theory.scaling import rule_exponent

__all__ = [
    "FailureClockTrigger",
    "Proposal",
    "alarm_trigger",
    "auto_start",
    "failure_switch",
    "forecast_trigger",
    "next_failure_stage",
    "rule_exponent",
    "start_batch",
    "track_down",
    "track_up",
]

#: The kinds of proposal, in the order the policy asks for them.
KINDS = ("auto", "failure_clock", "forecast", "alarm", "track_up", "track_down")


@dataclass(frozen=True)
class Proposal:
    """A switch a trigger asks for: ``batch`` (unsnapped), ``lr`` (None: the LR rule at the snapped
    batch, times the stage's scale), how the gate snaps (``snap``: "up", "down" or "nearest") and
    the range [``lo``, ``hi``] the snapped batch must fall in for the switch to stand. ``failure``:
    a failure switch (restarts the failure clock's stage; tracking keeps above its batch).
    ``paced``: False skips the pacing (the auto start, picked once)."""

    kind: str
    batch: float
    reason: str
    lr: float | None = None
    snap: str = "down"
    lo: float = 0.0
    hi: float = math.inf
    failure: bool = False
    paced: bool = True


#: How the operating point (the start, the auto start, the B* tracker's target) snaps to the runnable
#: grid: to the nearest runnable batch (ties down). Snapping down would start an operating point of
#: 14.3 at 8 on a grid of 8, half the point, and spend the estimate's warm-up (100 records) there;
#: a tracker target of 23 would stay at 16 until it reached 24.
OPERATING_SNAP = "nearest"


def start_batch(critical_batch: float, fraction: float, constraints: BatchConstraints) -> int:
    """The start point shared by the plan and the live policy: ``fraction`` (the operating fraction
    of :class:`~rlvr_schedule.policy.PolicyConfig`) x B*, snapped to the nearest runnable batch."""
    return constraints.snap(fraction * critical_batch, OPERATING_SNAP)


def next_failure_stage(
    batch: int, lr: float, *, growth: float, lr_exponent: float, constraints: BatchConstraints
) -> tuple[int, float]:
    """The one LR rule at a failure switch: batch x ``growth`` (snapped up) with the LR x
    k^``lr_exponent`` (k the snapped factor; 0: the LR held); at the largest batch the batch stays
    and the LR is divided by sqrt(``growth``)."""
    nxt = constraints.snap(batch * growth, "up")
    if nxt > batch:
        k = nxt / batch
        return nxt, lr * k**lr_exponent
    return batch, lr / math.sqrt(growth)


class FailureClockTrigger:
    """The sweep's failure clock, spent rollout by rollout; proposes a failure switch in time.

    ``failure_samples``: the sweep's pooled failure rollouts, ``lower`` the lower end of their
    interval (None: the pooled value), measured at ``batch`` and ``lr``; ``exponent``: alpha in F ~
    B^alpha; ``rule_exponent``: e (drift per rollout ~ lr / B^e); ``fraction``: the part of the
    rollouts left at a stage's start that the stage may spend before the switch; ``floor``: the
    first switch also waits until ``floor`` of the pooled clock is spent (a wide interval, from few
    failures among many censored runs, puts the lower bound far below the pooled clock: without it
    the first switch would come at a small part of the clock the sweep measured). ``used_`` is the
    part of the clock spent, ``stage_used_`` the part spent when the current failure stage began.
    """

    def __init__(
        self,
        failure_samples: float,
        *,
        lower: float | None = None,
        batch: float,
        lr: float,
        exponent: float = 0.0,
        rule_exponent: float = 0.5,
        fraction: float = 0.5,
        floor: float = 0.45,
        min_rollouts: float = 0.0,
    ) -> None:
        if not (math.isfinite(failure_samples) and failure_samples > 0):
            raise ValueError(f"failure_samples must be a positive number, got {failure_samples!r}")
        self.failure_samples = float(failure_samples)
        self.lower = float(lower) if lower is not None else self.failure_samples
        self.batch = float(batch)
        self.lr = float(lr)
        self.exponent = float(exponent)
        self.rule_exponent = float(rule_exponent)
        self.fraction = float(fraction)
        self.floor = float(floor)
        self.min_rollouts = float(min_rollouts)
        self.used_ = 0.0
        self.stage_used_ = 0.0

    def clock(self, batch: float, lr: float) -> float:
        """Rollouts from a fresh start to the lower bound of failure at a stage held at (batch, lr)."""
        k = batch / self.batch
        return self.lower * k ** (self.exponent + self.rule_exponent) * (self.lr / lr)

    def spend(self, rollouts: float, batch: float, lr: float) -> None:
        """``rollouts`` consumed at (batch, lr)."""
        self.used_ += rollouts / self.clock(batch, lr)

    @property
    def spent(self) -> float:
        """The part of what was left at the stage's start that the stage has spent."""
        left = 1.0 - self.stage_used_
        return (self.used_ - self.stage_used_) / left if left > 0 else math.inf

    @property
    def stage_fraction(self) -> float:
        """The part of what is left that this stage spends: ``fraction``, and for the first stage
        at least ``floor`` of the pooled clock (``floor`` x F / lower of the lower bound)."""
        if self.stage_used_ > 0:
            return self.fraction
        return min(max(self.fraction, self.floor * self.failure_samples / self.lower), 1.0)

    def left(self, batch: float, lr: float) -> float:
        """Rollouts left to the lower bound of failure at (batch, lr)."""
        return max(1.0 - self.used_, 0.0) * self.clock(batch, lr)

    def propose(self, batch: int, lr: float, nxt: tuple[int, float] | None) -> Proposal | None:
        """A failure switch to ``nxt`` (:func:`next_failure_stage`; None: no stage left) once the
        stage has spent ``fraction`` of what was left at its start; none once a stage would be
        shorter than ``min_rollouts`` (the closed form's switches pile up as the clock runs out:
        from there the alarms are the failure trigger)."""
        frac = self.stage_fraction
        if self.spent < frac:
            return None
        if frac * (1.0 - self.stage_used_) * self.clock(batch, lr) < self.min_rollouts:
            return None
        why = (
            f"failure clock: {self.spent:.2f} of the rollouts left at the stage's start spent "
            f"(>= {frac:.3g}; sweep's clock {self.failure_samples:.5g}, lower bound "
            f"{self.lower:.5g}; {self.left(batch, lr):.5g} rollouts left at batch {batch})"
        )
        if nxt is None:
            return Proposal("failure_clock", batch, why, failure=True, lo=batch + 1)
        return failure_switch("failure_clock", why, nxt)

    def restart(self) -> None:
        """A failure switch went into effect: a new stage of the clock begins."""
        self.stage_used_ = self.used_

    def stage_rollouts(self, batch: float, lr: float) -> float:
        """Rollouts a stage held at (batch, lr) runs from now to its switch (the closed form)."""
        return max(self.stage_fraction - self.spent, 0.0) * (1.0 - self.stage_used_) * self.clock(batch, lr)

    def schedule(
        self,
        batch: int,
        lr: float,
        budget: float,
        step: Callable[[int, float], tuple[int, float]],
        *,
        max_switches: int | None = None,
        min_rollouts: float = 0.0,
    ) -> list[tuple[float, int, float]]:
        """The failure switches from a fresh clock at (batch, lr) within ``budget`` rollouts, with
        no other switch: (rollouts at the switch, batch, LR) after each, ``step`` giving the next
        stage. What the planner writes and the closed-form count of failure switches. The stages
        shorten geometrically (by (1 - fraction) growth^(alpha + e - q)); planning stops at the
        first stage shorter than ``min_rollouts`` (the policy's ``min_stage_samples``)."""
        clk = FailureClockTrigger(
            self.failure_samples,
            lower=self.lower,
            batch=self.batch,
            lr=self.lr,
            exponent=self.exponent,
            rule_exponent=self.rule_exponent,
            fraction=self.fraction,
            floor=self.floor,
        )
        out: list[tuple[float, int, float]] = []
        at = 0.0
        while max_switches is None or len(out) < max_switches:
            n = clk.stage_rollouts(batch, lr)
            if not math.isfinite(n) or at + n > budget or n < min_rollouts:
                break
            at += n
            clk.spend(n, batch, lr)
            clk.restart()
            batch, lr = step(batch, lr)
            out.append((at, batch, lr))
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"used": self.used_, "stage_used": self.stage_used_}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.used_ = float(state.get("used", 0.0))
        self.stage_used_ = float(state.get("stage_used", 0.0))


def auto_start(bstar: float, fraction: float, current: int, micro_batch: int | None) -> Proposal | None:
    """``initial_batch: auto`` without a known B*: the operating fraction x the first B* estimate
    (not below 2 x the micro-batch, where the noise estimate goes blind); picked once, unpaced."""
    if not (math.isfinite(bstar) and bstar > 0):
        return None
    return Proposal(
        "auto",
        fraction * bstar,
        f"auto: {fraction:.3g} x critical batch estimate {bstar:.4g} (gradient noise)",
        snap=OPERATING_SNAP,
        lo=2 * micro_batch if micro_batch else 0.0,
        paced=False,
    )


def failure_switch(kind: str, reason: str, nxt: tuple[int, float]) -> Proposal:
    """A failure switch to ``nxt`` (:func:`next_failure_stage`) asked for by a failure trigger."""
    b, lr = nxt
    return Proposal(kind, b, reason, lr=lr, snap="up", lo=b, hi=b, failure=True)


def forecast_trigger(
    left: float, switch_fraction: float, collapse_in: float, evidence: float, nxt: tuple[int, float]
) -> Proposal | None:
    """The live forecast: a failure switch to ``nxt`` once less than ``switch_fraction`` of the
    stage's rollouts to the forecast collapse are ``left`` (NaN: no confident forecast)."""
    if not left < switch_fraction:  # False on NaN
        return None
    why = (
        f"failure forecast: {max(left, 0.0):.2f} of the stage's rollouts to the forecast collapse left "
        f"< {switch_fraction:g} (collapse in {collapse_in:.4g} rollouts, on {evidence:g} rollouts of "
        "evidence)"
    )
    return failure_switch("forecast", why, nxt)


def alarm_trigger(alarm: str | None, switch_on_alarm: bool, nxt: tuple[int, float]) -> Proposal | None:
    """A detector's alarm (its message) as a failure switch to ``nxt`` (the failure clock ran out
    faster than measured)."""
    return failure_switch("alarm", alarm, nxt) if alarm is not None and switch_on_alarm else None


def track_up(bstar: float, fraction: float, current: int, step: float) -> Proposal | None:
    """B* rose: the operating fraction x the estimate (snapped to the nearest runnable batch), once
    that is ``step`` x above the batch."""
    if not (math.isfinite(bstar) and fraction * bstar >= step * current):
        return None
    return Proposal(
        "track_up",
        fraction * bstar,
        f"critical batch estimate {bstar:.4g} rose: {fraction:.3g} x it",
        snap=OPERATING_SNAP,
        lo=step * current,
    )


def track_down(bstar: float, fraction: float, current: int, step: float, floor: float) -> Proposal | None:
    """B* fell: the operating fraction x the estimate once ``step``^2 below the batch (snapped up),
    not below ``floor`` (the last failure switch's batch, 2 x the micro-batch)."""
    if not (math.isfinite(bstar) and fraction * bstar * step**2 <= current):
        return None
    return Proposal(
        "track_down",
        max(fraction * bstar, floor),
        f"critical batch estimate {bstar:.4g} fell: {fraction:.3g} x it",
        snap="up",
        hi=current - 1,
    )
