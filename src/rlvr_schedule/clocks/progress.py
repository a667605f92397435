"""The progress clock: reward gained per rollout, samples to a target, and the critical batch.

Per run (:class:`ProgressClock`) the reward curve is read only up to the failure point (the
rising part; what comes after a collapse is not progress). Across a constant-batch sweep
(:class:`CriticalBatchFit`) the local quadratic model (:mod:`rlvr_schedule.theory.quadratic`) says per-rollout progress falls
linearly with batch, p(B) = p0 (1 - B/(2B*)), so samples to a target grow as
E(B) = E0 / (1 - B/(2B*)): 1/E is linear in B, per-rollout progress halves at the critical
batch B* and vanishes at 2B*.

The reward logged with an update was measured on rollouts of the policy *before* it, so reward
curves are placed at ``samples - batch`` (rollouts the policy had been trained on).

``metric`` picks the curve: the training reward (``reward_mean``, every update) or held-out
accuracy (``eval_accuracy``, logged every few updates, measured before the update like the
reward). Held-out accuracy is how practitioners read progress: a fixed prompt set answered
greedily, free of each batch's prompt and sampling luck. Records without the metric are skipped.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlvr_schedule.clocks._stats import ar1_inflation, finite, first_crossing, ols, smooth, smooth_in_samples
from rlvr_schedule.clocks.failure import Detector, FailureClock
from rlvr_schedule.records import Run

__all__ = [
    "ProgressClock",
    "CriticalBatchFit",
    "reward_curve",
    "default_target",
    "EVAL_METRIC",
    "progress_metric",
]

#: The held-out accuracy field the reference trainer logs at its evaluation steps.
EVAL_METRIC = "eval_accuracy"


def progress_metric(runs: Sequence[Run]) -> str:
    """``eval_accuracy`` when every run logged it at 3 or more updates, else ``reward_mean``."""
    runs = list(runs)
    if runs and all(np.isfinite(r.array(EVAL_METRIC)).sum() >= 3 for r in runs):
        return EVAL_METRIC
    return "reward_mean"


_AUTO: Any = object()


def _window(n: int, smooth_: int | str) -> int:
    if smooth_ == "auto":
        return max(1, int(round(n / 50)))
    w = int(smooth_)
    if w < 1:
        raise ValueError(f"smooth must be 'auto' or an integer >= 1, got {smooth_!r}")
    return w


def reward_curve(
    run: Run,
    failure_samples: float | None = None,
    smooth_: int | str = "auto",
    window_rollouts: float | None = None,
    metric: str = "reward_mean",
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(samples trained on, raw reward, smoothed reward, window) of the pre-failure part of a run.

    ``smooth_="auto"`` averages ~2% of the pre-failure rollouts (a centered window, so crossings
    are not delayed): ~2% of the records at a constant batch; where the batch changes, the window
    is counted in rollouts (each record weighted by its batch), so a few lucky small-batch
    updates at the start of a ramp are not read as progress. The returned window is then the
    median number of records per window.

    ``window_rollouts`` fixes the window in rollouts for every run instead: runs compared with
    each other then get the same smoothing whether they fail early (a short pre-failure part, so
    a narrow "auto" window and a noisier, earlier crossing) or not.
    """
    batch = run.array("batch")
    x = run.array("samples") - batch
    y = run.array(metric)
    keep = np.isfinite(y)
    if failure_samples is not None:
        keep &= run.array("samples") <= failure_samples
    x, y, batch = x[keep], y[keep], batch[keep]
    if x.size < 3:
        src = f" ({run.source})" if run.source else ""
        raise ValueError(
            f"run {run.name!r}{src}: fewer than 3 records with field {metric!r} before the failure point"
        )
    if window_rollouts is not None:
        if not window_rollouts > 0:
            raise ValueError(f"window_rollouts must be > 0, got {window_rollouts!r}")
        ys, wm = smooth_in_samples(x, y, batch, float(window_rollouts))
        return x, y, ys, max(1, int(round(wm)))
    w = _window(x.size, smooth_)
    if smooth_ == "auto" and np.unique(batch).size > 1:
        ys, wm = smooth_in_samples(x, y, batch, (x[-1] + batch[-1] - x[0]) / 50)
        return x, y, ys, max(1, int(round(wm)))
    return x, y, smooth(y, w), w


