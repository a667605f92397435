"""Small numeric helpers shared by the clocks (numpy and the standard library only).

The core must import with numpy alone, so the few statistics we need (t quantiles, OLS with
a standard error, a sliding-window regression with O(1) updates, crossings of a smoothed
curve) live here instead of coming from scipy/statsmodels.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

import numpy as np

__all__ = [
    "t_quantile",
    "ols",
    "OLSResult",
    "SlidingOLS",
    "smooth",
    "first_crossing",
    "ar1_inflation",
    "finite",
]


def finite(x: float | None) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def t_quantile(q: float, df: float) -> float:
    """Quantile ``q`` of Student's t with ``df`` degrees of freedom.

    Exact for df 1 and 2, Cornish-Fisher expansion beyond (error < 1e-3 for df >= 3 at the
    usual levels): enough for confidence intervals, without scipy.
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q}")
    if df <= 0 or not math.isfinite(df):
        return NormalDist().inv_cdf(q) if math.isinf(df) else math.nan
    if df == 1:
        return math.tan(math.pi * (q - 0.5))
    if df == 2:
        return (2 * q - 1) / math.sqrt(2 * q * (1 - q))
    z = NormalDist().inv_cdf(q)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


class OLSResult:
    """Slope/intercept of y on x with standard errors (plain iid-residual formulas)."""

    __slots__ = ("slope", "intercept", "slope_se", "intercept_se", "resid_sd", "n", "x_mean", "sxx")

    def __init__(
        self,
        slope: float,
        intercept: float,
        slope_se: float,
        intercept_se: float,
        resid_sd: float,
        n: int,
        x_mean: float,
        sxx: float,
    ) -> None:
        self.slope, self.intercept = slope, intercept
        self.slope_se, self.intercept_se = slope_se, intercept_se
        self.resid_sd, self.n, self.x_mean, self.sxx = resid_sd, n, x_mean, sxx

    def slope_interval(self, level: float = 0.95, inflation: float = 1.0) -> tuple[float, float]:
        if self.n < 3 or not math.isfinite(self.slope_se):
            return (math.nan, math.nan)
        t = t_quantile(0.5 + level / 2, self.n - 2)
        h = t * self.slope_se * inflation
        return (self.slope - h, self.slope + h)


