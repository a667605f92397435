"""How the failure point scales with batch across a sweep: failure samples ~ B^alpha.

Runs that did not fail are right-censored at the rollouts they consumed: they say the clock is at
least that long. The pooled clock is a log-normal fitted by maximum likelihood with those
censored runs (EM on the log rollouts, at the failed runs' geometric-mean batch after the B^alpha
adjustment). Why log-normal: a failure clock is a length (positive, multiplicative spread; the
sweep's pooled value was already a geometric mean, which is this fit's answer when nothing is
censored), and unlike an exponential it is not memoryless: the clock "runs out", it is not a
constant hazard. Kaplan-Meier would need many more runs than a sweep has to give a median.

The readings are pooled along B^alpha only where alpha's interval excludes 0
(:func:`clock_exponent`); otherwise at alpha = 0, the sample clock. Two failures fit any slope
exactly and leave no spread, which turned a sweep with 2 failures among 10 runs into a clock with
no interval. With censored runs the interval is the profile likelihood-ratio one: a Wald interval
with the failures' t quantile is useless with 2-3 failures (t = 12.7 at one degree of freedom)
and ignores that a censored run's information is one-sided; the likelihood-ratio interval is the
usual choice for censored life data with few failures (Meeker and Escobar, *Statistical Methods
for Reliability Data*, 1998, ch. 8). Without censored runs it stays the geometric mean's exact
t-interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

from rlvr_schedule.clocks._stats import finite, ols, t_quantile
from rlvr_schedule.clocks.failure.base import Detector
from rlvr_schedule.clocks.failure.clock import FailureClock
from rlvr_schedule.records import Run

__all__ = ["FailureScalingFit", "censored_lognormal", "clock_exponent"]


def _phi(z: float) -> float:
    return math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


def _cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def _hazard(z: float) -> float:
    """phi(z) / (1 - Phi(z)), the inverse Mills ratio, stable in the far tail (continued fraction
    beyond z = 5, where 1 - Phi underflows)."""
    if z < 5.0:
        return _phi(z) / (1.0 - _cdf(z))
    cf = z
    for k in range(40, 0, -1):
        cf = z + k / cf
    return cf  # 1 / R(z), R the Mills ratio 1 / (z + 1/(z + 2/(z + ...)))


def _log_sf(z: float) -> float:
    """log(1 - Phi(z)), stable in the far tail."""
    if z < 5.0:
        return math.log(max(1.0 - _cdf(z), 1e-300))
    return -0.5 * z * z - 0.5 * math.log(2.0 * math.pi) - math.log(_hazard(z))


def _loglik(mu: float, sig: float, x: np.ndarray, c: tuple[np.ndarray, np.ndarray]) -> float:
    """Log-likelihood (up to a constant) of a normal (mu, sig): values ``x``, right-censored values
    ``c`` as (distinct values, counts): a sweep censors most runs at one budget."""
    ll = -x.size * math.log(sig) - 0.5 * float(np.square((x - mu) / sig).sum())
    return ll + sum(float(k) * _log_sf(float((v - mu) / sig)) for v, k in zip(*c, strict=True))


def _profile(mu: float, x: np.ndarray, c: tuple[np.ndarray, np.ndarray]) -> float:
    """max over sigma of the log-likelihood at ``mu`` (golden-section search in log sigma)."""
    g = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = math.log(1e-4), math.log(1e2)
    m1, m2 = b - g * (b - a), a + g * (b - a)
    f1, f2 = _loglik(mu, math.exp(m1), x, c), _loglik(mu, math.exp(m2), x, c)
    for _ in range(60):
        if f1 > f2:
            b, m2, f2 = m2, m1, f1
            m1 = b - g * (b - a)
            f1 = _loglik(mu, math.exp(m1), x, c)
        else:
            a, m1, f1 = m1, m2, f2
            m2 = a + g * (b - a)
            f2 = _loglik(mu, math.exp(m2), x, c)
    return max(f1, f2)


def likelihood_ratio_interval(
    failed: Sequence[float], censored: Sequence[float], mu: float, sig: float, level: float = 0.95
) -> tuple[float, float]:
    """The profile likelihood-ratio interval for the mean ``mu`` (ML, with its ``sig``) of a normal
    fitted to ``failed`` values and right-censored ``censored`` ones: the mus whose profile
    log-likelihood is within chi2_1(level) / 2 of the maximum. An end the data do not bound (the
    profile never falls that far within e^20 of mu) is infinite."""
    x = np.asarray(failed, dtype=float)
    c = np.unique(np.asarray(censored, dtype=float), return_counts=True)
    top = _loglik(mu, sig, x, c)
    cut = NormalDist().inv_cdf(0.5 + level / 2.0) ** 2 / 2.0

    def short(m: float) -> bool:  # still inside the interval
        return top - _profile(m, x, c) < cut

    ends = []
    for d in (-1.0, 1.0):
        step = 0.05 * max(sig, 1e-3)
        while short(mu + d * step) and step < 20.0:
            step *= 2.0
        if short(mu + d * step):
            ends.append(d * math.inf)
            continue
        lo, hi = 0.0, step  # inside at lo, outside at hi
        for _ in range(40):
            mid = (lo + hi) / 2.0
            lo, hi = (mid, hi) if short(mu + d * mid) else (lo, mid)
        ends.append(mu + d * (lo + hi) / 2.0)
    return ends[0], ends[1]


def clock_exponent(alpha: float, interval: tuple[float, float]) -> float:
    """The batch exponent a failure clock is pooled and spent with: the fitted alpha only where
    its interval excludes 0, else 0 (a sample clock). One rule for the fit, ``plan`` and the live
    policy: a noisy alpha (two failures fit any slope) would move the pooled clock and, at alpha
    <= -1/2, make every held-LR switch unable to postpone failure."""
    lo, hi = interval
    if finite(alpha) and finite(lo) and finite(hi) and (lo > 0 or hi < 0):
        return float(alpha)
    return 0.0


def censored_lognormal(
    failed: Sequence[float], censored: Sequence[float], *, iters: int = 5000
) -> tuple[float, float]:
    """(mu, sigma) of a normal fitted by maximum likelihood to the values ``failed`` and the
    right-censored values ``censored`` (each only known to be above its value), by EM.

    Without censored values it is the mean and the ML standard deviation. NaN sigma with fewer
    than two failures (no spread to estimate)."""
    x = np.asarray(failed, dtype=float)
    c = np.asarray(censored, dtype=float)
    if x.size == 0:
        return math.nan, math.nan
    if x.size < 2:
        return float(x.mean()), math.nan
    mu, sig = float(x.mean()), float(x.std())
    if c.size == 0 or sig <= 0:
        return mu, sig
    both = np.concatenate([x, c])  # start as if the censored values had failed there
    mu, sig = float(both.mean()), max(float(both.std()), sig)
    for _ in range(iters):
        z = (c - mu) / sig
        lam = np.array([_hazard(float(v)) for v in z])
        e1 = mu + sig * lam  # E[x | x > c]
        e2 = mu * mu + sig * sig + sig * (c + mu) * lam  # E[x^2 | x > c]
        n = x.size + c.size
        mu_new = (x.sum() + e1.sum()) / n
        var = (np.square(x).sum() + e2.sum()) / n - mu_new * mu_new
        sig_new = math.sqrt(max(var, 1e-12))
        done = abs(mu_new - mu) < 1e-10 and abs(sig_new - sig) < 1e-10
        mu, sig = float(mu_new), sig_new
        if done:
            break
    return mu, sig


class FailureScalingFit:
    """How the failure point scales with batch across a sweep: failure samples ~ B^alpha.

    ``alpha_`` (log-log regression slope over the runs that failed) with a ``level`` t-interval
    ``alpha_interval_``: alpha = 0 is a sample clock (the run fails after the same rollouts at any
    batch), alpha = 1 a step clock. ``failure_samples_`` is the pooled clock at ``batch_`` (the
    failed runs' geometric-mean batch): the median of a log-normal fitted with the runs that never
    failed as right-censored at the rollouts they consumed (``censored_samples_``; the module
    docstring says why), readings moved along B^``exponent_`` (:func:`clock_exponent`: alpha where
    its interval excludes 0, else 0), with the profile likelihood-ratio interval (without censored
    runs: the geometric mean's t-interval). ``sigma_`` is the log spread;
    :meth:`failure_probability` gives P(failure within a budget). Runs that never failed are
    listed in ``censored_``, runs that diverged (reward falling from the start: no failure-clock
    reading, see :class:`FailureClock`) in ``diverging_`` and left out.
    """

    def __init__(self, detectors: Sequence[Detector] | None = None, level: float = 0.95) -> None:
        self.detectors = detectors
        self.level = level

    def fit(
        self,
        runs: Sequence[Run],
        failure_samples: Sequence[float | None] | None = None,
        diverging: Sequence[bool] | None = None,
        consumed: Sequence[float | None] | None = None,
    ) -> FailureScalingFit:
        """``failure_samples`` (one per run, None = no failure) skips re-running the detectors;
        ``diverging`` (one flag per run) goes with it (default: none diverged). ``consumed``: the
        rollouts each run consumed (default: its last record's count), where a run that did not
        fail is censored."""
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
        if consumed is None:
            consumed = [_consumed(r) for r in runs]
        self.diverging_ = [r.name for r, d in zip(runs, div, strict=True) if d]
        cens = [
            (r.batch, float(t))
            for r, f, d, t in zip(runs, failure_samples, div, consumed, strict=True)
            if f is None and not d and t is not None and t > 0
        ]
        self.censored_samples_ = [t for _, t in cens]
        self.censored_ = [
            r.name for r, f, d in zip(runs, failure_samples, div, strict=True) if f is None and not d
        ]
        pts = [
            (r.batch, float(f)) for r, f in zip(runs, failure_samples, strict=True) if f is not None and f > 0
        ]
        nan = math.nan
        self.alpha_, self.alpha_interval_ = nan, (nan, nan)
        self.exponent_ = 0.0
        self.failure_samples_, self.failure_samples_interval_ = nan, (nan, nan)
        self.sigma_, self.batch_ = nan, nan
        self._c = nan
        if not pts:
            return self
        lb = np.log([p[0] for p in pts])
        lf = np.log([p[1] for p in pts])
        n = lf.size
        res = ols(lb, lf)
        if finite(res.slope):
            self.alpha_ = res.slope
            self._c = res.intercept
            self.alpha_interval_ = res.slope_interval(self.level)
        a = self.exponent_ = clock_exponent(self.alpha_, self.alpha_interval_)
        lref = float(lb.mean())
        self.batch_ = float(math.exp(lref))
        # every reading moved to the reference batch along B^a (without censored runs and at the
        # fitted alpha this is the plain geometric mean: OLS passes through the means)
        x = lf - a * (lb - lref)
        c = [math.log(t) - a * (math.log(b) - lref) for b, t in cens]
        mu, sig = censored_lognormal(list(x), c)
        self.failure_samples_ = float(np.exp(mu))
        self.sigma_ = sig
        if n >= 2 and finite(sig) and sig > 0:
            if c:
                lo, hi = likelihood_ratio_interval(list(x), c, mu, sig, self.level)
            else:  # the geometric mean's t-interval (sigma's ML value times n / (n - 1))
                h = t_quantile(0.5 + self.level / 2, n - 1) * sig * math.sqrt(n / (n - 1)) / math.sqrt(n)
                lo, hi = mu - h, mu + h
            self.failure_samples_interval_ = (float(np.exp(lo)), float(np.exp(hi)))
        self._c = mu - a * lref
        return self

    def failure_probability(self, budget: float, batch: float | None = None) -> float:
        """P(the run fails within ``budget`` rollouts) at ``batch`` (default: the reference batch),
        under the fitted log-normal; NaN without a spread (fewer than two failures)."""
        if not (finite(self.sigma_) and self.sigma_ > 0 and budget > 0):
            return math.nan
        med = self.failure_samples_ if batch is None else self.predict(batch)
        return _cdf((math.log(budget) - math.log(med)) / self.sigma_)

    def predict(self, batch: float) -> float:
        """Failure samples at ``batch``: the pooled clock moved along B^``exponent_``."""
        if finite(self._c):
            return float(math.exp(self._c + self.exponent_ * math.log(batch)))
        return self.failure_samples_


def _consumed(run: Run) -> float | None:
    """Rollouts the run consumed (its last record's count); None for an empty run."""
    return float(run.records[-1].samples) if run.records else None