def default_target(initial: Sequence[float], best: Sequence[float], fraction: float = 0.5) -> float:
    """``fraction`` of the way from the initial reward (median over runs) to the best pre-failure
    smoothed reward of any run: reachable by the sweep's best runs, and the same for all runs so
    their samples-to-target compare."""
    r0 = float(np.median(initial))
    top = float(np.max(best))
    return r0 + fraction * (top - r0)


class ProgressClock:
    """Progress of one run: ``fit(run)`` gives

    * ``rate_`` - reward gained per rollout: least-squares slope of reward on samples from the
      start to the target crossing (or, if never reached, over the whole pre-failure part), with
      ``rate_interval_`` (``level`` interval, widened for autocorrelated residuals);
    * ``samples_to_target_`` - first crossing of ``target`` by the smoothed reward (NaN if the run
      never got there: ``reached_target_`` False), with ``samples_to_target_interval_`` (crossings
      of target -/+ the smoothed curve's noise band; upper inf when target + band is never reached);
    * ``initial_reward_``, ``best_reward_`` (pre-failure, smoothed), ``failure_samples_``, ``target_``.

    ``target=None`` uses :func:`default_target` on this run alone (fits of a sweep pass a shared one).
    ``smooth_rollouts`` smooths over that many rollouts in every run (see :func:`reward_curve`):
    for comparing arms that fail at different points.
    """

    def __init__(
        self,
        target: float | None = None,
        smooth: int | str = "auto",
        fraction: float = 0.5,
        level: float = 0.95,
        detectors: Sequence[Detector] | None = None,
        smooth_rollouts: float | None = None,
        metric: str = "reward_mean",
    ) -> None:
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        self.target, self.smooth, self.fraction, self.level = target, smooth, fraction, level
        self.detectors = detectors
        self.smooth_rollouts = smooth_rollouts
        self.metric = metric

    def fit(self, run: Run, failure_samples: float | None = _AUTO) -> ProgressClock:
        """``failure_samples`` (None: no failure) skips running the failure detectors."""
        if failure_samples is _AUTO:
            failure_samples = FailureClock(self.detectors).fit(run).failure_samples_
        self.failure_samples_ = failure_samples
        x, y, ys, w = reward_curve(run, failure_samples, self.smooth, self.smooth_rollouts, self.metric)
        self.curve_ = (x, ys)
        self.initial_reward_ = float(ys[0])
        self.best_reward_ = float(np.nanmax(ys))
        tgt = self.target
        if tgt is None:
            tgt = default_target([self.initial_reward_], [self.best_reward_], self.fraction)
        self.target_ = float(tgt)
        self.samples_end_ = float(x[-1])

        stt = first_crossing(x, ys, self.target_)
        self.samples_to_target_ = stt
        self.reached_target_ = finite(stt)
        resid = y - ys
        sd = float(np.nanstd(resid)) * ar1_inflation(resid)
        sizes = run.array("eval_size") if self.metric == EVAL_METRIC else np.zeros(0)
        sizes = sizes[np.isfinite(sizes) & (sizes > 0)]
        if sizes.size and 0 < self.target_ < 1:
            n_eval = float(np.median(sizes))
            # an accuracy on n prompts has at least the binomial noise, even where the curve is
            # read unsmoothed (sparse evaluations: no residual to measure it from)
            sd = max(sd, math.sqrt(self.target_ * (1 - self.target_) / n_eval))
        band = 1.96 * sd / math.sqrt(w)
        lo = first_crossing(x, ys, self.target_ - band)
        hi = first_crossing(x, ys, self.target_ + band)
        if self.reached_target_:
            self.samples_to_target_interval_ = (lo, hi if finite(hi) else math.inf)
        else:
            self.samples_to_target_interval_ = (lo if finite(lo) else self.samples_end_, math.inf)

        end = stt if self.reached_target_ else float(x[-1])
        sel = x <= end
        if sel.sum() < 3:
            sel = np.zeros_like(sel)
            sel[: min(3, x.size)] = True
        res = ols(x[sel], y[sel])
        self.rate_ = res.slope
        infl = ar1_inflation(y[sel] - res.intercept - res.slope * x[sel]) if finite(res.slope) else 1.0
        self.rate_interval_ = res.slope_interval(self.level, infl)
        return self

    def crossing(self, level: float) -> float:
        """Samples at which the smoothed pre-failure reward first reaches ``level`` (NaN if never)."""
        x, ys = self.curve_
        return first_crossing(x, ys, level)


