"""The two-clock policy: start below the critical batch, follow it as it rises, mind the failure clock.

Progress clock: rollouts to a given progress grow as E(B)/E(0) = 1/(1 - B/2B*) and updates as that
over B, so the operating point is the batch with the least rollouts + price x updates
(-rho + sqrt(rho^2 + 2 rho B*), :mod:`~rlvr_schedule.policy.price`): the price stated, else measured
from the records' step times (:class:`~rlvr_schedule.policy.price.LivePrice`), else the default; an
older file's ``sample_tolerance`` fixes the fraction instead.
B* is a known value (``fit_sweep``'s) followed by the B* tracker, or the tracker's estimate alone; the
batch follows fraction x estimate, moving once that is ``track_step`` above the current batch.
Failure clock: the sweep's (``failure_samples`` from ``rlvr-schedule fit``, with its interval and
the batch and LR it was measured at) is spent rollout by rollout; once a stage has spent
``failure_clock_fraction`` of the clock's lower bound left at its start, the batch grows by
``growth`` with the LR x growth^q (q = ``failure_lr_exponent``, default 0: the LR held); at the
largest batch the LR is divided by sqrt(growth) instead. In the local quadratic model a switch moves
the remaining failure from F to F k^(alpha + e - q) rollouts (k the batch factor, e the LR rule's
exponent, 1/2 for "sqrt", alpha = ``failure_exponent``): with q = 0 a sample clock (alpha = 0) is
postponed too, which a square-root switch (q = e) cannot do; where the exponent is <= 0 the policy
holds and says so ("failure forecast: hold"). The live forecast (``forecast``) is advisory by
default; "on" makes it a trigger that can only come earlier than the clock (the clock where no
sweep is given). Detector alarms are failure triggers too.
:meth:`TwoClockScheduler.propose` reads as triggers (auto start, failure clock, forecast, alarm, B* tracker
up and down, in that order), each returning a proposal with its kind, and one gate (``_gate``: snap
to ``self.constraints``, then the pacing) that decides by the kind; the decision carries the kind
as its ``trigger`` beside the reason, which is for people.
Every trigger must hold for ``hysteresis_samples`` rollouts of consecutive records, a stage runs
``min_stage_samples`` rollouts before the next switch, and there are at most ``max_stages``: every
rate limit counts rollouts, so it lasts as long in data at every batch. Keys of earlier versions
(policy v2's horizon trigger, the record-counted limits) are translated or refused on load
(:mod:`rlvr_schedule.policy.legacy`): there is one code path. Each record costs O(1) amortised
work; the state is a bounded window plus at most ``max_stages`` stages.

The parts, one job each: the settings (:mod:`~rlvr_schedule.policy.policy_config`), the B* tracker
(:mod:`~rlvr_schedule.policy.tracker`), the triggers (:mod:`~rlvr_schedule.policy.triggers`), the
reachable-batch simulator (:mod:`~rlvr_schedule.policy.reachable`), the state
(:mod:`~rlvr_schedule.policy.state`); this module asks the triggers in order and owns the gate.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

from rlvr_schedule.clocks import FailureForecast
from rlvr_schedule.policy import reachable, rules, state, triggers
from rlvr_schedule.policy.base import Schedule
from rlvr_schedule.policy.constraints import BatchConstraints
from rlvr_schedule.policy.policy_config import DETECTORS, PolicyConfig
from rlvr_schedule.policy.price import LivePrice, step_seconds
from rlvr_schedule.policy.rules import failure_clock, initial_stage, known_critical_batch
from rlvr_schedule.policy.state import RunState
from rlvr_schedule.policy.tracker import CriticalBatchTracker
from rlvr_schedule.policy.triggers import Proposal
from rlvr_schedule.records import Decision, Stage, StepRecord
from rlvr_schedule.theory.scaling import lr_for_batch

__all__ = ["PolicyConfig", "TwoClockScheduler"]

log = logging.getLogger("rlvr_schedule.policy")

#: Rollouts over which the forecast's early level is taken (as :class:`EntropyCollapse`'s).
REFERENCE_SAMPLES = 512
#: Records the forecast's window holds at most (its memory bound).
FORECAST_RECORDS = 1000


class TwoClockScheduler(Schedule):
    """A :class:`~rlvr_schedule.policy.base.Schedule` driven by the progress and failure clocks.

    ``propose(record)`` folds the record into the online estimates and answers the (batch, lr) of
    the next update. ``detectors`` are extra failure detectors (plugins', see
    :meth:`rlvr_schedule.plugins.PluginHost.failure_detectors`) that run beside the built-in ones
    and whose alarms trigger too; one whose ``update`` returns a fault (an object with a true
    ``fault`` attribute: it raised, so its alarm may be missing) holds the stage on that record.
    """

    kind = "two_clock"
    version = state.VERSION

    def __init__(self, config: PolicyConfig | None = None, *, detectors: Sequence[Any] = ()) -> None:
        self.config = cfg = config if config is not None else PolicyConfig()
        cfg.validate()
        self.forecast = FailureForecast(
            cfg.failure_signal,
            threshold=cfg.failure_threshold,
            fraction=cfg.fraction,
            window=FORECAST_RECORDS,
            min_points=3,  # evidence is counted in rollouts (min_samples) and by the slope's band
            warmup_samples=REFERENCE_SAMPLES,
            min_samples=cfg.forecast_samples,
            recent=0.5,
        )
        self.tracker = CriticalBatchTracker(cfg.estimate_samples, known_critical_batch(cfg))
        #: the price in rollouts per update: stated, else from the records' step times, else the default
        self.price = LivePrice(cfg.price)
        self.detectors: list[Any] = [DETECTORS[n]() for n in cfg.detectors]
        self._n_builtin = len(self.detectors)
        self.detectors += list(detectors)
        batch, reason = initial_stage(cfg)
        self.run = RunState(
            base_batch=cfg.base_batch or batch,
            auto_pending=cfg.initial_batch == "auto" and cfg.critical_batch is None,
        )
        self.constraints = cfg.constraints  # the grid the gate snaps to (set_constraints replaces it)
        self._rule_e = triggers.rule_exponent(cfg.lr_rule)
        self.clock = failure_clock(cfg, self.base_batch)
        super().__init__([Stage(batch=batch, lr=self._lr(batch), reason=reason)])
        self._scale = 1.0  # the stage's LR relative to the rule (kept on commit and load)
        self._expo = cfg.postpone_exponent

    @property
    def base_batch(self) -> int:
        """The batch the LR rule is anchored at (``base_batch``, else the initial batch)."""
        return self.run.base_batch

    @property
    def noise(self) -> Any:
        """The gradient-noise estimate (:class:`~rlvr_schedule.clocks.GradientNoiseScale`)."""
        return self.tracker.noise

    @property
    def known_critical_batch(self) -> float | None:
        """The known B* at the policy's own LR; None when none is known."""
        return self.tracker.known

    def critical_estimate(self, b_simple: float | None = None) -> float:
        """The current B* estimate (:class:`~rlvr_schedule.policy.tracker.CriticalBatchTracker`),
        divided by the stage's LR ratio to the rule; NaN before the noise estimate is ready."""
        return self.tracker.critical_estimate(b_simple, self._scale)

    def propose(self, record: StepRecord) -> Decision:
        """Fold ``record`` into the clocks, ask the triggers in order, and pass the first proposal
        through the gate: the decision for the next update."""
        run, cur = self.run, self._stages[-1]
        if self.clock is not None:  # the record's rollouts ran at the stage in effect
            self.clock.spend(max(record.samples - run.samples, 0), cur.batch, cur.lr)
        run.records += 1
        run.samples = record.samples
        self.price.update(record.batch, step_seconds(record.extra))
        stf = self.forecast.update(record)
        b_simple = self.tracker.update(record)
        alarm, faulted = self._run_detectors(record) if self.detectors else (None, False)
        bstar = self.tracker.estimate(b_simple, self._scale)
        decision = None
        auto = self._auto(record, cur, bstar)
        if auto is not None:  # picked once, unpaced; when it does not move, the others are asked
            decision = self._gate(record, cur, auto, "")
        if decision is None or not decision.switched:
            proposal, note = self._failure(record, cur, stf, alarm)
            held = run.holding
            if proposal is None:
                proposal = self._tracking(record, cur, bstar)
            decision = self._gate(record, cur, proposal, note, held=held)
        if decision.switched and faulted:  # a detector raised: its alarm may be missing
            run.failure_switch = False
            return self._decision(record, "held: a plugin raised on this record", trigger=decision.trigger)
        return decision

    def setup_warnings(self) -> list[str]:
        """A failure clock too short to switch ahead of (:func:`~rlvr_schedule.policy.rules.clock_warnings`)."""
        return rules.clock_warnings(self.config, self.clock, self.current.batch, self.current.lr)

    def _lr_scale(self, stage: Stage) -> float:
        """The stage's LR relative to the LR rule at its batch (1.0 until a failure switch)."""
        return stage.lr / self._lr(stage.batch)

    # --- the triggers, in the order they are asked ---------------------------------------------
    def _auto(self, record: StepRecord, cur: Stage, bstar: float) -> Proposal | None:
        """``initial_batch: auto`` without a known B*: the first estimate sets the batch, once."""
        if not self.run.auto_pending:
            return None
        frac = rules.operating_fraction_at(self.config, bstar, self.price.value())
        return triggers.auto_start(bstar, frac, cur.batch, record.micro_batch)

    def _failure(
        self, record: StepRecord, cur: Stage, stf: float, alarm: str | None
    ) -> tuple[Proposal | None, str]:
        """The failure triggers: the sweep's clock, then the live forecast (``forecast: on``; it can
        only come earlier than the clock), then an alarm. (proposal, note): the note says why a
        trigger was held (``run.holding``), or what an advisory forecast said."""
        cfg, run = self.config, self.run
        nxt = self._next_stage(cur)
        p = self.clock.propose(cur.batch, cur.lr, nxt) if self.clock is not None else None
        note = ""
        if p is None:
            said = self._forecast_says(stf, nxt)
            if said is not None and cfg.forecast == "on":
                p = said
            elif said is not None and cfg.forecast == "advisory" and stf > 0:
                # kept in the decision only (the collapse watch raises it only where a host opts
                # in: ``default_detectors(forecast=True)``); a trend already past its threshold
                # ("collapse in 0") is no forecast
                note = f"advisory (forecast: advisory, the batch stays): {said.reason}"
                if not run.advised:
                    log.debug("two-clock: %s", note)
                    run.advised = True
        if p is None:
            p = triggers.alarm_trigger(alarm, cfg.switch_on_alarm, nxt)
        if p is None:
            run.holding = False
            return None, note
        if self._expo <= 0:  # a switch cannot postpone the failure: hold, and say so
            hold = (
                f"failure forecast: hold (failure_exponent {cfg.failure_exponent:g}, failure_lr_exponent "
                f"{cfg.failure_lr_exponent:g}: a switch cannot postpone the failure; {p.reason})"
            )
            if not run.holding:
                log.info("two-clock: %s", hold)
            run.holding = True
            return None, hold
        run.holding = False
        b = nxt[0]
        if b > cur.batch:
            why = f"{p.reason}: batch x {b / cur.batch:g}, LR x {b / cur.batch:g}^{cfg.failure_lr_exponent:g}"
        else:
            why = f"{p.reason}: no larger batch or stage left, LR / sqrt({cfg.growth:g})"
        return dataclasses.replace(p, reason=why), ""

    def _next_stage(self, cur: Stage) -> tuple[int, float]:
        """Where a failure switch goes (:func:`triggers.next_failure_stage`: batch x growth with
        the LR x k^q, LR / sqrt(growth) at the largest batch); on the rule (q = e) the rule's LR
        exactly."""
        cfg = self.config
        b, lr = triggers.next_failure_stage(
            cur.batch,
            cur.lr,
            growth=cfg.growth,
            lr_exponent=cfg.failure_lr_exponent,
            constraints=self.constraints,
        )
        if b > cur.batch and cfg.failure_lr_exponent == self._rule_e:
            lr = self._lr(b) * self._lr_scale(cur)
        return b, lr

    def _forecast_says(self, stf: float, nxt: tuple[int, float]) -> Proposal | None:
        """What the live forecast proposes this record (None when it says nothing)."""
        cfg = self.config
        fc = self.forecast
        if fc.samples - fc.start_samples < fc.min_samples:
            return None
        # cheapest first: the part left (the cached fit), then the slope's band (a t quantile)
        left = fc.fraction_left(stf)
        if left < cfg.failure_switch_fraction and not fc.significant:
            left = math.nan
        evidence = int(fc.samples - fc.start_samples)
        return triggers.forecast_trigger(left, cfg.failure_switch_fraction, stf, evidence, nxt)

    def _tracking(self, record: StepRecord, cur: Stage, bstar: float) -> Proposal | None:
        """The B* tracker: up once the target is ``track_step`` above the batch, down once
        ``track_step``^2 below it (not below the last failure switch's batch, nor 2 x the
        micro-batch, where the noise estimate would go blind)."""
        cfg = self.config
        if not (cfg.track_critical_batch and math.isfinite(bstar)):
            return None
        frac = rules.operating_fraction_at(cfg, bstar, self.price.value())
        up = triggers.track_up(bstar, frac, cur.batch, cfg.track_step)
        if up is not None:
            return up
        keep = self.constraints.snap(2 * record.micro_batch, "up") if record.micro_batch else 0
        return triggers.track_down(bstar, frac, cur.batch, cfg.track_step, max(self.run.floor, keep))

    # --- the gate --------------------------------------------------------------------------------
    def set_constraints(self, constraints: BatchConstraints) -> None:
        """Replace the grid the gate snaps to (e.g. the host's runnable batches)."""
        self.constraints = constraints

    def _gate(
        self, record: StepRecord, cur: Stage, p: Proposal | None, note: str, *, held: bool = False
    ) -> Decision:
        """The one gate: snap the proposal to the runnable grid (:attr:`constraints`), then the
        pacing (the streak of consecutive records with a trigger, ``max_stages``,
        ``min_stage_samples``); the decision says which held it. It decides by the proposal's kind
        and fields; ``held``: a failure trigger is held (``note`` says why), said beside the reason."""
        cfg, run = self.config, self.run
        c = self.constraints
        room = len(self._stages) < cfg.max_stages
        batch, lr = cur.batch, cur.lr
        grid_note = ""
        if p is not None:
            batch = c.snap(p.batch, p.snap)
            own = getattr(self, "_own_constraints", None)  # set when a host published its grid
            if own is not None and own.snap(p.batch, p.snap) != batch:
                grid_note = (
                    f"; snapped to the host's grid (multiples of {c.multiple}): "
                    f"{own.snap(p.batch, p.snap)} -> {batch}"
                )
            if not p.paced and p.lo:
                batch = max(batch, c.snap(p.lo, "up"))
            lr = p.lr if p.lr is not None else self._lr(batch) * self._lr_scale(cur)
            if not p.paced:  # the auto start: picked once, no pacing
                if room and batch != cur.batch:
                    return self._switch(record, batch, lr, p, p.reason + grid_note)
                run.auto_pending = False
                return self._decision(record, note)
            if not p.failure and not (p.lo <= batch <= p.hi):  # the snapped move is too small
                p = None
        run.failure_switch = p is not None and p.failure
        if p is None:
            if run.streak:
                run.streak = run.streak_samples = 0
            return self._decision(record, note)
        why = p.reason
        if p.kind in ("track_up", "track_down"):
            why = f"{why} -> batch {batch}"
        why += grid_note
        if held:
            why = f"{why}; {note}"
        run.streak += 1
        run.streak_samples += record.batch
        if run.streak_samples < cfg.hysteresis_samples:
            return self._decision(
                record,
                f"trigger {run.streak_samples}/{cfg.hysteresis_samples} rollouts: {why}",
                trigger=p.kind,
            )
        if not room:
            return self._decision(
                record, f"held: max_stages {cfg.max_stages} reached ({why})", trigger=p.kind
            )
        if not (p.lo <= batch <= p.hi) or (batch == cur.batch and lr == cur.lr):
            return self._decision(record, f"held: batch at its maximum ({why})", trigger=p.kind)
        if record.samples - run.last_switch < cfg.min_stage_samples:
            return self._decision(
                record, f"held: min_stage_samples {cfg.min_stage_samples} ({why})", trigger=p.kind
            )
        return self._switch(record, batch, lr, p, why)

    def _switch(self, record: StepRecord, batch: int, lr: float, p: Proposal, reason: str) -> Decision:
        self.run.failure_switch = p.failure
        return Decision(
            step=record.step,
            samples=record.samples,
            batch=batch,
            lr=lr,
            stage=len(self._stages),
            switched=True,
            reason=reason,
            trigger=p.kind,
        )

    def _lr(self, batch: int) -> float:
        cfg = self.config
        return float(lr_for_batch(batch, self.base_batch, cfg.base_lr, rule=cfg.lr_rule))

    def _committed(self, d: Decision) -> None:
        run = self.run
        run.streak = run.streak_samples = 0
        run.last_switch = d.samples
        run.last_switch_step = run.records
        run.auto_pending = False
        # the trend changes with batch and LR: a fresh window, from which the part left is counted
        self._scale = self._lr_scale(self.current)
        if run.failure_switch:
            run.floor = self.current.batch
            if self.clock is not None:
                self.clock.restart()
            run.advised = False
            self.forecast.restart()
            run.failure_switch = False

    # --- what the host can plan for (policy/reachable.py) -----------------------------------------
    def reachable_batches(
        self, steps: int, *, samples: int | None = None, noise_estimate: bool = True
    ) -> list[float]:
        """The largest rollout batch each of the next ``steps`` updates can run at
        (:func:`~rlvr_schedule.policy.reachable.reachable_batches`)."""
        return reachable.reachable_batches(self, steps, samples=samples, noise_estimate=noise_estimate)

    def largest_reachable_batch(
        self, steps: int | None = None, *, samples: int | None = None, noise_estimate: bool = True
    ) -> float | None:
        """The largest batch the policy can switch to within ``steps`` more updates
        (:func:`~rlvr_schedule.policy.reachable.largest_reachable_batch`)."""
        return reachable.largest_reachable_batch(self, steps, samples=samples, noise_estimate=noise_estimate)

    # --- detectors -----------------------------------------------------------------------------
    def _run_detectors(self, record: StepRecord) -> tuple[str | None, bool]:
        """Update every detector: (the first alarm as a reason string or None, whether one faulted)."""
        alarm, faulted = None, False
        for i, det in enumerate(self.detectors):
            a = det.update(record)
            if a is None:
                continue
            if i < self._n_builtin:
                if alarm is None:
                    alarm = f"alarm {a.name}: {a.message}"
                continue
            if getattr(a, "fault", False):
                faulted = True
                continue
            if alarm is None:
                name = getattr(det, "name", None) or getattr(a, "name", None) or type(det).__name__
                msg = getattr(a, "message", "")
                alarm = f"alarm {name}" + (f": {msg}" if msg else "")
        return alarm, faulted

    # --- state (policy/state.py) -----------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        return state.save(self)

    def _load_state(self, saved: Mapping[str, Any]) -> None:
        state.load(self, saved)

    def __repr__(self) -> str:
        cur = self.current
        return f"TwoClockScheduler(stage={len(self._stages) - 1}, batch={cur.batch}, lr={cur.lr:g})"