def ols(x: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> OLSResult:
    """(Weighted) least-squares line; NaN fields when fewer than 2 distinct x."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if w is not None:
        w = np.asarray(w, float)
        ok &= np.isfinite(w) & (w > 0)
    x, y = x[ok], y[ok]
    w = np.ones_like(x) if w is None else w[ok] / np.mean(w[ok])
    n = int(x.size)
    nan = math.nan
    if n < 2:
        return OLSResult(nan, nan, nan, nan, nan, n, nan, nan)
    sw = w.sum()
    xm = float((w * x).sum() / sw)
    ym = float((w * y).sum() / sw)
    dx = x - xm
    sxx = float((w * dx * dx).sum())
    if sxx <= 0:
        return OLSResult(nan, ym, nan, nan, nan, n, xm, 0.0)
    slope = float((w * dx * (y - ym)).sum() / sxx)
    intercept = ym - slope * xm
    if n > 2:
        r = y - intercept - slope * x
        s2 = float((w * r * r).sum() / (n - 2))
        se = math.sqrt(s2 / sxx)
        ise = math.sqrt(s2 * (1.0 / sw + xm * xm / sxx))
        return OLSResult(slope, intercept, se, ise, math.sqrt(s2), n, xm, sxx)
    return OLSResult(slope, intercept, nan, nan, nan, n, xm, sxx)


def ar1_inflation(resid: np.ndarray) -> float:
    """Standard-error inflation sqrt((1+rho)/(1-rho)) for lag-1 autocorrelated residuals.

    Logged metrics are smoothed or trend-following, so iid standard errors are too narrow.
    """
    r = np.asarray(resid, float)
    r = r[np.isfinite(r)]
    if r.size < 4:
        return 1.0
    r = r - r.mean()
    den = float(r @ r)
    if den <= 0:
        return 1.0
    rho = float(r[1:] @ r[:-1]) / den
    rho = min(max(rho, 0.0), 0.95)
    return math.sqrt((1 + rho) / (1 - rho))


def smooth_in_samples(
    x: np.ndarray, y: np.ndarray, weight: np.ndarray, width: float
) -> tuple[np.ndarray, float]:
    """Centered moving average over a window of ``width`` *rollouts* (records within width/2 of
    each point), each record weighted by ``weight`` (its batch). For runs whose batch changes, a
    window of N records would span 16x more rollouts at a 16x larger batch. Returns the smoothed
    curve and the median number of records per window."""
    x, y, wt = (np.asarray(a, float) for a in (x, y, weight))
    ok = np.isfinite(y)
    wv = np.where(ok, wt, 0.0)
    cs = np.concatenate(([0.0], np.cumsum(np.where(ok, y, 0.0) * wv)))
    cw = np.concatenate(([0.0], np.cumsum(wv)))
    cn = np.concatenate(([0], np.cumsum(ok)))
    lo = np.searchsorted(x, x - width / 2, side="left")
    hi = np.searchsorted(x, x + width / 2, side="right")
    tot = cw[hi] - cw[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (cs[hi] - cs[lo]) / tot
    out[tot == 0] = np.nan
    cnt = cn[hi] - cn[lo]
    return out, float(np.median(cnt)) if cnt.size else 1.0


def smooth(y: np.ndarray, window: int) -> np.ndarray:
    """Centered moving average ignoring NaN (partial windows at the ends): no lag, so a
    crossing of the smoothed curve is not delayed."""
    y = np.asarray(y, float)
    n = y.size
    if window <= 1 or n == 0:
        return y.copy()
    ok = np.isfinite(y)
    v = np.where(ok, y, 0.0)
    cs = np.concatenate(([0.0], np.cumsum(v)))
    cn = np.concatenate(([0], np.cumsum(ok)))
    h = window // 2
    idx = np.arange(n)
    lo = np.clip(idx - h, 0, n)
    hi = np.clip(idx + (window - h), 0, n)
    cnt = cn[hi] - cn[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (cs[hi] - cs[lo]) / cnt
    out[cnt == 0] = np.nan
    return out


def first_crossing(x: np.ndarray, y: np.ndarray, level: float) -> float:
    """First x at which y reaches ``level`` (linear interpolation); NaN if never.

    If y starts at or above the level, the first x is returned.
    """
    y = np.asarray(y, float)
    hit = np.flatnonzero(y >= level)
    if hit.size == 0:
        return math.nan
    i = int(hit[0])
    if i == 0:
        return float(x[0])
    y0, y1 = y[i - 1], y[i]
    if not (np.isfinite(y0) and y1 > y0):
        return float(x[i])
    f = (level - y0) / (y1 - y0)
    return float(x[i - 1] + f * (x[i] - x[i - 1]))


class SlidingOLS:
    """Regression of y on x over the last ``maxlen`` points with O(1) amortised updates.

    Sums are kept relative to an anchor x that is reset every ``maxlen`` additions (sums are
    then recomputed from the window), so x of order 1e9 (cumulative samples) keeps full
    precision over 10^6+ updates while memory stays bounded by the window.
    """

    def __init__(self, maxlen: int) -> None:
        if maxlen < 2:
            raise ValueError(f"maxlen must be >= 2, got {maxlen}")
        self.maxlen = int(maxlen)
        self._pts: deque[tuple[float, float]] = deque(maxlen=self.maxlen)
        self._since_anchor = 0
        self._recompute()

    def _recompute(self) -> None:
        self._anchor = self._pts[0][0] if self._pts else 0.0
        a = self._anchor
        self._n = len(self._pts)
        self._sx = self._sy = self._sxx = self._sxy = self._syy = 0.0
        for x, y in self._pts:
            dx = x - a
            self._sx += dx
            self._sy += y
            self._sxx += dx * dx
            self._sxy += dx * y
            self._syy += y * y
        self._since_anchor = 0

    def clear(self) -> None:
        self._pts.clear()
        self._recompute()

    def add(self, x: float, y: float) -> None:
        if len(self._pts) == self.maxlen:
            ox, oy = self._pts[0]
            dx = ox - self._anchor
            self._sx -= dx
            self._sy -= oy
            self._sxx -= dx * dx
            self._sxy -= dx * oy
            self._syy -= oy * oy
            self._n -= 1
        if self._n == 0:  # anchor at the first point so sums stay small from the start
            self._anchor = float(x)
        self._pts.append((float(x), float(y)))
        dx = float(x) - self._anchor
        self._sx += dx
        self._sy += y
        self._sxx += dx * dx
        self._sxy += dx * y
        self._syy += y * y
        self._n += 1
        self._since_anchor += 1
        if self._since_anchor >= self.maxlen:
            self._recompute()

    def drop_before(self, x: float) -> None:
        """Drop the oldest points while their x is below ``x`` (a window by x span, not count)."""
        while self._pts and self._pts[0][0] < x:
            ox, oy = self._pts.popleft()
            dx = ox - self._anchor
            self._sx -= dx
            self._sy -= oy
            self._sxx -= dx * dx
            self._sxy -= dx * oy
            self._syy -= oy * oy
            self._n -= 1
        if self._n == 0:
            self._recompute()

    def __len__(self) -> int:
        return self._n

    @property
    def last_x(self) -> float:
        return self._pts[-1][0] if self._pts else math.nan

    def fit(self) -> tuple[float, float, float, float]:
        """(slope, intercept at x=0, slope standard error, residual sd); NaN when unknown."""
        n = self._n
        nan = math.nan
        if n < 2:
            return (nan, nan, nan, nan)
        mx = self._sx / n
        my = self._sy / n
        sxx = self._sxx - n * mx * mx
        if sxx <= 1e-12 * max(1.0, self._sxx):
            return (nan, nan, nan, nan)
        sxy = self._sxy - n * mx * my
        slope = sxy / sxx
        intercept = my - slope * (mx + self._anchor)
        if n < 3:
            return (slope, intercept, nan, nan)
        syy = self._syy - n * my * my
        rss = max(syy - slope * sxy, 0.0)
        s2 = rss / (n - 2)
        return (slope, intercept, math.sqrt(s2 / sxx), math.sqrt(s2))

    def mean_point(self) -> tuple[float, float]:
        """(mean x, mean y) of the window; NaN when empty."""
        if self._n == 0:
            return (math.nan, math.nan)
        return (self._sx / self._n + self._anchor, self._sy / self._n)

    def state_dict(self) -> dict[str, Any]:
        # the running sums travel too: a resumed window must give bit-identical fits
        return {
            "maxlen": self.maxlen,
            "points": [list(p) for p in self._pts],
            "sums": [self._anchor, self._sx, self._sy, self._sxx, self._sxy, self._syy],
            "since_anchor": self._since_anchor,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.maxlen = int(state["maxlen"])
        self._pts = deque(((float(x), float(y)) for x, y in state["points"]), maxlen=self.maxlen)
        self._recompute()
        if "sums" in state:
            (self._anchor, self._sx, self._sy, self._sxx, self._sxy, self._syy) = map(float, state["sums"])
            self._since_anchor = int(state["since_anchor"])