def _profile_bstar(b: np.ndarray, s: np.ndarray) -> tuple[float, float, float]:
    """Least-squares fit of s = p0 max(0, 1 - B/(2B*)).

    Profiled over a log grid of B* (p0 in closed form at each), refined on a finer grid around
    the best point. Returns (B*, p0, loss); B* = inf when per-rollout progress does not fall
    with batch over the sweep.
    """
    scale = float(np.max(np.abs(s))) if s.size else 1.0
    scale = scale if scale > 0 else 1.0
    sn = s / scale

    def losses(grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        inv = np.where(np.isfinite(grid), 1.0 / (2.0 * grid), 0.0)[:, None]
        x = np.maximum(0.0, 1.0 - b[None, :] * inv)
        xx = (x * x).sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            p0 = np.maximum((x @ sn) / xx, 0.0)
        r = sn[None, :] - p0[:, None] * x
        loss = np.where(xx > 0, (r * r).sum(1), np.inf)
        return loss, p0

    grid = np.geomspace(max(b.min() / 8.0, 1e-3), b.max() * 100.0, 241)
    loss, p0 = losses(grid)
    i = int(np.argmin(loss))
    inf_loss, inf_p0 = losses(np.array([np.inf]))
    if inf_loss[0] <= loss[i] * (1 + 1e-9) or i == grid.size - 1:
        return math.inf, float(inf_p0[0]) * scale, float(inf_loss[0])
    fine = np.geomspace(grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)], 201)
    floss, fp0 = losses(fine)
    k = int(np.argmin(floss))
    return float(fine[k]), float(fp0[k]) * scale, float(floss[k])


def _speed(u: np.ndarray, log_e: np.ndarray, end: float) -> float:
    """A run's log speed v from its level crossings (log samples ``log_e``, NaN: not crossed)
    given the levels' ``u``: the mean of u - log E over the crossed levels, capped so that every
    level it did not cross by ``end`` (its last pre-failure record) is predicted after ``end``
    (E = exp(u - v) > end). The cap keeps one early noise crossing of a low level by a run that
    never climbs from reading as fast progress. -inf (rate 0) when it crossed no level."""
    have = np.isfinite(u)
    crossed = have & np.isfinite(log_e)
    if not crossed.any():
        return -math.inf
    v = float(np.mean(u[crossed] - log_e[crossed]))
    open_ = have & ~np.isfinite(log_e)
    if open_.any() and end > 0 and math.isfinite(end):
        v = min(v, float(np.min(u[open_])) - math.log(end))
    return v


