"""The two-clock policy's settings (:class:`PolicyConfig`): its knobs by group, their validation,
and the config mapping a schedule file or a saved state gives.

The operating point: the batch cheapest at the price (``rollouts_per_update``, or
``seconds_per_rollout`` and ``seconds_per_update``; :mod:`rlvr_schedule.policy.price`), or, where an
older file states ``sample_tolerance``, the fixed fraction 2 tol / (1 + tol) of B*
(:func:`operating_fraction`, E(B)/E(0) = 1/(1 - B/2B*) = 1 + tol).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlvr_schedule.clocks import EntropyCollapse, GradNormSpike, KLBlowup, RewardCrash, ZeroVarianceGroups
from rlvr_schedule.errors import ConfigError
from rlvr_schedule.policy.constraints import BatchConstraints
from rlvr_schedule.policy.legacy import V2, translate_keys
from rlvr_schedule.theory.scaling import RULES, rule_exponent

__all__ = ["DETECTORS", "FORECAST_MODES", "GROUPS", "SIGNALS", "PolicyConfig", "operating_fraction"]

#: Signals the failure forecast can follow (entropy and reward fall towards collapse, the others rise).
SIGNALS = ("entropy", "reward_mean", "kl", "grad_norm", "clip_frac", "frac_zero_std")
#: Built-in failure detectors (``rlvr_schedule.clocks``) that ``detectors`` may name.
DETECTORS = {c.name: c for c in (EntropyCollapse, RewardCrash, GradNormSpike, KLBlowup, ZeroVarianceGroups)}

#: What the live forecast may do: "on" (switch, earlier than the sweep's clock where one is given;
#: the clock where none is), "advisory" (warn in the decision and the log, the batch stays), "off".
FORECAST_MODES = ("advisory", "on", "off")

#: The knobs by what they set (start, tracking, failure, pacing, constraints). A file may give a
#: group as a mapping (``pacing: {hysteresis_samples: 48}``) or its knobs at the top level.
GROUPS: dict[str, tuple[str, ...]] = {
    "start": tuple(
        "initial_batch critical_batch critical_batch_lr sample_tolerance fallback_batch base_lr "
        "base_batch lr_rule".split()
    ),
    "tracking": ("track_critical_batch", "track_step", "estimate_samples"),
    "failure": tuple(
        "failure_samples failure_samples_interval failure_batch failure_lr failure_clock_fraction "
        "failure_clock_floor forecast failure_signal failure_fraction failure_threshold "
        "failure_switch_fraction failure_lr_exponent failure_exponent growth forecast_samples "
        "detectors switch_on_alarm".split()
    ),
    "price": ("rollouts_per_update", "seconds_per_rollout", "seconds_per_update"),
    "pacing": ("hysteresis_samples", "min_stage_samples", "max_stages"),
    "constraints": ("constraints",),
}


def _count(v: Any, *, zero: bool) -> bool:
    return not isinstance(v, bool) and isinstance(v, int) and v >= (0 if zero else 1)


def _finite(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)


def operating_fraction(sample_tolerance: float) -> float:
    """Batch / B* where the progress clock's cost E(B)/E(0) = 1/(1 - B/2B*) is 1 + ``sample_tolerance``."""
    return 2.0 * sample_tolerance / (1.0 + sample_tolerance)


