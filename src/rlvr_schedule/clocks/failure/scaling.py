"""How the failure point scales with batch across a sweep: failure samples ~ B^alpha."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rlvr_schedule.clocks._stats import finite, ols, t_quantile
from rlvr_schedule.clocks.failure.base import Detector
from rlvr_schedule.clocks.failure.clock import FailureClock
from rlvr_schedule.records import Run

__all__ = ["FailureScalingFit"]


class FailureScalingFit:
    """How the failure point scales with batch across a sweep: failure samples ~ B^alpha.

    ``alpha_`` (log-log regression slope) with a ``level`` t-interval ``alpha_interval_``:
    alpha = 0 is a sample clock (the run fails after the same rollouts at any batch), alpha = 1
    a step clock. ``failure_samples_`` pools the runs that failed (geometric mean, with a
    t-interval in log space); runs that never failed are listed in ``censored_``, runs that
    diverged (reward falling from the start: no failure-clock reading, see
    :class:`FailureClock`) in ``diverging_``; neither enters the pooled value or the exponent.
    """

    def __init__(self, detectors: Sequence[Detector] | None = None, level: float = 0.95) -> None:
        self.detectors = detectors
        self.level = level

    def fit(
        self,
        runs: Sequence[Run],
        failure_samples: Sequence[float | None] | None = None,
        diverging: Sequence[bool] | None = None,
    ) -> FailureScalingFit:
        """``failure_samples`` (one per run, None = no failure) skips re-running the detectors;
        ``diverging`` (one flag per run) goes with it (default: none diverged)."""
        if failure_samples is None:
            clocks = [FailureClock(self.detectors).fit(r) for r in runs]
            failure_samples = [c.failure_samples_ for c in clocks]
            if diverging is None:
                diverging = [c.diverging_ for c in clocks]
        if len(failure_samples) != len(runs):
            raise ValueError("failure_samples must have one entry per run")
        div = [False] * len(runs) if diverging is None else [bool(x) for x in diverging]
        if len(div) != len(runs):
            raise ValueError("diverging must have one entry per run")
        failure_samples = [None if d else f for f, d in zip(failure_samples, div, strict=True)]
        self.table_ = [
            {
                "name": r.name,
                "batch": r.batch,
                "failure_samples": f,
                "failure_steps": None if f is None else f / r.batch,
                "diverging": d,
            }
            for r, f, d in zip(runs, failure_samples, div, strict=True)
        ]
        self.diverging_ = [r.name for r, d in zip(runs, div, strict=True) if d]
        self.censored_ = [
            r.name for r, f, d in zip(runs, failure_samples, div, strict=True) if f is None and not d
        ]
        pts = [
            (r.batch, float(f)) for r, f in zip(runs, failure_samples, strict=True) if f is not None and f > 0
        ]
        nan = math.nan
        self.alpha_, self.alpha_interval_ = nan, (nan, nan)
        self.failure_samples_, self.failure_samples_interval_ = nan, (nan, nan)
        self._c = nan
        if not pts:
            return self
        lb = np.log([p[0] for p in pts])
        lf = np.log([p[1] for p in pts])
        n = lf.size
        self.failure_samples_ = float(np.exp(lf.mean()))
        if n >= 2:
            t = t_quantile(0.5 + self.level / 2, n - 1)
            h = t * float(lf.std(ddof=1)) / math.sqrt(n)
            self.failure_samples_interval_ = (float(np.exp(lf.mean() - h)), float(np.exp(lf.mean() + h)))
        res = ols(lb, lf)
        if finite(res.slope):
            self.alpha_ = res.slope
            self._c = res.intercept
            self.alpha_interval_ = res.slope_interval(self.level)
        return self

    def predict(self, batch: float) -> float:
        """Failure samples at ``batch`` from the fitted power law (pooled value if alpha unknown)."""
        if finite(self.alpha_):
            return float(math.exp(self._c + self.alpha_ * math.log(batch)))
        return self.failure_samples_