def _block_resample(resid: np.ndarray, block: int, rng: np.random.Generator) -> np.ndarray:
    """A moving-block bootstrap draw of ``resid`` (blocks keep the lag correlation of nearby
    updates' rewards)."""
    n = resid.size
    block = max(1, min(block, n))
    starts = rng.integers(0, n - block + 1, -(-n // block))
    return np.concatenate([resid[s : s + block] for s in starts])[:n]


class CriticalBatchFit:
    """Critical batch from a constant-batch sweep: ``fit(runs)`` gives

    * ``critical_batch_`` B* (rollouts per update at which per-rollout progress halves; inf when it
      does not fall over the sweep) and ``critical_batch_interval_`` (bootstrap over runs);
    * ``rate_at_zero_`` p0 (reward per rollout as B -> 0), ``zero_progress_batch_`` = 2 B*;
    * ``target_``, ``initial_reward_`` and ``table_`` (one dict per run, with ``rate`` and its
      ``rate_interval``).

    Each run's per-rollout rate is measured on a common reward scale. Runs of one task at
    different batches climb the same reward curve at different speeds, so the samples at which
    a run's smoothed reward first crosses ``levels`` common reward levels (30% to 100% of the way
    from the initial reward to the target) follow log E(run, level) = u(level) - v(run): one
    speed v per run, fitted on every level the run crossed, so a run that got only part of the way
    still has a speed, and one level's noisy crossing does not decide it. The rate is
    (top level - initial) / E at the top level. Its interval is a moving-block bootstrap of the
    same estimator (the run's residuals around its smoothed curve resampled in blocks, re-smoothed,
    crossings and speed recomputed with u held), so rate and interval measure the same thing. A
    run that crossed no level (batch >= 2B*) has rate 0, which the clamped model
    p0 max(0, 1 - B/(2B*)) fits. ``rate_at_zero_`` is in the same units. Runs whose batch changed
    are left out.
    """

    def __init__(
        self,
        target: float | None = None,
        *,
        fraction: float = 0.5,
        levels: int = 8,
        smooth: int | str = "auto",
        level: float = 0.95,
        n_boot: int = 200,
        seed: int = 0,
        detectors: Sequence[Detector] | None = None,
        metric: str = "reward_mean",
    ) -> None:
        if levels < 1:
            raise ValueError(f"levels must be >= 1, got {levels}")
        self.target, self.fraction, self.levels, self.smooth = target, fraction, levels, smooth
        self.level, self.n_boot, self.seed, self.detectors = level, n_boot, seed, detectors
        self.metric = metric

    def fit(
        self, runs: Sequence[Run], failure_samples: Sequence[float | None] | None = None
    ) -> CriticalBatchFit:
        """``failure_samples`` (one per run, None = no failure) skips re-running the detectors."""
        runs = list(runs)
        if not runs:
            raise ValueError("CriticalBatchFit needs at least one run")
        if failure_samples is None:
            failure_samples = [FailureClock(self.detectors).fit(r).failure_samples_ for r in runs]
        if len(failure_samples) != len(runs):
            raise ValueError("failure_samples must have one entry per run")
        first = [self._clock(None, r, f) for r, f in zip(runs, failure_samples, strict=True)]
        if all(c is None for c in first):
            raise ValueError("no run has 3 records with a reward before its failure point")
        # runs that collapsed before 3 rewarded records have no rising part: left out
        const = [r.constant_batch and c is not None for r, c in zip(runs, first, strict=True)]
        pool = [c for c, k in zip(first, const, strict=True) if k and c is not None] or [
            c for c in first if c is not None
        ]
        r0 = float(np.median([c.initial_reward_ for c in pool]))
        tgt = self.target
        if tgt is None:
            tgt = default_target(
                [c.initial_reward_ for c in pool], [c.best_reward_ for c in pool], self.fraction
            )
        self.target_, self.initial_reward_ = float(tgt), r0
        clocks = [self._clock(self.target_, r, f) for r, f in zip(runs, failure_samples, strict=True)]
        self.clocks_ = clocks

        # crossings of common levels -> per-run speeds (two-way additive model in log samples)
        span = self.target_ - r0
        fr = np.linspace(0.3, 1.0, self.levels) if self.levels > 1 else np.array([1.0])
        lv = r0 + fr * span
        idx = [i for i, k in enumerate(const) if k]
        E = np.full((len(runs), lv.size), np.nan)
        for i in idx:
            ci = clocks[i]
            assert ci is not None  # idx holds runs with a clock
            for j, L in enumerate(lv):
                e = ci.crossing(L)  # at x = 0: reached within the first update
                E[i, j] = max(e, runs[i].batch / 2) if finite(e) else np.nan
        rates = np.full(len(runs), np.nan)
        rate_iv = np.full((len(runs), 2), np.nan)
        if span > 0 and idx:
            v, u = self._speeds(E)
            top = int(np.flatnonzero(np.isfinite(u))[-1]) if np.isfinite(u).any() else -1
            for i in idx:
                if top < 0:
                    break
                scale = (lv[top] - r0) / math.exp(u[top])
                ci = clocks[i]
                end = ci.samples_end_ if ci is not None else math.nan
                raw = scale * math.exp(_speed(u, np.log(E[i]), end))
                rates[i], rate_iv[i] = self._bias_corrected(
                    raw, self._rate_bootstrap(runs[i], failure_samples[i], lv, u, scale, self._rng(runs[i]))
                )
        self.level_samples_ = E
        unc = [i for i in idx if finite(rates[i])]
        bs = np.array([runs[i].batch for i in unc], float)
        ss = np.array([rates[i] for i in unc], float)
        nan = math.nan
        self.critical_batch_, self.rate_at_zero_ = nan, nan
        self.critical_batch_interval_ = (nan, nan)
        if np.unique(bs).size >= 2:
            self.critical_batch_, self.rate_at_zero_, _ = _profile_bstar(bs, ss)
            self.critical_batch_interval_ = self._bootstrap(bs, ss)
        self.zero_progress_batch_ = 2 * self.critical_batch_
        self.table_: list[dict[str, Any]] = []
        for i, (r, c) in enumerate(zip(runs, clocks, strict=True)):
            self.table_.append(
                {
                    "name": r.name,
                    "batch": r.batch,
                    "lr": r.lr,
                    "constant_batch": r.constant_batch,
                    "rate": float(rates[i]) if finite(rates[i]) else nan,
                    "rate_interval": (float(rate_iv[i, 0]), float(rate_iv[i, 1])),
                    "predicted_rate": self.predict_rate(r.batch),
                    "rate_regression": c.rate_ if c else nan,
                    "samples_to_target": c.samples_to_target_ if c else nan,
                    "samples_to_target_interval": c.samples_to_target_interval_ if c else (nan, nan),
                    "reached_target": c.reached_target_ if c else False,
                    "failure_samples": failure_samples[i],
                }
            )
        return self

    def _clock(self, target: float | None, run: Run, failure_samples: float | None) -> ProgressClock | None:
        """The run's progress clock; None when it failed before 3 rewarded records (a run with
        fewer than 3 rewards at all is an error naming the run)."""
        try:
            return ProgressClock(target, self.smooth, self.fraction, self.level, metric=self.metric).fit(
                run, failure_samples
            )
        except ValueError:
            if failure_samples is None or np.isfinite(run.array(self.metric)).sum() < 3:
                raise
            return None

    @staticmethod
    def _speeds(E: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Least squares of log E[i, j] = u[j] - v[i] over the observed crossings; returns (v per
        run, u per level), NaN where a run or level has no crossing (identified up to a shared
        constant, which cancels in the rates)."""
        obs = np.argwhere(np.isfinite(E))
        v, u = np.full(E.shape[0], np.nan), np.full(E.shape[1], np.nan)
        if obs.size == 0:
            return v, u
        runs_i, lev_j = np.unique(obs[:, 0]), np.unique(obs[:, 1])
        ri = {x: k for k, x in enumerate(runs_i)}
        lj = {x: k for k, x in enumerate(lev_j)}
        A = np.zeros((obs.shape[0], runs_i.size + lev_j.size))
        y = np.empty(obs.shape[0])
        for k, (i, j) in enumerate(obs):
            A[k, lj[j]] = 1.0
            A[k, lev_j.size + ri[i]] = -1.0
            y[k] = math.log(E[i, j])
        sol, *_ = np.linalg.lstsq(A, y, rcond=None)
        u[lev_j] = sol[: lev_j.size]
        v[runs_i] = sol[lev_j.size :]
        return v, u

    def _rng(self, run: Run) -> np.random.Generator:
        """A generator per run, keyed by its name: the fit does not depend on the runs' order. Only
        the name's last part counts (after a "/" or a space): ``sweep/b8-s0`` read from a directory
        above the run and ``sweep b8-s0`` as a trainer's harness labels it are the run ``b8-s0``, so
        the same runs give the same B* wherever it is printed."""
        key = re.split(r"[/\s]", run.name.strip())[-1]
        return np.random.default_rng([self.seed, zlib.crc32(key.encode())])

    def _rate_bootstrap(
        self,
        run: Run,
        failure_samples: float | None,
        lv: np.ndarray,
        u: np.ndarray,
        scale: float,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Bootstrap draws of the run's rate: the estimator that gave it, rerun on the run's
        smoothed curve plus resampled noise (level crossings and speed v recomputed, the levels'
        u held). The noise is the residuals around a 4x wider smooth, resampled in blocks of one
        smoothing window: residuals around the curve's own smooth would sum to ~0 over a window
        and understate the noise its crossings see; blocks keep the correlation of nearby
        updates' rewards."""
        x, y, ys, w = reward_curve(run, failure_samples, self.smooth, metric=self.metric)
        resid = y - smooth(y, 4 * w)
        ok = np.isfinite(resid) & np.isfinite(ys)
        if ok.sum() < 3 or self.n_boot < 10:
            return np.zeros(0)
        resid = resid[ok] - float(np.mean(resid[ok]))
        have = np.isfinite(u)
        est = np.empty(self.n_boot)
        for b in range(self.n_boot):
            ystar = ys.copy()
            ystar[ok] += _block_resample(resid, w, rng)
            sm = smooth(ystar, w)
            lg = np.array(
                [first_crossing(x, sm, L) if h else math.nan for L, h in zip(lv, have, strict=True)]
            )
            lg = np.maximum(lg, run.batch / 2)  # as in fit(): a crossing at 0 is within the first update
            est[b] = scale * math.exp(_speed(u, np.log(lg), float(x[-1])))
        return est

    def _bias_corrected(self, raw: float, est: np.ndarray) -> tuple[float, tuple[float, float]]:
        """Bootstrap bias correction on the log scale and the matching basic interval.

        A first crossing of a noisy curve comes early (the noise reaches a level before the
        trend does), so the raw rate is biased up, and its bootstrap draws by about as much
        again. rate = raw^2 / median(draws) undoes that; the basic interval
        [raw^2 / q_hi, raw^2 / q_lo] mirrors the draws' spread around it, so the rate lies
        inside its own interval by construction. A run that crossed no level keeps rate 0 with
        the draws' upper quantile as the bound.
        """
        a = (1 - self.level) / 2
        if est.size == 0:
            return raw, (math.nan, math.nan)
        if raw <= 0 or not (est > 0).all():
            q_hi = float(np.quantile(est, 1 - a))
            if raw <= 0:
                return 0.0, (0.0, q_hi)
            # some draws crossed no level: the run is at the edge of measurable progress
            return raw, (min(float(np.quantile(est, a)), raw), max(q_hi, raw))
        lo, med, hi = np.quantile(np.log(est), [a, 0.5, 1 - a])
        lr = math.log(raw)
        return math.exp(2 * lr - med), (math.exp(2 * lr - hi), math.exp(2 * lr - lo))

    def _bootstrap(self, bs: np.ndarray, ss: np.ndarray) -> tuple[float, float]:
        """Percentile interval of B*: runs resampled with replacement, and each resampled run's
        rate moved by its residual from the full fit with a random sign (a wild bootstrap), so
        both the choice of runs and the scatter of their rates count. Runs are put in a canonical
        order (batch, then rate) first, so the interval does not depend on the order they came in."""
        o = np.lexsort((ss, bs))
        bs, ss = bs[o], ss[o]
        n = bs.size
        if n < 3 or self.n_boot < 10:
            return (math.nan, math.nan)
        pred = np.array([self.predict_rate(b) for b in bs])
        resid = (ss - pred) * math.sqrt(n / max(n - 2, 1))
        rng = np.random.default_rng(self.seed)
        n_distinct = np.unique(bs).size
        est = []
        for _ in range(self.n_boot):
            pick = rng.integers(0, n, n)
            if np.unique(bs[pick]).size < min(3, n_distinct):
                continue
            s_star = pred[pick] + resid[pick] * rng.choice((-1.0, 1.0), n)
            est.append(_profile_bstar(bs[pick], s_star)[0])
        if len(est) < 10:
            return (math.nan, math.nan)
        a = (1 - self.level) / 2
        e = np.array(est)
        lo, hi = np.quantile(e, [a, 1 - a], method="nearest" if np.isinf(e).any() else "linear")
        return (float(lo), float(hi))

    def predict_rate(self, batch: float) -> float:
        """Fitted reward per rollout at ``batch``: p0 max(0, 1 - B/(2B*))."""
        if not finite(self.rate_at_zero_):
            return math.nan
        if math.isinf(self.critical_batch_):
            return self.rate_at_zero_
        return self.rate_at_zero_ * max(0.0, 1.0 - batch / (2.0 * self.critical_batch_))

    def samples_ratio(self, batch: float) -> float:
        """E(B)/E(0) = 1/(1 - B/(2B*)): how many more rollouts the target costs at ``batch``."""
        b = self.critical_batch_
        if not finite(b):
            return 1.0 if b == math.inf else math.nan
        x = 1.0 - batch / (2.0 * b)
        return 1.0 / x if x > 0 else math.inf