@dataclass
class PolicyConfig:
    """Settings of :class:`TwoClockScheduler`, by group (:data:`GROUPS`); every count is in rollouts.

    Start (progress clock: where on E(B)/E(0) = 1/(1 - B/2B*) the run begins)
    initial_batch: an int, or "auto": the operating fraction x the critical batch (snapped to the
        nearest runnable batch), taken from
        ``critical_batch`` when given (e.g. ``fit_sweep``'s), else from the online gradient-noise
        estimate B_simple once ``estimate_samples`` rollouts feed it (running ``fallback_batch``
        until then).
    critical_batch, critical_batch_lr: a known B* and the LR at ``base_batch`` it was measured at
        (None: ``base_lr``); B* ~ 1/r, so the policy uses critical_batch x critical_batch_lr / base_lr.
    sample_tolerance: (older files; None by default) extra rollouts accepted against B -> 0: a fixed
        operating fraction 2 x tol / (1 + tol) of B* (0.46 at 0.3; :meth:`tolerance_for` inverts
        it) in place of the price's batch. It is the price f^2 B* / (2 (1 - f)) at that B*
        (:func:`~rlvr_schedule.policy.price.price_equivalent`); a file that states it is warned so.
    fallback_batch: the batch before the estimate is ready (``initial_batch: auto``, no B* known):
        where on the progress clock the run sits while B_simple is measured.
    base_lr, base_batch, lr_rule: the LR at ``base_batch`` (None: the initial batch) and how it
        scales with batch on tracking switches ("sqrt" for Adam, "linear" for SGD, "constant"); on
        the rule, drift per rollout (the failure clock's rate) is batch-invariant.

    Tracking (progress clock: stay at the same fraction of a B* that moves)
    track_critical_batch: move the batch to the fraction x the current B* estimate (snapped to
        the nearest runnable batch) once that is ``track_step`` x above the batch, or ``track_step``^2
        x below it (not below the last failure switch's batch, nor 2 x the records' micro-batch);
        the estimate is :class:`~rlvr_schedule.policy.tracker.CriticalBatchTracker`'s.
    estimate_samples: rollouts of records carrying both gradient norms before the B* estimate is
        used (by ``auto`` and tracking; 1600), and at least the EMA's horizon in records (100).
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
        (0.45) of the pooled clock. ``rlvr-schedule plan`` writes the same switches down.
    forecast: what the live forecast (:class:`rlvr_schedule.clocks.FailureForecast`) may do:
        "advisory" (default: it warns in the decision and once per stage in the log; the batch
        stays), "on" (a failure trigger, earlier than the sweep's clock where one is given), "off".
    failure_signal, failure_fraction: the forecast (:class:`rlvr_schedule.clocks.FailureForecast`)
        follows this signal to ``failure_fraction`` x its level over the first 512 rollouts
        (default 0.1 for falling signals such as entropy, 10 for rising ones such as kl): where
        the failure clock runs out.
    failure_switch_fraction: (``forecast: on``) switch once the signal's fitted trend has less than this fraction of
        the way left from its level at the last (re)start to the collapse level (0.25), in (0, 1).
        Larger: earlier, more switches. (0 was policy v2, removed: give ``forecast: off``.)
    failure_threshold: an absolute collapse level of the signal (e.g. entropy 0.5), used instead of
        ``failure_fraction`` x its early level where the level is known in advance (None: relative).
    growth: batch factor per failure switch (1.68, about 2^0.75: at the priced operating batch it met
        the priced bar on the four 3a tasks at prices 4, 16 and 64 where 2 missed one at 16; RESULTS 3a). failure_lr_exponent: q, the LR x growth^q at a failure switch.
        0 (default): the LR held, so per-rollout drift falls by growth^-(e - q) (e: the rule's
        exponent, 1/2 for sqrt) and the failure clock is postponed; q = e leaves the drift per
        rollout (and a sample clock) unchanged. At the largest batch (or the last stage) the LR is
        divided by sqrt(growth) instead.
    failure_exponent: alpha in failure samples ~ B^alpha (``FailureScalingFit.alpha_``, 0: a
        sample clock). It changes the arithmetic, not whether to switch: a failure switch postpones
        the remaining failure by growth^(alpha + e - q); where that exponent is <= 0 the policy
        holds ("failure forecast: hold").
    forecast_samples: rollouts of evidence a forecast needs before it may trigger a switch,
        counted from the start or the last failure switch (2048); it fits their later half and its
        slope's 90% band must exclude a flat trend. Larger: fewer false alarms, later switches.
    detectors: built-in :mod:`rlvr_schedule.clocks` detectors to run (by name); with
        ``switch_on_alarm`` their alarms, and those of plugin detectors, are failure triggers too:
        a failure switch on an alarm, where the failure clock ran out faster than forecast.

    Price (what an update costs in rollouts: the operating batch is the one with the least
    rollouts + price x updates to progress, -rho + sqrt(rho^2 + 2 rho B*);
    :func:`~rlvr_schedule.policy.price.cost_optimal_batch`)
    rollouts_per_update: the price rho = b / a of t_step(B) = a B + b. seconds_per_rollout,
        seconds_per_update: a and b instead (both). None of them: measured live from the records'
        step times once two batches are seen (:class:`~rlvr_schedule.policy.price.LivePrice`),
        :data:`~rlvr_schedule.policy.price.DEFAULT_PRICE` (16) until then. A stated price wins.

    Pacing (neither clock: how fast the policy may react; each limit counts rollouts, so it
    lasts as long in data at every batch)
    hysteresis_samples: a trigger must hold on consecutive records carrying this many rollouts
        (48: 3 updates at batch 16, 1 at 64). min_stage_samples: rollouts a stage runs before the
        next switch (160), so the forecast and the noise estimate see the new batch first.
    max_stages: stages in all, the initial one included (so at most max_stages - 1 switches, of
        either clock): once spent, neither clock moves the batch or the LR again.

    Constraints: :class:`BatchConstraints` (group size, divisor, min and max batch).

    Keys of earlier versions are translated or refused on load (:mod:`rlvr_schedule.policy.legacy`).
    """

    # start
    initial_batch: int | str = "auto"
    critical_batch: float | None = None
    critical_batch_lr: float | None = None
    sample_tolerance: float | None = None
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
    growth: float = 1.68
    forecast_samples: int = 2048
    detectors: tuple[str, ...] = ("entropy_collapse", "reward_crash")
    switch_on_alarm: bool = True
    # price
    rollouts_per_update: float | None = None
    seconds_per_rollout: float | None = None
    seconds_per_update: float | None = None
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
        above = [t for t in cands if operating_fraction(t) >= f]
        if not above:
            return t0
        return min(above, key=lambda t: (operating_fraction(t) - f, abs(t - t0)))

    @property
    def falling(self) -> bool:
        """Whether the failure signal falls towards collapse (entropy, reward)."""
        return self.failure_signal in ("entropy", "reward_mean")

    @property
    def operating_fraction(self) -> float:
        """Batch / B* of an older file's ``sample_tolerance`` (E(B)/E(0) = 1/(1 - B/2B*) = 1 + tol);
        NaN when the operating batch comes from the price."""
        return math.nan if self.sample_tolerance is None else operating_fraction(self.sample_tolerance)

    @property
    def price(self) -> float | None:
        """The stated price in rollouts per update (``rollouts_per_update``, or seconds per update /
        seconds per rollout); None: measured live, or the default."""
        if self.rollouts_per_update is not None:
            return float(self.rollouts_per_update)
        if self.seconds_per_rollout is not None and self.seconds_per_update is not None:
            return float(self.seconds_per_update) / float(self.seconds_per_rollout)
        return None

    def tolerance_warning(self) -> str | None:
        """What an older file's ``sample_tolerance`` amounts to as a price (None: none stated)."""
        if self.sample_tolerance is None:
            return None
        from rlvr_schedule.policy.price import price_equivalent

        f = self.operating_fraction
        at = (
            f"{price_equivalent(f, self.critical_batch):.3g} rollouts per update at critical_batch "
            f"{self.critical_batch:g}"
            if self.critical_batch is not None
            else f"{price_equivalent(f, 1.0):.3g} x B* rollouts per update"
        )
        return (
            f"sample_tolerance {self.sample_tolerance:g} (a fixed {f:.3g} x B*) is the price {at}; "
            "give rollouts_per_update (or seconds_per_rollout and seconds_per_update) instead: the "
            "operating batch then follows the price at every B*"
        )

    @property
    def postpone_exponent(self) -> float:
        """alpha + e - q: a failure switch by k moves the remaining failure by k^this (e: the LR
        rule's exponent, 1/2 for sqrt)."""
        return float(self.failure_exponent) + rule_exponent(self.lr_rule) - float(self.failure_lr_exponent)

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

        def count(name: str, *, zero: bool = False, optional: bool = False) -> None:
            v = getattr(self, name)
            if not (v is None and optional) and not _count(v, zero=zero):
                raise bad(name, f"must be a {'non-negative' if zero else 'positive'} integer, got {v!r}")

        def num(
            name: str, *, zero: bool = False, optional: bool = False, most: float = math.inf, why: str = ""
        ) -> None:
            v = getattr(self, name)
            if v is None and optional:
                return
            if not _finite(v) or (v < 0 if zero else v <= 0):
                raise bad(
                    name, f"must be a finite {'non-negative' if zero else 'positive'} number, got {v!r}"
                )
            if v > most:
                raise bad(name, f"must be at most {most:g} ({why}), got {v!r}")

        def above_one(name: str, why: str) -> None:
            num(name)
            if getattr(self, name) <= 1:
                raise bad(name, f"must be > 1 ({why}), got {getattr(self, name)!r}")

        c = self.constraints
        if self.initial_batch != "auto":
            count("initial_batch")
            if not c.is_valid(int(self.initial_batch)):
                raise bad(
                    "initial_batch",
                    f"{self.initial_batch} is not a multiple of {c.multiple} "
                    f"(group_size x divisor) within [{c.lowest}, {c.highest}]",
                )
        num("critical_batch", optional=True)
        num("critical_batch_lr", optional=True)
        num("sample_tolerance", optional=True, most=1, why="batch at most B*")
        num("rollouts_per_update", zero=True, optional=True)
        num("seconds_per_rollout", optional=True)
        num("seconds_per_update", zero=True, optional=True)
        if (self.seconds_per_rollout is None) != (self.seconds_per_update is None):
            name = "seconds_per_update" if self.seconds_per_update is None else "seconds_per_rollout"
            raise bad(name, "must be given with the other (the price is seconds per update / per rollout)")
        if self.rollouts_per_update is not None and self.seconds_per_rollout is not None:
            raise bad(
                "rollouts_per_update", "give the price once: rollouts_per_update or the seconds, not both"
            )
        if self.sample_tolerance is not None and self.price is not None:
            raise bad(
                "sample_tolerance",
                "a fixed operating fraction and a price cannot both set the batch: drop sample_tolerance",
            )
        count("fallback_batch", optional=True)
        num("base_lr")
        count("base_batch", optional=True)
        if self.lr_rule not in RULES:
            raise bad("lr_rule", f"must be one of {', '.join(RULES)}, got {self.lr_rule!r}")
        for name in ("switch_on_alarm", "track_critical_batch"):
            if not isinstance(getattr(self, name), bool):
                raise bad(name, f"must be true or false, got {getattr(self, name)!r}")
        above_one("track_step", "a tracking move grows the batch")
        count("estimate_samples", zero=True)
        if self.failure_signal not in SIGNALS:
            raise bad("failure_signal", f"must be one of {', '.join(SIGNALS)}, got {self.failure_signal!r}")
        num("failure_fraction", optional=True)
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
            raise bad("failure_switch_fraction", V2)
        num("failure_switch_fraction")
        if self.failure_switch_fraction >= 1:
            raise bad(
                "failure_switch_fraction",
                f"must be below 1 (the part of the failure clock left at "
                f"a switch), got {self.failure_switch_fraction!r}",
            )
        for name in ("failure_lr_exponent", "failure_exponent"):
            if not _finite(getattr(self, name)):
                raise bad(name, f"must be a finite number, got {getattr(self, name)!r}")
        above_one("growth", "the batch grows at each switch")
        count("forecast_samples")
        num("failure_samples", optional=True)
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
        num("failure_batch", optional=True)
        num("failure_lr", optional=True)
        num("failure_clock_fraction", most=1, why="the part of the clock a stage spends")
        num("failure_clock_floor", zero=True, most=1, why="a part of the pooled clock")
        if self.forecast not in FORECAST_MODES:
            raise bad("forecast", f"must be one of {', '.join(FORECAST_MODES)}, got {self.forecast!r}")
        if not isinstance(self.detectors, (tuple, list)) or any(
            not isinstance(d, str) or d not in DETECTORS for d in self.detectors
        ):
            shown = repr(self.detectors)
            shown = shown if len(shown) <= 200 else shown[:200] + "..."  # an alias bomb prints for ever
            raise bad("detectors", f"must be a list of {', '.join(DETECTORS)}, got {shown}")
        count("hysteresis_samples")
        count("min_stage_samples", zero=True)
        count("max_stages")
        if not isinstance(c, BatchConstraints):
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
        """From a config mapping (a file's, or :meth:`to_dict`'s of this or an earlier version; groups
        may come as mappings); unknown keys and invalid values raise ConfigError naming them, old
        keys are translated or refused (:func:`~rlvr_schedule.policy.legacy.translate_keys`)."""
        kw = _flatten_groups(d, source)
        translate_keys(kw, source, cls.tolerance_for)
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
