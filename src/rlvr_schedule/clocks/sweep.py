"""``fit_sweep``: both clocks from a batch sweep in one call (what ``rlvr-schedule fit`` prints)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlvr_schedule.clocks._stats import finite
from rlvr_schedule.clocks.failure import Detector, FailureClock, FailureScalingFit
from rlvr_schedule.clocks.failure.scaling import clock_exponent
from rlvr_schedule.clocks.progress import CriticalBatchFit, progress_metric
from rlvr_schedule.records import Run

__all__ = ["RunFit", "SweepFit", "fit_sweep"]


def _clean(v: Any) -> Any:
    """JSON-ready: NaN/inf -> None, tuples -> lists, recursively."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):  # numpy scalars
        return _clean(v.item())
    return v


@dataclass
class RunFit:
    """One run of the sweep. Sample counts are rollouts; NaN / None where not estimable."""

    name: str
    batch: int
    lr: float
    rate: float  # reward per rollout to the target (CriticalBatchFit); own regression slope if batch changed
    rate_interval: tuple[float, float]  # of ``rate`` (profile likelihood of the run's speed)
    samples_to_target: float
    samples_to_target_interval: tuple[float, float]
    failure_samples: float | None
    failure_signal: str | None
    constant_batch: bool = True
    reached_target: bool = False
    diverging: bool = False  # reward fell from the start without progress: no failure reading
    divergence_samples: float | None = None  # onset of that fall (rollouts); None if it did not diverge
    divergence_signal: str | None = None  # the detector that saw it
    #: the failure's alarm (``Alarm.to_dict``): why, ``onset_step``/``onset_rollouts`` (the reading)
    #: and ``raised_step``/``raised_rollouts`` (where a live watch would have raised it)
    failure_alarm: dict[str, Any] | None = None

    @property
    def signal(self) -> str | None:
        """What the run's row names: its failure's detector, ``divergence`` (with the detector
        that saw it) for a run that diverged, None for a run that neither failed nor diverged."""
        if self.diverging:
            return f"divergence ({self.divergence_signal})" if self.divergence_signal else "divergence"
        return self.failure_signal

    def to_dict(self) -> dict[str, Any]:
        return _clean({**self.__dict__, "signal": self.signal})


