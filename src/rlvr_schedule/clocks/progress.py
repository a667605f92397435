"""The progress clock: reward gained per rollout, samples to a target, and the critical batch.

Per run (:class:`ProgressClock`) the reward curve is read only up to the failure point (the
rising part; what comes after a collapse is not progress). Across a constant-batch sweep
(:class:`CriticalBatchFit`) the theory (THEORY.md section 3) says per-rollout progress falls
linearly with batch, p(B) = p0 (1 - B/(2B*)), so samples to a target grow as
E(B) = E0 / (1 - B/(2B*)): 1/E is linear in B, per-rollout progress halves at the critical
batch B* and vanishes at 2B*.

The reward logged with an update was measured on rollouts of the policy *before* it, so reward
curves are placed at ``samples - batch`` (rollouts the policy had been trained on).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlvr_schedule.clocks._stats import ar1_inflation, finite, first_crossing, ols, smooth, smooth_in_samples
from rlvr_schedule.clocks.failure import Detector, FailureClock
from rlvr_schedule.records import Run

__all__ = ["ProgressClock", "CriticalBatchFit", "reward_curve", "default_target"]

_AUTO: Any = object()


def _window(n: int, smooth_: int | str) -> int:
    if smooth_ == "auto":
        return max(1, int(round(n / 50)))
    w = int(smooth_)
    if w < 1:
        raise ValueError(f"smooth must be 'auto' or an integer >= 1, got {smooth_!r}")
    return w


def reward_curve(
    run: Run, failure_samples: float | None = None, smooth_: int | str = "auto"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(samples trained on, raw reward, smoothed reward, window) of the pre-failure part of a run.

    ``smooth_="auto"`` averages ~2% of the pre-failure rollouts (a centered window, so crossings
    are not delayed): ~2% of the records at a constant batch; where the batch changes, the window
    is counted in rollouts (each record weighted by its batch), so a few lucky small-batch
    updates at the start of a ramp are not read as progress. The returned window is then the
    median number of records per window.
    """
    batch = run.array("batch")
    x = run.array("samples") - batch
    y = run.array("reward_mean")
    keep = np.isfinite(y)
    if failure_samples is not None:
        keep &= run.array("samples") <= failure_samples
    x, y, batch = x[keep], y[keep], batch[keep]
    if x.size < 3:
        src = f" ({run.source})" if run.source else ""
        raise ValueError(
            f"run {run.name!r}{src}: fewer than 3 records with field 'reward_mean' before the failure point"
        )
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
    """

    def __init__(
        self,
        target: float | None = None,
        smooth: int | str = "auto",
        fraction: float = 0.5,
        level: float = 0.95,
        detectors: Sequence[Detector] | None = None,
    ) -> None:
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        self.target, self.smooth, self.fraction, self.level = target, smooth, fraction, level
        self.detectors = detectors

    def fit(self, run: Run, failure_samples: float | None = _AUTO) -> ProgressClock:
        """``failure_samples`` (None: no failure) skips running the failure detectors."""
        if failure_samples is _AUTO:
            failure_samples = FailureClock(self.detectors).fit(run).failure_samples_
        self.failure_samples_ = failure_samples
        x, y, ys, w = reward_curve(run, failure_samples, self.smooth)
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


def _profile_bstar(
    b: np.ndarray, s: np.ndarray, cb: np.ndarray, bound: np.ndarray
) -> tuple[float, float, float]:
    """Least-squares fit of s = p0 max(0, 1 - B/(2B*)) (censored runs as upper bounds on s).

    Profiled over a log grid of B* (p0 in closed form at each), refined on a finer grid around
    the best point. Returns (B*, p0, loss); B* = inf when per-rollout progress does not fall
    with batch over the sweep.
    """
    scale = float(np.max(np.abs(s))) if s.size else 1.0
    scale = scale if scale > 0 else 1.0
    sn, bn = s / scale, bound / scale

    def losses(grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        inv = np.where(np.isfinite(grid), 1.0 / (2.0 * grid), 0.0)[:, None]
        x = np.maximum(0.0, 1.0 - b[None, :] * inv)
        xx = (x * x).sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            p0 = np.maximum((x @ sn) / xx, 0.0)
        r = sn[None, :] - p0[:, None] * x
        loss = (r * r).sum(1)
        if cb.size:
            xc = np.maximum(0.0, 1.0 - cb[None, :] * inv)
            loss = loss + (np.maximum(0.0, p0[:, None] * xc - bn[None, :]) ** 2).sum(1)
        loss = np.where(xx > 0, loss, np.inf)
        return loss, p0

    allb = np.concatenate([b, cb])
    grid = np.geomspace(max(allb.min() / 8.0, 1e-3), allb.max() * 100.0, 241)
    loss, p0 = losses(grid)
    i = int(np.argmin(loss))
    inf_loss, inf_p0 = losses(np.array([np.inf]))
    if inf_loss[0] <= loss[i] * (1 + 1e-9) or i == grid.size - 1:
        return math.inf, float(inf_p0[0]) * scale, float(inf_loss[0])
    fine = np.geomspace(grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)], 201)
    floss, fp0 = losses(fine)
    k = int(np.argmin(floss))
    return float(fine[k]), float(fp0[k]) * scale, float(floss[k])


def _register(
    curves: Sequence[tuple[np.ndarray, np.ndarray]],
    weights: Sequence[float],
    k0: np.ndarray,
    r0: float,
    n_iter: int = 5,
    bins: int = 60,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Speed factors k_i such that reward_i(x) ~ F(k_i x) for one template F shared by the runs.

    Runs of one task at different batches climb the same reward curve at different speeds (per
    rollout), so aligning whole curves uses every pre-failure record instead of a few crossings.
    Alternates a template (weighted bin means over the pooled rescaled samples of the runs with
    an initial speed, i.e. that crossed a level; each record weighs its batch, i.e. its
    rollouts) with a per-run 1-D search of k on a log grid. The template starts at (0, r0), so
    a run that makes no progress gets k -> 0.
    Returns (k normalised to max 1, template x, template y).
    """
    k = np.array(k0, float)
    ok = np.isfinite(k) & (k > 0)  # runs that crossed a level: they shape the template
    if not ok.any():
        ok = np.ones(k.size, bool)
        k = np.ones(k.size)
    k = np.where(ok, k, 1e-3 * k[ok].min())  # runs that crossed none start slow
    k /= k.max()
    xs, ys, ws = [], [], []
    for (x, y), w in zip(curves, weights):  # chunk long runs: <= 1000 points each keeps this O(n)
        x, y = np.asarray(x, float), np.asarray(y, float)
        c = max(1, -(-x.size // 1000))
        m = x.size // c * c
        if c > 1 and m < x.size:
            x, y = x[:m], y[:m]
        xs.append(x.reshape(-1, c).mean(1))
        ys.append(y.reshape(-1, c).mean(1))
        ws.append(np.full(xs[-1].size, w * c))
    tx = ty = np.zeros(0)
    for it in range(n_iter + 1):
        tau = np.concatenate([ki * x for ki, x, o in zip(k, xs, ok) if o])
        yy = np.concatenate([y for y, o in zip(ys, ok) if o])
        ww = np.concatenate([w for w, o in zip(ws, ok) if o])
        top = float(tau.max())
        if top <= 0:
            break
        b = np.minimum((tau / top * bins).astype(int), bins - 1)
        sw = np.bincount(b, ww, bins)
        have = sw > 0
        tx = np.concatenate(([0.0], np.bincount(b, ww * tau, bins)[have] / sw[have]))
        ty = np.concatenate(([r0], np.bincount(b, ww * yy, bins)[have] / sw[have]))
        if it == n_iter or tx.size < 3:
            break
        for i, (x, y) in enumerate(zip(xs, ys)):
            if it == 0:  # the whole range first (a run may make no progress at all), then locally
                cand = np.geomspace(1e-4, 3.0, 121)
            else:  # shrinking local grids: +-30%, +-10%, ... (final step ~0.1%)
                span = 0.3 * 0.35 ** (it - 1)
                cand = k[i] * np.exp(np.linspace(-span, span, 31))
            pred = np.interp(cand[:, None] * x[None, :], tx, ty)
            sse = ((y[None, :] - pred) ** 2 * ws[i][None, :]).sum(1)
            k[i] = cand[int(np.argmin(sse))]
        k = np.maximum(k / k.max(), 1e-4)
    return k, tx, ty


class CriticalBatchFit:
    """Critical batch from a constant-batch sweep: ``fit(runs)`` gives

    * ``critical_batch_`` B* (rollouts per update at which per-rollout progress halves; inf when it
      does not fall over the sweep) and ``critical_batch_interval_`` (bootstrap over runs);
    * ``rate_at_zero_`` p0 (reward per rollout as B -> 0), ``zero_progress_batch_`` = 2 B*;
    * ``template_`` (samples, reward) of the registered reward curve at the fastest run's speed;
    * ``target_``, ``initial_reward_`` and ``table_`` (one dict per run).

    Each run's per-rollout rate is measured on a common reward scale. Runs of one task at
    different batches climb the same reward curve at different speeds, so the pre-failure reward
    curves are registered onto one template, reward_i(x) ~ F(k_i x) (:func:`_register`; initial
    speeds from the crossings of ``levels`` reward levels up to the target, fitted by
    log E(run, level) = u(level) - v(run)). The rate is (target - initial) / E at the target,
    E = F^-1(target) / k_i: every record counts, not just the few around a crossing. A run that
    never got anywhere (batch >= 2B*) gets k -> 0, which the clamped model p0 max(0, 1 - B/(2B*))
    fits. ``rate_at_zero_`` is in the same units: mean reward per rollout from the initial
    reward to the target as B -> 0. Runs whose batch changed are left out.
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
    ) -> None:
        if levels < 1:
            raise ValueError(f"levels must be >= 1, got {levels}")
        self.target, self.fraction, self.levels, self.smooth = target, fraction, levels, smooth
        self.level, self.n_boot, self.seed, self.detectors = level, n_boot, seed, detectors

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
        first = [self._clock(None, r, f) for r, f in zip(runs, failure_samples)]
        if all(c is None for c in first):
            raise ValueError("no run has 3 records with a reward before its failure point")
        # runs that collapsed before 3 rewarded records have no rising part: left out
        const = [r.constant_batch and c is not None for r, c in zip(runs, first)]
        pool = [c for c, k in zip(first, const) if k] or [c for c in first if c is not None]
        r0 = float(np.median([c.initial_reward_ for c in pool]))
        tgt = self.target
        if tgt is None:
            tgt = default_target(
                [c.initial_reward_ for c in pool], [c.best_reward_ for c in pool], self.fraction
            )
        self.target_, self.initial_reward_ = float(tgt), r0
        clocks = [self._clock(self.target_, r, f) for r, f in zip(runs, failure_samples)]
        self.clocks_ = clocks

        # crossings of common levels -> initial per-run speeds (two-way additive model in log
        # samples), then curve registration on all pre-failure points refines them
        span = self.target_ - r0
        fr = np.linspace(0.3, 1.0, self.levels) if self.levels > 1 else np.array([1.0])
        lv = r0 + fr * span
        idx = [i for i, k in enumerate(const) if k]
        E = np.full((len(runs), lv.size), np.nan)
        for i in idx:
            for j, L in enumerate(lv):
                e = clocks[i].crossing(L)
                E[i, j] = e if finite(e) and e > 0 else np.nan
        init = self._speeds(E, lv, r0)[0] if span > 0 else np.full(len(runs), np.nan)
        rates = np.full(len(runs), np.nan)
        e_fit = np.full(len(runs), np.nan)
        self.template_ = None
        if span > 0 and idx:
            curves = [reward_curve(runs[i], failure_samples[i], self.smooth)[:2] for i in idx]
            k, tx, ty = _register(curves, [float(runs[i].batch) for i in idx], init[idx], r0)
            self.template_ = (tx, ty)
            ttop = first_crossing(tx, ty, self.target_)
            ltop = self.target_
            if not finite(ttop):  # target above what any run reached: its highest level instead
                ltop = r0 + 0.9 * (float(np.max(ty)) - r0)
                ttop = first_crossing(tx, ty, ltop)
            if finite(ttop) and ttop > 0 and ltop > r0:
                for n, i in enumerate(idx):
                    rates[i] = (ltop - r0) / ttop * k[n]
                    e_fit[i] = ttop / k[n] if k[n] > 0 else math.inf
        unc = [i for i in idx if finite(rates[i])]
        bs = np.array([runs[i].batch for i in unc], float)
        ss = np.array([rates[i] for i in unc], float)
        cb = cbd = np.zeros(0)
        nan = math.nan
        self.critical_batch_, self.rate_at_zero_ = nan, nan
        self.critical_batch_interval_ = (nan, nan)
        if np.unique(bs).size >= 2:
            self.critical_batch_, self.rate_at_zero_, _ = _profile_bstar(bs, ss, cb, cbd)
            self.critical_batch_interval_ = self._bootstrap(bs, ss, cb, cbd)
        self.zero_progress_batch_ = 2 * self.critical_batch_
        self.table_ = []
        for i, (r, c) in enumerate(zip(runs, clocks)):
            self.table_.append(
                {
                    "name": r.name,
                    "batch": r.batch,
                    "lr": r.lr,
                    "constant_batch": r.constant_batch,
                    "rate": float(rates[i]) if finite(rates[i]) else nan,
                    "samples_to_target_fit": float(e_fit[i]) if not math.isnan(e_fit[i]) else nan,
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
            return ProgressClock(target, self.smooth, self.fraction, self.level).fit(run, failure_samples)
        except ValueError:
            if failure_samples is None or np.isfinite(run.array("reward_mean")).sum() < 3:
                raise
            return None

    @staticmethod
    def _speeds(E: np.ndarray, lv: np.ndarray, r0: float) -> tuple[np.ndarray, int]:
        obs = np.argwhere(np.isfinite(E))
        rates = np.full(E.shape[0], np.nan)
        if obs.size == 0:
            return rates, -1
        runs_i = np.unique(obs[:, 0])
        lev_j = np.unique(obs[:, 1])
        ri = {v: k for k, v in enumerate(runs_i)}
        lj = {v: k for k, v in enumerate(lev_j)}
        A = np.zeros((obs.shape[0], runs_i.size + lev_j.size))
        y = np.empty(obs.shape[0])
        for k, (i, j) in enumerate(obs):
            A[k, lj[j]] = 1.0
            A[k, lev_j.size + ri[i]] = -1.0
            y[k] = math.log(E[i, j])
        sol, *_ = np.linalg.lstsq(A, y, rcond=None)
        u, v = sol[: lev_j.size], sol[lev_j.size :]
        top = int(lev_j[-1])
        for i in runs_i:
            e_top = math.exp(u[-1] - v[ri[i]])
            rates[i] = (lv[top] - r0) / e_top
        return rates, top

    def _bootstrap(
        self, bs: np.ndarray, ss: np.ndarray, cb: np.ndarray, cbd: np.ndarray
    ) -> tuple[float, float]:
        """Percentile interval of B*: runs resampled with replacement, and each resampled run's
        rate moved by its residual from the full fit with a random sign (a wild bootstrap), so
        both the choice of runs and the scatter of their rates count. Runs are put in a canonical
        order (batch, then rate) first, so the interval does not depend on the order they came in."""
        o = np.lexsort((ss, bs))
        bs, ss = bs[o], ss[o]
        if cb.size:
            oc = np.lexsort((cbd, cb))
            cb, cbd = cb[oc], cbd[oc]
        n_u, n_c = bs.size, cb.size
        n = n_u + n_c
        if n < 3 or self.n_boot < 10:
            return (math.nan, math.nan)
        pred = np.array([self.predict_rate(b) for b in bs]) if n_u else np.zeros(0)
        resid = (ss - pred) * math.sqrt(n_u / max(n_u - 2, 1)) if n_u else pred
        rng = np.random.default_rng(self.seed)
        n_distinct = np.unique(np.concatenate([bs, cb])).size
        est = []
        for _ in range(self.n_boot):
            pick = rng.integers(0, n, n)
            pu, pc = pick[pick < n_u], pick[pick >= n_u] - n_u
            allb = np.concatenate([bs[pu], cb[pc]])
            if pu.size == 0 or np.unique(allb).size < min(3, n_distinct):
                continue
            s_star = pred[pu] + resid[pu] * rng.choice((-1.0, 1.0), pu.size)
            est.append(_profile_bstar(bs[pu], s_star, cb[pc], cbd[pc])[0])
        if len(est) < 10:
            return (math.nan, math.nan)
        a = (1 - self.level) / 2
        e = np.array(est)
        method = "nearest" if np.isinf(e).any() else "linear"
        lo, hi = np.quantile(e, [a, 1 - a], method=method)
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
