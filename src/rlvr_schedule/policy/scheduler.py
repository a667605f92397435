"""The two-clock policy: start below the critical batch, follow it as it rises, mind the failure clock.

Progress clock: rollouts to a given progress grow as E(B)/E(0) = 1/(1 - B/2B*) (THEORY section 3),
so the operating point follows the user's rollout tolerance: ``sample_tolerance`` 0.3 gives
B = 2B* x 0.3/1.3 = 0.46 B*. B* is a known value (e.g.
``fit_sweep``'s) or the online gradient-noise estimate B_simple; since B_simple is LR-free while
B* ~ 1/lr, B_simple serves as a *relative* tracker (its ratio to its first value times the known
B*). As B* rises the batch follows a continuous target (fraction x estimate, snapped), moving
once the target is ``track_step`` above the current batch, as the Pollux rule re-optimises.
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
:meth:`TwoClockScheduler.propose` reads as triggers (``policy/triggers.py``: auto start, failure
clock, forecast, alarm, B* tracker up and down, in that order) and one gate (``_gate``: snap to
``self.constraints``, then the pacing).
Every trigger must hold for ``hysteresis_samples`` rollouts of consecutive records, a stage runs
``min_stage_samples`` rollouts before the next switch, and there are at most ``max_stages``: every
rate limit counts rollouts, so it lasts as long in data at every batch. Keys of earlier versions
(policy v2's horizon trigger, the record-counted limits) are translated or refused on load
(:data:`REMOVED`, :data:`TRANSLATED`): there is one code path. Each record costs O(1) amortised work;
the state is a bounded window plus at most ``max_stages`` stages.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlvr_schedule.clocks import (
    EntropyCollapse,
    FailureForecast,
    GradientNoiseScale,
    GradNormSpike,
    KLBlowup,
    RewardCrash,
    ZeroVarianceGroups,
)
from rlvr_schedule.errors import ConfigError
from rlvr_schedule.policy import triggers
from rlvr_schedule.policy.base import Schedule, decode_floats, encode_floats
from rlvr_schedule.policy.constraints import BatchConstraints
from rlvr_schedule.policy.triggers import FailureClockTrigger, Proposal
from rlvr_schedule.records import Decision, Stage, StepRecord
from rlvr_schedule.theory.scaling import RULES, lr_for_batch

__all__ = ["PolicyConfig", "TwoClockScheduler"]

log = logging.getLogger("rlvr_schedule.policy")

_STATE_KIND = "two_clock"
#: Signals the failure forecast can follow (entropy and reward fall towards collapse, the others rise).
SIGNALS = ("entropy", "reward_mean", "kl", "grad_norm", "clip_frac", "frac_zero_std")
#: Built-in failure detectors (``rlvr_schedule.clocks``) that ``detectors`` may name.
DETECTORS = {c.name: c for c in (EntropyCollapse, RewardCrash, GradNormSpike, KLBlowup, ZeroVarianceGroups)}


_V2 = (
    "policy v2 (failure_switch_fraction 0 and its horizon trigger) was removed in policy v3; the "
    "forecast trigger is failure_switch_fraction (the part of the stage's way to the forecast "
    "collapse left, in (0, 1)) with forecast_samples (rollouts of evidence), or forecast: off"
)
#: Keys of earlier versions that no v3 knob means: a file (or a saved config) that gives them gets a
#: ConfigError naming the keys to give instead (``None``: an earlier ``to_dict``'s "unset" loads).
REMOVED = {
    "hysteresis": "it counted records; give hysteresis_samples, which counts rollouts "
    "(records x the batch: 3 records at batch 16 = 48, the default)",
    "min_stage_steps": "it counted updates; give min_stage_samples, which counts rollouts "
    "(updates x the batch: 10 updates at batch 16 = 160, the default)",
    "auto_records": "it counted records; give estimate_samples, which counts rollouts "
    "(records x the batch: 100 records at batch 16 = 1600, the default)",
    "margin": "the horizon trigger (margin x horizon_steps x the next batch) of " + _V2,
    "horizon_steps": "the horizon trigger (margin x horizon_steps x the next batch) of " + _V2,
    "forecast_window": "a forecast window counted in records, of " + _V2,
}
#: Keys of earlier versions translated exactly into a v3 knob on load (with a ``FutureWarning``).
TRANSLATED = {
    "critical_fraction": "it duplicated sample_tolerance: a fraction f of B* is sample_tolerance "
    "f / (2 - f) (PolicyConfig.tolerance_for(f)); translated",
    "min_samples_between": "rate limits merged: it is min_stage_samples (rollouts a stage runs "
    "before the next switch); translated",
}
#: Policy v2's values of its horizon trigger and window: what configs saved by v3 before this
#: version carried, with no effect (they load quietly and are dropped; any other value is refused).
V2_DEFAULTS: dict[str, Any] = {"margin": 2.0, "horizon_steps": 10, "forecast_window": 200}
#: Old keys by kind, for the file loader's number coercion (so that its error is the one below).
OLD_COUNTS = frozenset(
    {
        "hysteresis",
        "min_stage_steps",
        "auto_records",
        "horizon_steps",
        "forecast_window",
        "min_samples_between",
    }
)
OLD_FLOATS = frozenset({"margin", "critical_fraction"})
#: What the live forecast may do: "on" (switch, earlier than the sweep's clock where one is given;
#: the clock where none is), "advisory" (warn in the decision and the log, the batch stays), "off".
FORECAST_MODES = ("advisory", "on", "off")
#: Rollouts over which the forecast's early level is taken (as :class:`EntropyCollapse`'s).
REFERENCE_SAMPLES = 512
#: Records the forecast's window holds at most (its memory bound).
FORECAST_RECORDS = 1000

#: The knobs by what they set (start, tracking, failure, pacing, constraints). A file may give a
#: group as a mapping (``pacing: {hysteresis_samples: 48}``) or its knobs at the top level.
GROUPS = {
    "start": (
        "initial_batch",
        "critical_batch",
        "critical_batch_lr",
        "sample_tolerance",
        "fallback_batch",
        "base_lr",
        "base_batch",
        "lr_rule",
    ),
    "tracking": ("track_critical_batch", "track_step", "estimate_samples"),
    "failure": (
        "failure_samples",
        "failure_samples_interval",
        "failure_batch",
        "failure_lr",
        "failure_clock_fraction",
        "failure_clock_floor",
        "forecast",
        "failure_signal",
        "failure_fraction",
        "failure_threshold",
        "failure_switch_fraction",
        "failure_lr_exponent",
        "failure_exponent",
        "growth",
        "forecast_samples",
        "detectors",
        "switch_on_alarm",
    ),
    "pacing": ("hysteresis_samples", "min_stage_samples", "max_stages"),
    "constraints": ("constraints",),
}


def _count(v: Any, *, zero: bool) -> bool:
    return not isinstance(v, bool) and isinstance(v, int) and v >= (0 if zero else 1)


def _finite(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)


@dataclass
class PolicyConfig:
    """Settings of :class:`TwoClockScheduler`, by group (:data:`GROUPS`); every count is in rollouts.

    Start (progress clock: where on E(B)/E(0) = 1/(1 - B/2B*) the run begins)
    initial_batch: an int, or "auto": the operating fraction x the critical batch (snapped to the
        nearest runnable batch; down before issue 20's second round), taken from
        ``critical_batch`` when given (e.g. ``fit_sweep``'s), else from the online gradient-noise
        estimate B_simple once ``estimate_samples`` rollouts feed it (running ``fallback_batch``
        until then).
    critical_batch, critical_batch_lr: a known B* and the LR at ``base_batch`` it was measured at
        (None: ``base_lr``); B* ~ 1/r, so the policy uses critical_batch x critical_batch_lr / base_lr.
    sample_tolerance: extra rollouts accepted against B -> 0 (0.3: 30%), i.e. how far along the
        progress clock's cost curve the batch sits: the operating fraction of B* is
        2 x tol / (1 + tol) (0.46 at the default; :meth:`tolerance_for` inverts it). Larger spends
        rollouts to save updates; on the LR rule it leaves the failure clock per rollout unchanged.
        0.3 (was 0.175, 0.30 B*; 0.10, 0.18 B* before issue 20) was chosen in issue 20's fourth
        round on the synthetic tasks of docs/RESULTS.md 3a and the held-out tasks h1-h9 already
        run: 0.275-0.3 keep the sweep-clock policy within 0.6x the updates and 1.15x the rollouts
        of the best-reward constant, with its best reward non-inferior, on 8 of those 13 tasks
        (0.175: 7); the rollouts are what a larger tolerance spends
        (benchmarks/evidence/results/schedules_i20_tuning.md).
    fallback_batch: the batch before the estimate is ready (``initial_batch: auto``, no B* known):
        where on the progress clock the run sits while B_simple is measured.
    base_lr, base_batch, lr_rule: the LR at ``base_batch`` (None: the initial batch) and how it
        scales with batch on tracking switches ("sqrt" for Adam, "linear" for SGD, "constant"); on
        the rule, drift per rollout (the failure clock's rate) is batch-invariant.

    Tracking (progress clock: stay at the same fraction of a B* that moves)
    track_critical_batch: move the batch to the fraction x the current B* estimate (snapped to
        the nearest runnable batch) once that is ``track_step`` x above the current batch, or ``track_step``^2 x below it (not
        below the batch of the last failure switch, which deliberately runs above the target, nor
        below 2 x the records' micro-batch, where the noise estimate would go blind).
        The estimate: the known B* x B_simple / B_simple at rollout 0 (a line through the
        gradient-noise EMA's values at their mean rollout positions, extrapolated back to 0),
        divided by the LR's ratio to the rule (B* ~ 1/r). Moves the progress clock only; on the
        rule it leaves the failure clock per rollout unchanged.
    estimate_samples: rollouts of records carrying both gradient norms before the B* estimate is
        used (by ``auto`` and tracking; 1600). The estimate also waits for its EMA's horizon in
        records (1 / (1 - beta) = 100 at the default beta 0.99): the micro-batch half of the
        two-batch estimate does not sharpen with the batch, and on the synthetic tasks a start
        taken after 20-50 records of a larger batch landed at 0.3-4.5x its target. So at batch 16
        and above the horizon decides (100 records, as before), below it the rollouts do.
        Larger: a steadier start, a later first move.

    Failure (failure clock: switch before it runs out)
    failure_samples, failure_samples_interval, failure_batch, failure_lr: the sweep's failure clock
        (``SweepFit.failure_clock()``, what ``rlvr-schedule fit`` measures: rollouts to failure,
        their interval, and the batch and LR they were measured at; None: the policy's base batch
        and the rule's LR there). With it, the failure-clock trigger
        (:class:`~rlvr_schedule.policy.triggers.FailureClockTrigger`) spends the interval's lower
        end at 1/F(B, lr) per rollout, F(B, lr) = F (B/B_ref)^(alpha + e) (r_ref / lr), and
        switches once a stage has spent ``failure_clock_fraction`` (0.5) of what was left at its
        start: the first switch at half the lower bound, but not before ``failure_clock_floor``
        (0.45) of the pooled clock (a wide interval from few failures puts the lower bound far
        below it). ``rlvr-schedule plan`` writes the same switches down.
    forecast: what the live forecast (:class:`rlvr_schedule.clocks.FailureForecast`) may do:
        "advisory" (default: it warns, in the decision's reason and once per stage in the log, and
        does not move the batch; it has not yet met its skill target on recorded runs), "on" (a
        failure trigger: earlier than the sweep's clock where one is given, the clock where none
        is), "off".
    failure_signal, failure_fraction: the forecast (:class:`rlvr_schedule.clocks.FailureForecast`)
        follows this signal to ``failure_fraction`` x its level over the first 512 rollouts
        (default 0.1 for falling signals such as entropy, 10 for rising ones such as kl): where
        the failure clock runs out.
    failure_switch_fraction: (``forecast: on``) switch once the signal's fitted trend has less than this fraction of
        the way left from its level at the last (re)start to the collapse level (0.25), in (0, 1).
        Larger: earlier, more switches. (0 was policy v2, removed: give ``forecast: off``.)
    failure_threshold: an absolute collapse level of the signal (e.g. entropy 0.5), used instead of
        ``failure_fraction`` x its early level where the level is known in advance (None: relative).
    growth: batch factor per switch. failure_lr_exponent: q, the LR x growth^q at a failure switch.
        0 (default): the LR held, so per-rollout drift falls by growth^-(e - q) (e: the rule's
        exponent, 1/2 for sqrt) and the failure clock is postponed; q = e leaves the drift per
        rollout (and a sample clock) unchanged. At the largest batch (or the last stage) the LR is
        divided by sqrt(growth) instead.
    failure_exponent: alpha in failure samples ~ B^alpha (``FailureScalingFit.alpha_``, 0: a
        sample clock). It changes the arithmetic, not whether to switch: a failure switch postpones
        the remaining failure by growth^(alpha + e - q); where that exponent is <= 0 the policy
        holds ("failure forecast: hold").
    forecast_samples: rollouts of evidence a forecast needs before it may trigger a switch,
        counted from the start or the last failure switch (2048). The forecast fits the later half
        of those rollouts (an early transient leaves the window) and must also be confident: the
        slope's 90% band excludes a flat trend. Larger: fewer false alarms, later switches (a
        failure clock shorter than about 4x this cannot be caught in time).
    detectors: built-in :mod:`rlvr_schedule.clocks` detectors to run (by name); with
        ``switch_on_alarm`` their alarms, and those of plugin detectors, are failure triggers too:
        a failure switch on an alarm, where the failure clock ran out faster than forecast.

    Pacing (neither clock: how fast the policy may react; each limit counts rollouts, so it
    lasts as long in data at every batch)
    hysteresis_samples: a trigger must hold on consecutive records carrying this many rollouts
        (48: 3 updates at batch 16, 1 at 64). min_stage_samples: rollouts a stage runs before the
        next switch (160), so the forecast and the noise estimate see the new batch first.
    max_stages: stages in all, the initial one included (so at most max_stages - 1 switches, of
        either clock): once spent, neither clock moves the batch or the LR again. Fine tracking
        steps spend them fast (on the drift-15 synthetic tasks tracking used them up before the
        failure clock ran out: 15.0 switches per run at the default 16).

    Constraints: :class:`BatchConstraints` (group size, divisor, min and max batch).

    Keys of earlier versions: :data:`TRANSLATED` ones become their knob on load (with a
    ``FutureWarning``); :data:`REMOVED` ones (policy v2's horizon trigger, the limits counted in
    records or updates) raise a ConfigError naming the keys to give instead.
    """

    # start
    initial_batch: int | str = "auto"
    critical_batch: float | None = None
    critical_batch_lr: float | None = None
    sample_tolerance: float = 0.3
    fallback_batch: int | None = None
    base_lr: float = 1e-6
    base_batch: int | None = None
    lr_rule: str = "sqrt"
    # tracking
    track_critical_batch: bool = True
    track_step: float = 2.0**0.25
    estimate_samples: int = 1600
    # failure
    failure_samples: float | None = None
    failure_samples_interval: tuple[float, float] | None = None
    failure_batch: float | None = None
    failure_lr: float | None = None
    failure_clock_fraction: float = 0.5
    failure_clock_floor: float = 0.45
    forecast: str = "advisory"
    failure_signal: str = "entropy"
    failure_fraction: float | None = None
    failure_threshold: float | None = None
    failure_switch_fraction: float = 0.25
    failure_lr_exponent: float = 0.0
    failure_exponent: float = 0.0
    growth: float = 2.0
    forecast_samples: int = 2048
    detectors: tuple[str, ...] = ("entropy_collapse", "reward_crash")
    switch_on_alarm: bool = True
    # pacing
    hysteresis_samples: int = 48
    min_stage_samples: int = 160
    max_stages: int = 16
    # constraints
    constraints: BatchConstraints = field(default_factory=BatchConstraints)

    def __post_init__(self) -> None:
        if isinstance(self.constraints, Mapping):
            self.constraints = BatchConstraints.from_dict(self.constraints)
        if isinstance(self.detectors, list):
            self.detectors = tuple(self.detectors)
        if isinstance(self.failure_samples_interval, list):
            self.failure_samples_interval = (
                self.failure_samples_interval[0],
                self.failure_samples_interval[1],
            )
        self.validate()

    @staticmethod
    def tolerance_for(fraction: float) -> float:
        """The ``sample_tolerance`` whose operating fraction of B* is ``fraction``: f / (2 - f),
        moved by up to 4 ulps so that :attr:`operating_fraction` gives f back exactly, or else the
        nearest value above it (a batch of exactly f x B* then snaps to itself, not one step down)."""
        f = float(fraction)
        t0 = lo = hi = f / (2.0 - f)
        cands = [t0]
        for _ in range(4):
            lo, hi = math.nextafter(lo, -math.inf), math.nextafter(hi, math.inf)
            cands += [lo, hi]
        above = [t for t in cands if 2.0 * t / (1.0 + t) >= f]
        if not above:
            return t0
        return min(above, key=lambda t: (2.0 * t / (1.0 + t) - f, abs(t - t0)))

    @property
    def falling(self) -> bool:
        """Whether the failure signal falls towards collapse (entropy, reward)."""
        return self.failure_signal in ("entropy", "reward_mean")

    @property
    def operating_fraction(self) -> float:
        """Batch / B*, from E(B)/E(0) = 1/(1 - B/2B*) = 1 + ``sample_tolerance``."""
        return 2.0 * self.sample_tolerance / (1.0 + self.sample_tolerance)

    @property
    def postpone_exponent(self) -> float:
        """alpha + e - q: a failure switch by k moves the remaining failure by k^this (e: the LR
        rule's exponent, 1/2 for sqrt)."""
        e = {"sqrt": 0.5, "linear": 1.0}.get(self.lr_rule, 0.0)
        return float(self.failure_exponent) + e - float(self.failure_lr_exponent)

    @property
    def fraction(self) -> float:
        """The collapse level as a fraction of the signal's early level."""
        if self.failure_fraction is not None:
            return self.failure_fraction
        return 0.1 if self.falling else 10.0

    def validate(self, *, source: str | None = None) -> None:
        """ConfigError naming the first invalid field."""

        def bad(name: str, msg: str) -> ConfigError:
            return ConfigError(msg, source=source, field=name)

        def pos_int(name: str, v: Any, *, zero: bool = False, optional: bool = False) -> None:
            if v is None and optional:
                return
            if not _count(v, zero=zero):
                raise bad(name, f"must be a {'non-negative' if zero else 'positive'} integer, got {v!r}")

        def pos_num(name: str, v: Any, *, zero: bool = False, optional: bool = False) -> None:
            if v is None and optional:
                return
            if not _finite(v) or (v < 0 if zero else v <= 0):
                raise bad(
                    name, f"must be a finite {'non-negative' if zero else 'positive'} number, got {v!r}"
                )

        if self.initial_batch != "auto":
            pos_int("initial_batch", self.initial_batch)
            if not self.constraints.is_valid(int(self.initial_batch)):
                c = self.constraints
                raise bad(
                    "initial_batch",
                    f"{self.initial_batch} is not a multiple of {c.multiple} "
                    f"(group_size x divisor) within [{c.lowest}, {c.highest}]",
                )
        pos_num("critical_batch", self.critical_batch, optional=True)
        pos_num("critical_batch_lr", self.critical_batch_lr, optional=True)
        pos_num("sample_tolerance", self.sample_tolerance)
        if self.sample_tolerance > 1:
            raise bad(
                "sample_tolerance", f"must be at most 1 (batch at most B*), got {self.sample_tolerance!r}"
            )
        pos_int("fallback_batch", self.fallback_batch, optional=True)
        pos_num("base_lr", self.base_lr)
        pos_int("base_batch", self.base_batch, optional=True)
        if self.lr_rule not in RULES:
            raise bad("lr_rule", f"must be one of {', '.join(RULES)}, got {self.lr_rule!r}")
        for name in ("switch_on_alarm", "track_critical_batch"):
            if not isinstance(getattr(self, name), bool):
                raise bad(name, f"must be true or false, got {getattr(self, name)!r}")
        pos_num("track_step", self.track_step)
        if self.track_step <= 1:
            raise bad("track_step", f"must be > 1 (a tracking move grows the batch), got {self.track_step!r}")
        pos_int("estimate_samples", self.estimate_samples, zero=True)
        if self.failure_signal not in SIGNALS:
            raise bad("failure_signal", f"must be one of {', '.join(SIGNALS)}, got {self.failure_signal!r}")
        pos_num("failure_fraction", self.failure_fraction, optional=True)
        if self.failure_fraction is not None and (self.failure_fraction < 1) != self.falling:
            raise bad(
                "failure_fraction",
                f"must be {'below' if self.falling else 'above'} 1 for "
                f"{self.failure_signal} (it {'falls' if self.falling else 'rises'} towards collapse), "
                f"got {self.failure_fraction!r}",
            )
        if self.failure_threshold is not None and not _finite(self.failure_threshold):
            raise bad("failure_threshold", f"must be a finite number or null, got {self.failure_threshold!r}")
        if _finite(self.failure_switch_fraction) and self.failure_switch_fraction == 0:
            raise bad("failure_switch_fraction", _V2)
        pos_num("failure_switch_fraction", self.failure_switch_fraction)
        if self.failure_switch_fraction >= 1:
            raise bad(
                "failure_switch_fraction",
                f"must be below 1 (the part of the failure clock left at "
                f"a switch), got {self.failure_switch_fraction!r}",
            )
        for name in ("failure_lr_exponent", "failure_exponent"):
            if not _finite(getattr(self, name)):
                raise bad(name, f"must be a finite number, got {getattr(self, name)!r}")
        pos_num("growth", self.growth)
        if self.growth <= 1:
            raise bad("growth", f"must be > 1 (the batch grows at each switch), got {self.growth!r}")
        pos_int("forecast_samples", self.forecast_samples)
        pos_num("failure_samples", self.failure_samples, optional=True)
        iv = self.failure_samples_interval
        if iv is not None:
            if not (isinstance(iv, (tuple, list)) and len(iv) == 2 and all(_finite(v) and v > 0 for v in iv)):
                raise bad(
                    "failure_samples_interval", f"must be [low, high] positive numbers or null, got {iv!r}"
                )
            if self.failure_samples is None or not iv[0] <= self.failure_samples <= iv[1]:
                raise bad(
                    "failure_samples_interval",
                    f"must hold failure_samples ({self.failure_samples!r}) between its ends, got {list(iv)!r}",
                )
        pos_num("failure_batch", self.failure_batch, optional=True)
        pos_num("failure_lr", self.failure_lr, optional=True)
        pos_num("failure_clock_fraction", self.failure_clock_fraction)
        if self.failure_clock_fraction > 1:
            raise bad(
                "failure_clock_fraction",
                f"must be at most 1 (the part of the clock a stage spends), got {self.failure_clock_fraction!r}",
            )
        pos_num("failure_clock_floor", self.failure_clock_floor, zero=True)
        if self.failure_clock_floor > 1:
            raise bad(
                "failure_clock_floor",
                f"must be at most 1 (a part of the pooled clock), got {self.failure_clock_floor!r}",
            )
        if self.forecast not in FORECAST_MODES:
            raise bad("forecast", f"must be one of {', '.join(FORECAST_MODES)}, got {self.forecast!r}")
        if not isinstance(self.detectors, (tuple, list)) or any(d not in DETECTORS for d in self.detectors):
            raise bad("detectors", f"must be a list of {', '.join(DETECTORS)}, got {self.detectors!r}")
        pos_int("hysteresis_samples", self.hysteresis_samples)
        pos_int("min_stage_samples", self.min_stage_samples, zero=True)
        pos_int("max_stages", self.max_stages)
        if not isinstance(self.constraints, BatchConstraints):
            raise bad("constraints", "must be a BatchConstraints or a mapping")

    def to_dict(self) -> dict[str, Any]:
        """Every knob by name: what :meth:`from_dict` reads."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["constraints"] = self.constraints.to_dict()
        d["detectors"] = list(self.detectors)
        if self.failure_samples_interval is not None:
            d["failure_samples_interval"] = list(self.failure_samples_interval)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, source: str | None = None) -> PolicyConfig:
        """From a config mapping (a file's, or :meth:`to_dict`'s of this or an earlier version);
        unknown keys and invalid values raise ConfigError naming them.

        Groups may come as mappings (``failure: {growth: 2}``). Old keys: :data:`TRANSLATED` ones
        give a ``FutureWarning`` naming the file, the key and its knob, and become that knob
        exactly; :data:`REMOVED` ones raise a ConfigError naming the keys to give instead, except
        policy v2's ``margin``, ``horizon_steps``, ``forecast_window`` at v2's own values, which
        configs saved by v3 carried with no effect (dropped). A previous version's ``legacy``
        mapping is read as top-level keys (its ``failure_threshold`` is the knob)."""
        kw = _flatten_groups(d, source)
        old_legacy = kw.pop("legacy", None)
        if old_legacy is not None:
            if not isinstance(old_legacy, Mapping):
                raise ConfigError(
                    f"must be a mapping of old keys, got {old_legacy!r}", source=source, field="legacy"
                )
            for k, v in old_legacy.items():
                if k in kw:
                    raise ConfigError(f"given twice (also as {k})", source=source, field=f"legacy.{k}")
                kw[k] = v

        def warn(k: str, why: str) -> None:
            where = f"{source}: " if source else ""
            warnings.warn(
                f"{where}schedule key {k!r} is deprecated (policy v3) and will be removed; {why}",
                FutureWarning,
                stacklevel=3,
            )

        old = {k: kw.pop(k) for k in list(kw) if k in REMOVED or k in TRANSLATED}
        old = {k: v for k, v in old.items() if v is not None}  # None: an earlier to_dict's "unset"
        if "critical_fraction" in old:
            f = old.pop("critical_fraction")
            if not _finite(f) or not 0 < f <= 1:
                raise ConfigError(
                    f"must be a number in (0, 1] (the operating fraction of B*), got {f!r}",
                    source=source,
                    field="critical_fraction",
                )
            warn("critical_fraction", TRANSLATED["critical_fraction"])
            kw["sample_tolerance"] = cls.tolerance_for(f)  # it overrode sample_tolerance
        between = old.pop("min_samples_between", 0)
        if between:
            if "min_stage_samples" in kw and kw["min_stage_samples"] != between:
                raise ConfigError(
                    "give min_stage_samples alone (min_samples_between is its old name)",
                    source=source,
                    field="min_samples_between",
                )
            warn("min_samples_between", TRANSLATED["min_samples_between"])
            kw["min_stage_samples"] = between
        v2 = _finite(kw.get("failure_switch_fraction")) and kw.get("failure_switch_fraction") == 0
        for k, v in old.items():
            if k in V2_DEFAULTS and v == V2_DEFAULTS[k] and not v2:
                continue  # a v3 saved config's inert copy of v2's value
            raise ConfigError(f"removed: {REMOVED[k]}", source=source, field=k)
        names = {f.name for f in dataclasses.fields(cls)}
        for k in kw:
            if k not in names:
                raise ConfigError(
                    f"unknown key (allowed: {', '.join(sorted(names))})", source=source, field=str(k)
                )
        kw["constraints"] = BatchConstraints.from_dict(kw.get("constraints"), source=source)
        if isinstance(kw.get("detectors"), list):
            kw["detectors"] = tuple(kw["detectors"])
        if isinstance(kw.get("failure_samples_interval"), list):
            iv = kw["failure_samples_interval"]
            kw["failure_samples_interval"] = tuple(iv) if len(iv) == 2 else iv
        cfg = object.__new__(cls)
        for f in dataclasses.fields(cls):
            val = (
                kw[f.name]
                if f.name in kw
                else (f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default)
            )
            setattr(cfg, f.name, val)
        cfg.validate(source=source)
        return cfg


def _flatten_groups(d: Mapping[str, Any], source: str | None) -> dict[str, Any]:
    """A config with its groups (``pacing: {...}``) merged into the top level."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if k in GROUPS and k != "constraints" and isinstance(v, Mapping):
            for kk, vv in v.items():
                if kk not in GROUPS[k]:
                    raise ConfigError(
                        f"not a {k} knob (its knobs: {', '.join(GROUPS[k])})",
                        source=source,
                        field=f"{k}.{kk}",
                    )
                if kk in d:
                    raise ConfigError(f"given twice (also as {kk})", source=source, field=f"{k}.{kk}")
                out[kk] = vv
        else:
            out[k] = v
    return out


class TwoClockScheduler(Schedule):
    """A :class:`~rlvr_schedule.policy.base.Schedule` driven by the progress and failure clocks.

    ``propose(record)`` folds the record into the online estimates and answers the (batch, lr) of
    the next update. ``detectors`` are extra failure detectors (plugins', see
    :meth:`rlvr_schedule.plugins.PluginHost.failure_detectors`) that run beside the built-in ones
    and whose alarms trigger too; one whose ``update`` returns a fault (an object with a true
    ``fault`` attribute: it raised, so its alarm may be missing) holds the stage on that record.
    """

    kind = _STATE_KIND
    version = 3

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
        self.noise = GradientNoiseScale()
        # the estimate is warm after estimate_samples rollouts and the EMA's own horizon in records
        # (100 at beta 0.99)
        self._est_samples = int(cfg.estimate_samples)
        self._est_records = math.ceil(1.0 / (1.0 - self.noise.beta) - 1e-9)
        self.detectors: list[Any] = [DETECTORS[n]() for n in cfg.detectors]
        self._n_builtin = len(self.detectors)
        self.detectors += list(detectors)
        c = cfg.constraints
        self._auto_pending = cfg.initial_batch == "auto" and cfg.critical_batch is None
        if cfg.initial_batch != "auto":
            batch = int(cfg.initial_batch)
            reason = "initial"
        elif cfg.critical_batch is not None:
            frac = cfg.operating_fraction
            known = float(self.known_critical_batch or cfg.critical_batch)
            batch = triggers.start_batch(known, frac, c)
            reason = f"initial: {frac:.3g} x critical batch {known:g}"
        else:
            batch = c.snap(cfg.fallback_batch or cfg.base_batch or c.lowest)
            reason = "initial: fallback until the gradient-noise estimate"
        self.base_batch = cfg.base_batch or batch
        self.constraints = c  # the grid the gate snaps to (set_constraints replaces it)
        self._rule_e = triggers.rule_exponent(cfg.lr_rule)
        self._advised = False  # an advisory forecast warned in this stage (logged once)
        self.clock: FailureClockTrigger | None = None
        if cfg.failure_samples is not None:
            ref_b = float(cfg.failure_batch or cfg.base_batch or batch)
            iv = cfg.failure_samples_interval
            self.clock = FailureClockTrigger(
                float(cfg.failure_samples),
                lower=float(iv[0]) if iv is not None else None,
                batch=ref_b,
                lr=float(cfg.failure_lr) if cfg.failure_lr is not None else self._lr_at(ref_b),
                exponent=cfg.failure_exponent,
                rule_exponent=self._rule_e,
                fraction=cfg.failure_clock_fraction,
                floor=cfg.failure_clock_floor,
                min_rollouts=cfg.min_stage_samples,
            )
        super().__init__([Stage(batch=batch, lr=self._lr(batch), reason=reason)])
        self._failure_switch = False  # the last proposal was a failure switch (restart the forecast)
        self._scale = 1.0
        self._expo = cfg.postpone_exponent
        self._streak = 0  # consecutive records with a trigger
        self._streak_samples = 0  # their rollouts
        self._records = 0
        self._samples = 0  # rollouts consumed, as of the last record
        self._noise_samples = 0  # rollouts of the records that fed the gradient-noise estimate
        self._warm = False  # the estimate has its records and rollouts (estimate_samples)
        self._last_switch = 0
        self._last_switch_step = 0
        self._bs_ref = math.nan  # B_simple when first estimated: the reference of the relative tracker
        self._pos_ref = math.nan  # the EMA's mean rollout position then
        self._b0 = math.nan  # B_simple extrapolated back to rollout 0, frozen once the span allows
        self._ps = 0.0  # EMA (the noise estimate's weights) of the rollout position of its records
        self._pw = 0.0
        self._floor = 0  # the batch of the last failure switch: tracking does not move below it
        self._holding = False  # a failure trigger is being held (sample clock); logged on entry

    def propose(self, record: StepRecord) -> Decision:
        """Fold ``record`` into the clocks, ask the triggers in order, and pass the first proposal
        through the gate: the decision for the next update."""
        cur = self._stages[-1]
        if self.clock is not None:  # the record's rollouts ran at the stage in effect
            self.clock.spend(max(record.samples - self._samples, 0), cur.batch, cur.lr)
        self._records += 1
        self._samples = record.samples
        stf = self.forecast.update(record)
        n0 = self.noise.n_updates
        b_simple = self.noise.update(record)
        if self.noise.n_updates != n0:  # the record entered the noise EMA: so does its position
            beta = self.noise.beta
            self._ps = beta * self._ps + (1 - beta) * float(record.samples)
            self._pw = beta * self._pw + (1 - beta)
            self._noise_samples += record.batch
        alarm, faulted = self._run_detectors(record) if self.detectors else (None, False)
        bstar = self._estimate(b_simple)
        decision = None
        auto = self._auto(record, cur, bstar)
        if auto is not None:  # picked once, unpaced; when it does not move, the others are asked
            decision = self._gate(record, cur, auto, "")
        if decision is None or not decision.switched:
            proposal, note = self._failure(record, cur, stf, alarm)
            if proposal is None:
                proposal = self._tracking(record, cur, bstar)
            decision = self._gate(record, cur, proposal, note)
        if decision.switched and faulted:  # a detector raised: its alarm may be missing
            self._failure_switch = False
            return self._decision(record, "held: a plugin raised on this record")
        return decision

    # --- policy --------------------------------------------------------------------------------
    @property
    def _pos(self) -> float:
        """The noise EMA's mean rollout position (the rollout count its value stands for)."""
        return self._ps / self._pw if self._pw > 0 else math.nan

    def _start_level(self) -> float:
        """B_simple at rollout 0: the frozen line's value there, else the reference itself."""
        return self._b0 if self._b0 == self._b0 else self._bs_ref  # NaN: not frozen yet

    def _maybe_freeze_b0(self, bs: float) -> None:
        """Fix B_simple at rollout 0 (the anchor of the relative tracker): the line through the
        reference (the EMA when first ready, at the EMA's mean rollout position then) and the EMA
        now (at its mean position), extrapolated back to rollout 0, once the line spans 6x the
        reference's distance from 0; clipped to a factor 2 of the reference. The reference alone
        reads B* at 0.5-0.7 of the truth for the whole run when B* rises early (issue 12); the
        line halves that bias on a fast-rising B* at some noise on a fixed one
        (``tests/core/test_policy_tracker.py``)."""
        ref, pa, pn = self._bs_ref, self._pos_ref, self._pos
        if self._b0 == self._b0 or not (math.isfinite(pn) and math.isfinite(pa)):
            return
        span = pn - pa
        if span > 0 and span >= 6.0 * pa:
            b0 = ref - (bs - ref) / span * pa
            self._b0 = min(max(b0, 0.5 * ref), 2.0 * ref)

    @property
    def known_critical_batch(self) -> float | None:
        """The known B* at the policy's own LR (``critical_batch`` rescaled from the LR it was
        measured at, B* ~ 1/r); None when none is known."""
        cfg = self.config
        if cfg.critical_batch is None:
            return None
        at = cfg.critical_batch_lr if cfg.critical_batch_lr is not None else cfg.base_lr
        return float(cfg.critical_batch) * at / cfg.base_lr

    def critical_estimate(self, b_simple: float | None = None) -> float:
        """The current B* estimate: the known B* x B_simple / B_simple at rollout 0
        (:meth:`_maybe_freeze_b0`); B_simple alone when no B* is known; divided by the stage's LR
        ratio to the rule (B* ~ 1/r). NaN before the gradient-noise estimate is ready."""
        bs = self.noise.b_simple if b_simple is None else b_simple
        ref = self._bs_ref
        if math.isnan(ref) or math.isnan(bs) or ref <= 0:
            return math.nan
        known = self.known_critical_batch
        est = bs if known is None else known * bs / self._start_level()
        # B* ~ 1/r: an LR held below the rule (failure switches) raises it
        return est / self._scale  # the current stage's _lr_scale, kept on commit and load

    def _lr_scale(self, stage: Stage) -> float:
        """The stage's LR relative to the LR rule at its batch (1.0 until a failure switch)."""
        return stage.lr / self._lr(stage.batch)

    # --- the triggers, in the order they are asked ---------------------------------------------
    def _estimate(self, b_simple: float) -> float:
        """The B* estimate once the gradient-noise estimate is warm (NaN before)."""
        if not self._warm:  # both counts only grow: checked until they pass
            self._warm = (
                self._noise_samples >= self._est_samples and self.noise.n_updates >= self._est_records
            )
        estimated = self._warm and math.isfinite(b_simple) and b_simple > 0
        if not estimated:
            return math.nan
        if math.isnan(self._bs_ref):
            self._bs_ref, self._pos_ref = b_simple, self._pos
        self._maybe_freeze_b0(b_simple)
        return self.critical_estimate(b_simple)

    def _auto(self, record: StepRecord, cur: Stage, bstar: float) -> Proposal | None:
        """``initial_batch: auto`` without a known B*: the first estimate sets the batch, once."""
        if not self._auto_pending:
            return None
        p = triggers.auto_start(bstar, self.config.operating_fraction, cur.batch, record.micro_batch)
        return p

    def _failure(
        self, record: StepRecord, cur: Stage, stf: float, alarm: str | None
    ) -> tuple[Proposal | None, str]:
        """The failure triggers: the sweep's clock, then the live forecast (``forecast: on``; it can
        only come earlier than the clock), then an alarm. (proposal, note): the note says why a
        trigger was held, or what an advisory forecast said."""
        cfg = self.config
        nxt = self._next_stage(cur)
        reason = ""
        if self.clock is not None:
            p = self.clock.propose(cur.batch, cur.lr, nxt)
            reason = p.reason if p is not None else ""
        note = ""
        if not reason:
            said = self._forecast_says(cur, stf)
            if said and cfg.forecast == "on":
                reason = said
            elif said and cfg.forecast == "advisory":
                note = f"advisory (forecast: advisory, the batch stays): {said}"
                if not self._advised:
                    log.warning("two-clock: %s", note)
                    self._advised = True
        if not reason:
            reason = triggers.alarm_trigger(alarm, cfg.switch_on_alarm) or ""
        if not reason:
            self._holding = False
            return None, note
        if self._expo <= 0:  # a switch cannot postpone the failure: hold, and say so
            hold = (
                f"failure forecast: hold (failure_exponent {cfg.failure_exponent:g}, failure_lr_exponent "
                f"{cfg.failure_lr_exponent:g}: a switch cannot postpone the failure; {reason})"
            )
            if not self._holding:
                log.info("two-clock: %s", hold)
            self._holding = True
            return None, hold
        self._holding = False
        kind = "failure_clock" if reason.startswith("failure clock") else "alarm"
        if reason.startswith("failure forecast") or reason.startswith("forecast failure"):
            kind = "forecast"
        b, lr = nxt
        if b > cur.batch:
            why = f"{reason}: batch x {b / cur.batch:g}, LR x {b / cur.batch:g}^{cfg.failure_lr_exponent:g}"
        else:
            why = f"{reason}: no larger batch or stage left, LR / sqrt({cfg.growth:g})"
        return triggers.Proposal(kind, b, why, lr=lr, snap="up", lo=b, hi=b, failure=True), ""

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

    def _forecast_says(self, cur: Stage, stf: float) -> str:
        """What the live forecast says this record ("" when it says nothing)."""
        cfg = self.config
        fc = self.forecast
        if fc.samples - fc.start_samples < fc.min_samples:
            return ""
        # cheapest first: the part left (the cached fit), then the slope's band (a t quantile)
        left = fc.fraction_left(stf)
        if left < cfg.failure_switch_fraction and not fc.significant:
            left = math.nan
        return (
            triggers.forecast_trigger(
                left, cfg.failure_switch_fraction, stf, int(fc.samples - fc.start_samples)
            )
            or ""
        )

    def _tracking(self, record: StepRecord, cur: Stage, bstar: float) -> Proposal | None:
        """The B* tracker: up once the target is ``track_step`` above the batch, down once
        ``track_step``^2 below it (not below the last failure switch's batch, nor 2 x the
        micro-batch, where the noise estimate would go blind)."""
        cfg = self.config
        if not (cfg.track_critical_batch and math.isfinite(bstar)):
            return None
        frac = cfg.operating_fraction
        up = triggers.track_up(bstar, frac, cur.batch, cfg.track_step)
        if up is not None:
            return up
        keep = self.constraints.snap(2 * record.micro_batch, "up") if record.micro_batch else 0
        return triggers.track_down(bstar, frac, cur.batch, cfg.track_step, max(self._floor, keep))

    # --- the gate --------------------------------------------------------------------------------
    def set_constraints(self, constraints: BatchConstraints) -> None:
        """Replace the grid the gate snaps to (e.g. the host's runnable batches)."""
        self.constraints = constraints

    def _gate(self, record: StepRecord, cur: Stage, p: Proposal | None, note: str) -> Decision:
        """The one gate: snap the proposal to the runnable grid (:attr:`constraints`), then the
        pacing (the streak of consecutive records with a trigger, ``max_stages``,
        ``min_stage_samples``); the decision says which held it."""
        cfg = self.config
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
                self._auto_pending = False
                return self._decision(record, note)
            if not p.failure and not (p.lo <= batch <= p.hi):  # the snapped move is too small
                p = None
        self._failure_switch = p is not None and p.failure
        if p is None:
            if self._streak:
                self._streak = self._streak_samples = 0
            return self._decision(record, note)
        trigger = p.reason
        if p.kind in ("track_up", "track_down"):
            trigger = f"{trigger} -> batch {batch}"
        trigger += grid_note
        if note.startswith("failure forecast: hold"):
            trigger = f"{trigger}; {note}"
        self._streak += 1
        self._streak_samples += record.batch
        if self._streak_samples < cfg.hysteresis_samples:
            return self._decision(
                record, f"trigger {self._streak_samples}/{cfg.hysteresis_samples} rollouts: {trigger}"
            )
        if not room:
            return self._decision(record, f"held: max_stages {cfg.max_stages} reached ({trigger})")
        if not (p.lo <= batch <= p.hi) or (batch == cur.batch and lr == cur.lr):
            return self._decision(record, f"held: batch at its maximum ({trigger})")
        if record.samples - self._last_switch < cfg.min_stage_samples:
            return self._decision(record, f"held: min_stage_samples {cfg.min_stage_samples} ({trigger})")
        return self._switch(record, batch, lr, p, trigger)

    def _switch(self, record: StepRecord, batch: int, lr: float, p: Proposal, reason: str = "") -> Decision:
        self._failure_switch = p.failure
        return Decision(
            step=record.step,
            samples=record.samples,
            batch=batch,
            lr=lr,
            stage=len(self._stages),
            switched=True,
            reason=reason or p.reason,
        )

    def _lr(self, batch: int) -> float:
        cfg = self.config
        return float(lr_for_batch(batch, self.base_batch, cfg.base_lr, rule=cfg.lr_rule))

    def _lr_at(self, batch: float) -> float:
        """The rule's LR at a (possibly fractional) batch: where the sweep measured its clock."""
        return self.config.base_lr * (batch / self.base_batch) ** self._rule_e

    def _committed(self, d: Decision) -> None:
        self._streak = self._streak_samples = 0
        self._last_switch = d.samples
        self._last_switch_step = self._records
        self._auto_pending = False
        # the trend changes with batch and LR: a fresh window, from which the part left is counted
        self._scale = self._lr_scale(self.current)
        if self._failure_switch:
            self._floor = self.current.batch
        if self._failure_switch and self.clock is not None:
            self.clock.restart()
        if self._failure_switch:
            self._advised = False
        if self._failure_switch:
            self.forecast.restart()
            self._failure_switch = False

    def reachable_batches(
        self, steps: int, *, samples: int | None = None, noise_estimate: bool = True
    ) -> list[float]:
        """The largest rollout batch each of the next ``steps`` updates can run at, the policy
        switching as early and as far as its rules allow; ``math.inf`` where nothing bounds it.

        What a host checks its data plan against before the run. The rules, one record per update
        (the most a host can feed): a switch decided on an update's record applies from the next
        update; at most ``max_stages`` stages; between switches ``min_stage_samples`` rollouts and a
        ``hysteresis_samples`` streak, each update carrying the batch in effect. ``samples``: rollouts consumed so far
        (None: the policy's own count, from the records it has seen). Where a switch may go:

        - failure trigger: ``growth`` x the batch (snapped up), only where a switch postpones the
          failure (:attr:`PolicyConfig.postpone_exponent` > 0: the default);
        - B* tracking (``track_critical_batch``): to the fraction x the B* estimate, which nothing
          bounds but ``constraints.max_batch``, once that is ``track_step`` x the batch;
        - the one-off ``initial_batch: auto`` switch: any batch, at the first estimated record.

        Tracking and ``auto`` need the gradient-noise estimate: ``estimate_samples`` rollouts of records
        carrying ``grad_norm_micro`` and ``micro_batch``; ``noise_estimate=False`` says the host's records
        never carry them (so only the failure trigger can grow the batch).

        Failure switches may use up the stages before tracking is ready, or never come; the answer
        is the larger, update by update, of the plans with and without them.
        """
        plan = self._plan(steps, samples, noise_estimate, failure=True)
        if self.config.postpone_exponent > 0 and self.config.track_critical_batch and noise_estimate:
            other = self._plan(steps, samples, noise_estimate, failure=False)
            plan = [max(x, y) for x, y in zip(plan, other, strict=True)]
        return plan

    def _plan(self, steps: int, samples: int | None, noise_estimate: bool, *, failure: bool) -> list[float]:
        """One greedy plan of :meth:`reachable_batches` (``failure``: with failure switches)."""

        cfg = self.config
        cons = self.constraints
        hi = float(cons.highest) if cons.highest is not None else math.inf
        records0 = self._records
        auto = self._auto_pending
        streak_s = float(self._streak_samples)
        noise0, noise_s = int(self.noise.n_updates), float(self._noise_samples)
        now = self._samples if samples is None else samples
        since = float(now) - float(self._last_switch)
        left = int(cfg.max_stages) - len(self._stages)
        cur = float(self.current.batch)
        out: list[float] = []
        for i in range(max(int(steps), 0)):
            out.append(cur)  # update i runs at the batch in effect; its record may switch the next one
            k = records0 + i + 1
            since += cur
            streak_s += cur
            noise_s += cur
            if left <= 0:
                continue
            estimated = (
                noise_estimate
                and noise0 + (k - records0) >= self._est_records
                and noise_s >= self._est_samples
            )
            target = cur
            if auto and estimated:  # the auto switch skips hysteresis and the stage minimums
                auto, target = False, hi
            elif (
                min(
                    since - cfg.min_stage_samples,
                    streak_s - cfg.hysteresis_samples,
                )
                >= 0
            ):
                if failure and cfg.postpone_exponent > 0 and math.isfinite(cur):
                    target = max(target, float(cons.snap(cur * cfg.growth, "up")))
                if cfg.track_critical_batch and estimated and hi >= cfg.track_step * cur:
                    target = max(target, hi)
            if target > cur:
                cur, streak_s, since, left, auto = target, 0.0, 0.0, left - 1, False
        return out

    def largest_reachable_batch(
        self, steps: int | None = None, *, samples: int | None = None, noise_estimate: bool = True
    ) -> float | None:
        """The largest batch the policy can switch to within ``steps`` more updates (None: any
        number), ``math.inf`` when only an unset ``constraints.max_batch`` would bound it, or None
        when it cannot grow. See :meth:`reachable_batches`."""
        cfg = self.config
        if steps is None:
            # every remaining stage, each switch as late as the rules make it at most (at the
            # smallest batch, the rollout limits take the most updates)
            low = max(int(self.constraints.lowest), 1)
            per_switch = max(-(-max(cfg.min_stage_samples, cfg.hysteresis_samples) // low), 1)
            steps = (
                max(self._est_records, -(-self._est_samples // low))
                + (int(cfg.max_stages) + 1) * per_switch
                + 1
            )
        plan = self.reachable_batches(steps, samples=samples, noise_estimate=noise_estimate)
        if not plan:
            return None
        top = max(plan)
        return (top if math.isinf(top) else int(top)) if top > plan[0] else None

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

    # --- state ---------------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        dets = {}
        for i, det in enumerate(self.detectors):
            if hasattr(det, "state_dict"):
                dets[f"{i}:{getattr(det, 'name', type(det).__name__)}"] = det.state_dict()
        return {
            "config": self.config.to_dict(),
            "stages": [s.to_dict() for s in self._stages],
            "base_batch": self.base_batch,
            "streak": self._streak,
            "streak_samples": self._streak_samples,
            "records": self._records,
            "samples": self._samples,
            "noise_samples": self._noise_samples,
            "last_switch": self._last_switch,
            "last_switch_step": self._last_switch_step,
            "auto_pending": self._auto_pending,
            "bs_ref": self._bs_ref,
            "pos_ref": self._pos_ref,
            "b0": self._b0,
            "pos": [self._ps, self._pw],
            "floor": self._floor,
            "holding": self._holding,
            "failure_switch": self._failure_switch,
            "forecast": self.forecast.state_dict(),
            "clock": self.clock.state_dict() if self.clock is not None else None,
            "noise": self.noise.state_dict(),
            "detectors": dets,
        }

    def _load_state(self, state: Mapping[str, Any]) -> None:
        saved_cfg = state.get("config")
        if isinstance(saved_cfg, Mapping) and "forecast" not in saved_cfg:
            # saved before the forecast had modes, when it switched the batch: as "on" (today's
            # default, advisory, filled in by normalising would hide that it no longer switches)
            saved_cfg = {**saved_cfg, "forecast": "on"}
        mine = decode_floats(encode_floats(self.config.to_dict()))
        removed: list[str] = []
        if saved_cfg is not None and saved_cfg != mine:  # an earlier version's keys: as they load now
            if saved_cfg.get("failure_switch_fraction") == 0:  # its forecast state is v2's (records)
                raise ConfigError(
                    "the schedule state was saved by policy v2 (failure_switch_fraction 0), removed in "
                    "v3: its forecast state (a window counted in records) does not carry over; resume "
                    "with a fresh schedule state (model and optimizer may still be restored)",
                    source="saved state",
                    field="config.failure_switch_fraction",
                )
            removed = sorted(k for k, v in saved_cfg.items() if k in REMOVED and v is not None)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FutureWarning)
                    saved_cfg = decode_floats(encode_floats(PolicyConfig.from_dict(saved_cfg).to_dict()))
            except ConfigError:  # record-counted limits of an earlier v3: the state itself is v3's
                pass
        changed = set(removed)
        if saved_cfg is not None and saved_cfg != mine:
            changed |= {k for k, v in mine.items() if saved_cfg.get(k) != v}
        if changed:
            log.warning(
                "loading a TwoClockScheduler state saved under another config (changed: %s); "
                "decisions may differ from the uninterrupted run",
                ", ".join(sorted(changed)),
            )
        self._stages = self._stages_from(state)
        self.base_batch = int(state["base_batch"])
        self._streak = int(state["streak"])
        self._records = int(state["records"])
        # states before version 3 counted records only: their rollouts at the stage's batch
        batch = int(self._stages[-1].batch)
        self._streak_samples = int(state.get("streak_samples", self._streak * batch))

        self._last_switch = int(state["last_switch"])
        self._last_switch_step = int(state["last_switch_step"])
        # (the records since the last switch ran at the stage's batch)
        self._samples = int(
            state.get("samples", self._last_switch + (self._records - self._last_switch_step) * batch)
        )
        self._auto_pending = bool(state["auto_pending"])
        self._bs_ref = float(state.get("bs_ref", math.nan))  # version 1 states: re-referenced
        self._pos_ref = float(state.get("pos_ref", math.nan))
        self._b0 = float(state.get("b0", math.nan))
        self._ps, self._pw = (float(x) for x in state.get("pos", (0.0, 0.0)))
        self._floor = int(state.get("floor", 0))
        self._holding = bool(state.get("holding", False))
        self._failure_switch = bool(state.get("failure_switch", False))
        self._scale = self._lr_scale(self.current)
        self.forecast.load_state_dict(state["forecast"])
        if self.clock is not None and state.get("clock"):
            self.clock.load_state_dict(state["clock"])
        self.noise.load_state_dict(state["noise"])
        self._noise_samples = int(state.get("noise_samples", int(self.noise.n_updates) * batch))
        self._warm = self._noise_samples >= self._est_samples and self.noise.n_updates >= self._est_records
        saved = state.get("detectors", {})
        for i, det in enumerate(self.detectors):
            key = f"{i}:{getattr(det, 'name', type(det).__name__)}"
            if key in saved and hasattr(det, "load_state_dict"):
                det.load_state_dict(saved[key])

    def __repr__(self) -> str:
        cur = self.current
        return f"TwoClockScheduler(stage={len(self._stages) - 1}, batch={cur.batch}, lr={cur.lr:g})"
