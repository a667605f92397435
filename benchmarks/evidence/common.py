"""Shared pieces of the evidence scripts: intervals, machine description, run measures."""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Sequence

import numpy as np

from rlvr_schedule.records import Run

#: two-sided 95% Student t quantiles by degrees of freedom (df > 30: normal)
_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    24: 2.064,
    29: 2.045,
}


def t95(df: int) -> float:
    if df <= 0:
        return math.nan
    if df in _T95:
        return _T95[df]
    if df > 29:
        return 1.96
    return _T95[max(k for k in _T95 if k <= df)]


def mean_ci(xs: Sequence[float | None]) -> tuple[float, float, float, int]:
    """Mean and 95% t-interval over the finite values; (mean, low, high, n)."""
    a = np.array([x for x in xs if x is not None and math.isfinite(x)], dtype=float)
    if a.size == 0:
        return math.nan, math.nan, math.nan, 0
    m = float(a.mean())
    if a.size == 1:
        return m, math.nan, math.nan, 1
    h = t95(a.size - 1) * float(a.std(ddof=1)) / math.sqrt(a.size)
    return m, m - h, m + h, int(a.size)


def fmt_ci(xs: Sequence[float | None], digits: int = 0, total: int | None = None) -> str:
    m, lo, hi, n = mean_ci(xs)
    if n == 0:
        return "never"
    f = f"{{:.{digits}f}}"
    s = f.format(m) if n == 1 else f"{f.format(m)} [{f.format(lo)}, {f.format(hi)}]"
    if total is not None and n < total:
        s += f" ({n}/{total} reached)"
    return s


def machine() -> str:
    return (
        f"{platform.node() or 'host'}: {os.cpu_count()} CPUs ({platform.machine()}), "
        f"Python {platform.python_version()}, numpy {np.__version__}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )


def smoothed_reward(run: Run, window: float) -> np.ndarray:
    """Reward averaged over the trailing ``window`` rollouts (records weighted by batch)."""
    r = np.nan_to_num(run.array("reward_mean"), nan=0.0)
    b = run.array("batch")
    cs = np.concatenate([[0.0], np.cumsum(b)])
    cr = np.concatenate([[0.0], np.cumsum(b * r)])
    ends = np.arange(1, len(r) + 1)
    starts = np.clip(np.searchsorted(cs, cs[1:] - window, side="right") - 1, 0, ends - 1)
    return (cr[ends] - cr[starts]) / (cs[ends] - cs[starts])


def measures(
    run: Run, target: float, window: float, collapsed_at: float | None, t0: float, t1: float
) -> dict[str, float | None]:
    """Rollouts, updates and modelled seconds to the target (smoothed reward), and the best smoothed
    reward before the collapse began."""
    sm = smoothed_reward(run, window)
    samples = run.array("samples")
    batch = run.array("batch")
    hit = np.flatnonzero(sm >= target)
    before = samples <= (collapsed_at if collapsed_at is not None else np.inf)
    best = float(sm[before].max()) if before.any() else float(sm[0])
    out: dict[str, float | None] = {
        "samples": None,
        "steps": None,
        "seconds": None,
        "best_reward": best,
        "collapsed_at": collapsed_at,
        "final_batch": float(batch[-1]),
    }
    if hit.size:
        k = int(hit[0])
        out["samples"] = float(samples[k])
        out["steps"] = float(k + 1)
        out["seconds"] = float(np.sum(t0 + t1 * batch[: k + 1]))
    return out
