"""A failure forecast judged as a forecast: replay it over labelled runs, score the warnings.

A *warning* is the first record at which the forecast would let a failure switch fire (see
:meth:`~rlvr_schedule.clocks.failure.forecast.FailureForecast.warns`), held for ``hold_samples``
rollouts as the policy's pacing holds a trigger. On a run that failed after ``F`` rollouts, a
warning at ``w < F`` has lead ``F - w``; it is *timely* when the lead is at least ``lead_fraction``
x ``F`` (the time to failure, counted from the run's start). On a healthy run any warning is a
false switch. The replay stops at the first warning: after a switch the run would have gone
differently, so later records say nothing about the forecast.

Scores: recall at lead (timely warnings / failed runs) and false switches per healthy run, each a
proportion with its 95% Wilson interval (exact enough at the 5-100 runs such tables have, and
never outside [0, 1]); the lead as a fraction of the time to failure, per failed run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rlvr_schedule.records import Run, StepRecord

__all__ = ["LabelledRun", "Replay", "Skill", "first_warning", "replay", "score", "wilson"]


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``k / n`` ((nan, nan) for n = 0)."""
    if n <= 0:
        return (math.nan, math.nan)
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    lo = 0.0 if k == 0 else max(0.0, mid - half)  # exact ends where the count is at a bound
    hi = 1.0 if k == n else min(1.0, mid + half)
    return (lo, hi)


@dataclass
class LabelledRun:
    """A recorded run and its label: ``failure_samples`` (rollouts at the failure, None if healthy),
    ``kind`` of failure (``"reward_crash"``, ``"entropy_collapse"``, ...; None if healthy),
    ``source`` and ``part`` (calibration / test) of the split."""

    name: str
    run: Run
    failure_samples: float | None
    kind: str | None = None
    source: str = ""
    part: str = ""

    @property
    def failed(self) -> bool:
        return self.failure_samples is not None


@dataclass
class Replay:
    """One run's replay: its label and the rollouts at the first warning (None: none)."""

    name: str
    failure_samples: float | None
    kind: str | None
    warning: float | None
    source: str = ""
    part: str = ""

    @property
    def lead(self) -> float | None:
        """Rollouts from the warning to the failure (None unless warned before a failure)."""
        if self.failure_samples is None or self.warning is None or self.warning >= self.failure_samples:
            return None
        return self.failure_samples - self.warning

    @property
    def lead_fraction(self) -> float | None:
        """The lead over the time to failure (0: at the failure, 1: at the start)."""
        lead = self.lead
        if lead is None or self.failure_samples is None or self.failure_samples <= 0:
            return None
        return lead / self.failure_samples

    def timely(self, lead_fraction: float = 0.1) -> bool:
        lf = self.lead_fraction
        return lf is not None and lf >= lead_fraction


def first_warning(
    make: Callable[[], object],
    records: Iterable[StepRecord],
    *,
    hold_samples: float = 48,
    stop_at: float | None = None,
) -> float | None:
    """Rollouts at the first record where ``make()``'s forecast ``warns()`` and has warned on
    consecutive records carrying ``hold_samples`` rollouts (the policy's hysteresis); None if never.
    ``stop_at``: stop reading at this many rollouts (the failure point: later warnings are late)."""
    fc = make()
    held = 0.0
    for rec in records:
        if stop_at is not None and rec.samples > stop_at:
            break
        fc.update(rec)  # type: ignore[attr-defined]
        if fc.warns():  # type: ignore[attr-defined]
            held += rec.batch
            if held >= hold_samples:
                return float(rec.samples)
        else:
            held = 0.0
    return None


def replay(
    make: Callable[[], object], runs: Iterable[LabelledRun], *, hold_samples: float = 48
) -> list[Replay]:
    """:func:`first_warning` on every run (a fresh forecast from ``make`` each)."""
    out = []
    for r in runs:
        w = first_warning(make, r.run.records, hold_samples=hold_samples, stop_at=r.failure_samples)
        out.append(Replay(r.name, r.failure_samples, r.kind, w, r.source, r.part))
    return out


@dataclass
class Skill:
    """Scores of one group of replays (see the module docstring)."""

    failed: int
    timely: int
    healthy: int
    false_switches: int
    lead_fractions: list[float] = field(default_factory=list)  # per warned failed run
    late: int = 0  # failed runs warned, but with less than the lead

    @property
    def recall(self) -> float:
        return self.timely / self.failed if self.failed else math.nan

    @property
    def recall_interval(self) -> tuple[float, float]:
        return wilson(self.timely, self.failed)

    @property
    def false_rate(self) -> float:
        return self.false_switches / self.healthy if self.healthy else math.nan

    @property
    def false_interval(self) -> tuple[float, float]:
        return wilson(self.false_switches, self.healthy)

    def lead_quantiles(self, qs: Sequence[float] = (0.1, 0.5, 0.9)) -> list[float]:
        if not self.lead_fractions:
            return [math.nan for _ in qs]
        return [float(np.quantile(self.lead_fractions, q)) for q in qs]

    def meets(self, recall: float = 0.7, false_rate: float = 0.1) -> bool:
        """Both targets met by the point estimates (the intervals say how firmly)."""
        return self.recall >= recall and self.false_rate <= false_rate


def score(replays: Iterable[Replay], *, lead_fraction: float = 0.1, kind: str | None = None) -> Skill:
    """Recall at ``lead_fraction`` over the failed runs (of ``kind`` only, if given) and false
    switches over the healthy runs."""
    failed = timely = healthy = false = late = 0
    leads: list[float] = []
    for r in replays:
        if r.failure_samples is None:
            healthy += 1
            false += r.warning is not None
            continue
        if kind is not None and r.kind != kind:
            continue
        failed += 1
        lf = r.lead_fraction
        if lf is not None:
            leads.append(lf)
            if lf >= lead_fraction:
                timely += 1
            else:
                late += 1
    return Skill(failed, timely, healthy, false, leads, late)