@dataclass
class SweepFit:
    """Both clocks of a sweep.

    ``critical_batch`` (rollouts per update) at which per-rollout progress halves; ``failure_samples``
    the pooled failure clock (:class:`~rlvr_schedule.clocks.FailureScalingFit`: a log-normal with
    the runs that did not fail right-censored at the rollouts they consumed), measured at
    ``failure_batch`` and ``failure_lr`` (the failed runs' geometric-mean batch and the sweep's LR
    rescaled to it by the square-root rule); ``failure_exponent`` alpha of failure samples ~
    B^alpha (0: sample clock); ``failure_probability`` the probability that a run fails within
    ``budget`` rollouts (default: the longest run's) at ``failure_batch``; ``target`` the reward
    the samples-to-target refer to. ``diverging`` names the runs whose reward fell from the start
    without progress (as at a batch past 2B*): reported, left out of the failure clock.
    """

    critical_batch: float
    critical_batch_interval: tuple[float, float]
    rate_at_zero: float
    failure_samples: float
    failure_samples_interval: tuple[float, float]
    failure_exponent: float
    failure_exponent_interval: tuple[float, float]
    target: float
    initial_reward: float
    runs: list[RunFit] = field(default_factory=list)
    failure_batch: float = math.nan
    failure_lr: float = math.nan
    failure_censored: int = 0
    budget: float = math.nan
    failure_probability: float = math.nan
    metric: str = "reward_mean"
    diverging: list[str] = field(default_factory=list)
    #: why ``critical_batch`` is not identified although the fit gave a number (None: it is, or the
    #: fit gave none); see :func:`_progressed`
    critical_batch_unidentified: str | None = None

    def failure_clock(self) -> dict[str, Any]:
        """The failure-clock knobs of :class:`~rlvr_schedule.policy.PolicyConfig` (JSON-ready;
        empty when no run failed). The exponent is :func:`~rlvr_schedule.clocks.failure.scaling.clock_exponent`'s,
        the one the pooled clock was fitted with."""
        if not finite(self.failure_samples):
            return {}
        iv = [v if finite(v) else None for v in self.failure_samples_interval]
        alpha = clock_exponent(self.failure_exponent, self.failure_exponent_interval)
        return _clean(
            {
                "failure_samples": self.failure_samples,
                "failure_samples_interval": iv if None not in iv else None,
                "failure_exponent": alpha,
                "failure_batch": self.failure_batch if finite(self.failure_batch) else None,
                "failure_lr": self.failure_lr if finite(self.failure_lr) else None,
            }
        )

    def unidentified(self) -> dict[str, str]:
        """Why ``critical_batch`` or ``failure_samples`` is not identified (by name; empty when both are)."""
        out: dict[str, str] = {}
        if self.critical_batch_unidentified:
            out["critical_batch"] = self.critical_batch_unidentified
        elif not finite(self.critical_batch):
            reached = sorted({r.batch for r in self.runs if r.constant_batch and r.reached_target})
            if len(reached) < 2:
                out["critical_batch"] = (
                    "needs constant-batch runs at two or more batches whose reward reaches the target "
                    f"{self.target:.3g}; here {'batch ' + ', '.join(map(str, reached)) if reached else 'none'} "
                    "reaches it"
                )
            else:
                out["critical_batch"] = (
                    f"the runs at batches {', '.join(map(str, reached))} reach the target, but their "
                    "per-rollout progress does not fall with the batch within the sweep's range"
                )
        if not finite(self.failure_samples):
            failed = [r for r in self.runs if r.failure_samples is not None and finite(r.failure_samples)]
            out["failure_samples"] = (
                "no run failed (collapse) within its budget: nothing to time the failure clock on"
                if not failed
                else f"{len(failed)} run(s) failed, too few for the pooled fit"
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of ``rlvr-schedule fit --json`` (NaN and inf become null)."""
        d = {k: v for k, v in self.__dict__.items() if k != "runs"}
        d["runs"] = [r.to_dict() for r in self.runs]
        return _clean(d)


def fit_sweep(
    runs: Sequence[Run],
    target: float | None = None,
    *,
    fraction: float = 0.5,
    detectors: Sequence[Detector] | None = None,
    level: float = 0.95,
    n_boot: int = 200,
    seed: int = 0,
    budget: float | None = None,
    metric: str = "auto",
) -> SweepFit:
    """Fit both clocks to a sweep of runs.

    ``target=None``: ``fraction`` (default half) of the way from the initial reward (median over
    the constant-batch runs) to the best pre-failure smoothed reward of any of them, so every run's
    samples-to-target refers to the same reward. Failure per run: onset of the first sustained
    failure alarm of ``detectors`` (default
    :func:`~rlvr_schedule.clocks.failure.default_detectors`); runs that diverged (reward falling
    from the start without progress, even where the fall was fast enough to alarm live as a
    failure) have none: they are listed in ``diverging`` and stay out of the pooled failure samples
    and the failure exponent. Runs whose
    batch changed are reported but left out of the critical-batch and failure-scaling fits. Runs
    that did not fail are right-censored at the rollouts they consumed (not dropped).
    ``budget``: rollouts at which ``failure_probability`` is reported (default: the longest run's).
    ``metric``: the progress clock's curve; ``"auto"`` reads held-out accuracy where every run
    logged it (:func:`~rlvr_schedule.clocks.progress.progress_metric`), else the training reward.
    """
    runs = list(runs)
    if not runs:
        raise ValueError("fit_sweep needs at least one run")
    if metric == "auto":
        metric = progress_metric(runs)
    fclocks = [FailureClock(detectors).fit(r) for r in runs]
    fs = [c.failure_samples_ for c in fclocks]
    cbf = CriticalBatchFit(
        target, fraction=fraction, level=level, n_boot=n_boot, seed=seed, detectors=detectors, metric=metric
    ).fit(runs, failure_samples=fs)
    const = [i for i, r in enumerate(runs) if r.constant_batch] or list(range(len(runs)))
    fsf = FailureScalingFit(detectors, level).fit(
        [runs[i] for i in const], [fs[i] for i in const], [fclocks[i].diverging_ for i in const]
    )
    out = []
    nan = math.nan
    longest = max((float(r.records[-1].samples) for r in runs if r.records), default=nan)
    budget_ = float(budget) if budget is not None else longest
    # the LR the failure clock was measured at: the constant runs' LR by the square-root rule to
    # the reference batch (the sweep's own rule; one LR when every run shares it)
    fb = fsf.batch_
    flr = nan
    if finite(fb):
        from rlvr_schedule.ingest.lr import training_lr  # the LR after warm-up, not the first record's

        trained = [(runs[i].batch, training_lr(runs[i]).lr) for i in const]
        lrs = [lr * math.sqrt(fb / b) for b, lr in trained if finite(lr) and lr > 0]
        flr = float(math.exp(sum(math.log(v) for v in lrs) / len(lrs))) if lrs else nan
    for r, fc, row, pc in zip(runs, fclocks, cbf.table_, cbf.clocks_, strict=True):
        # the sweep's rate (level crossings) with its own interval; a run with none (batch
        # changed, or no rising part) falls back to its regression slope and that slope's interval
        if finite(row["rate"]):
            rate, rate_iv = row["rate"], row["rate_interval"]
        else:
            rate, rate_iv = (pc.rate_, pc.rate_interval_) if pc else (nan, (nan, nan))
        out.append(
            RunFit(
                name=r.name,
                batch=r.batch,
                lr=r.lr,
                rate=rate,
                rate_interval=rate_iv,
                samples_to_target=row["samples_to_target"],
                samples_to_target_interval=row["samples_to_target_interval"],
                failure_samples=fc.failure_samples_,
                failure_signal=fc.signal_,
                constant_batch=r.constant_batch,
                reached_target=row["reached_target"],
                diverging=fc.diverging_,
                divergence_samples=fc.divergence_.samples if fc.diverging_ and fc.divergence_ else None,
                divergence_signal=fc.divergence_.name if fc.diverging_ and fc.divergence_ else None,
                failure_alarm=None if fc.failure_alarm_ is None else fc.failure_alarm_.to_dict(),
            )
        )
    why_not = _progressed(out) if finite(cbf.critical_batch_) else None
    return SweepFit(
        critical_batch=nan if why_not else cbf.critical_batch_,
        critical_batch_interval=(nan, nan) if why_not else cbf.critical_batch_interval_,
        critical_batch_unidentified=why_not,
        rate_at_zero=cbf.rate_at_zero_,
        failure_samples=fsf.failure_samples_,
        failure_samples_interval=fsf.failure_samples_interval_,
        failure_exponent=fsf.alpha_,
        failure_exponent_interval=fsf.alpha_interval_,
        target=cbf.target_,
        initial_reward=cbf.initial_reward_,
        runs=out,
        failure_batch=fb,
        failure_lr=flr,
        failure_censored=len(fsf.censored_samples_) if finite(fsf.failure_samples_) else 0,
        budget=budget_,
        failure_probability=fsf.failure_probability(budget_) if finite(budget_) else nan,
        metric=metric,
        diverging=[r.name for r in out if r.diverging],
    )


def _progressed(rows: Sequence[RunFit]) -> str | None:
    """Why the runs cannot place B* (None when they can): the fall of per-rollout progress with the
    batch needs constant-batch runs at two or more batches that progressed: a positive rate, and a
    target not "reached" at 0 rollouts (a run that starts at the target measures nothing)."""
    const = [r for r in rows if r.constant_batch]
    if not const:
        return None
    moved = {r.batch for r in const if finite(r.rate) and r.rate > 0 and not r.samples_to_target == 0}
    if len(moved) >= 2:
        return None
    idle = [
        f"{r.name} (batch {r.batch}: "
        + ("reached the target at 0 rollouts" if r.samples_to_target == 0 else "no progress")
        + ")"
        for r in const
        if r.batch not in moved
    ]
    return f"needs runs at two or more batches that progressed; {len(moved)} did" + (
        f", not {', '.join(idle)}" if idle else ""
    )
