"""The gradient noise scale measured at fixed parameters, and the batch range it implies.

McCandlish et al. 2018 (arXiv:1812.06162): a mini-batch gradient of B samples has
``E|G_B|^2 = |G|^2 + tr(Sigma) / B``, so squared gradient norms at two batch sizes and the same
parameters give unbiased estimates of ``|G|^2`` and ``tr(Sigma)``, and their ratio is the simple
noise scale ``B_simple = tr(Sigma) / |G|^2`` (B_noise when the Hessian is a multiple of the
identity). :func:`noise_scale_from_draws` takes repeated draws: ``n`` units, each a big batch of
``m`` small batches (``b_big = m * b_small``), with the small batches' squared norms and the big
batch's. Averages are taken over the units before the ratio (the ratio of per-unit estimates is
biased); the interval is a percentile bootstrap over units (an upper end of infinity where
``|G|^2`` is not bounded away from 0, i.e. the noise scale is not bounded above).

``|G|^2`` is checked across the two sizes when the big batches' Gram matrix is given: the mean
inner product of two *different* big batches is a second unbiased estimate of ``|G|^2``, built
from the big size alone, so a two-batch estimate that drifts with the batch (a gradient that is
not the mean of independent parts, a per-batch normalisation) shows as a difference between them.

Adam's preconditioned noise scale is the same estimate on gradients multiplied by ``D = 1 /
(sqrt(v) + eps)`` with ``v`` fixed beforehand (e.g. the mean squared gradient of a few warm-up
draws): ``tr(D Sigma D) / |D G|^2``, the theory's ``B~_noise`` with the Hessian taken as the
identity (``closed_form_b_simple`` gives its true value on a known model).

Where B* can fall (docs/ARCHITECTURE.md, "The noise scale and where B* can fall"): on the
square-root rule ``B* = eps~ / lambda - B~_noise / 2 = B~_noise (lambda_0 / lambda - 1/2)`` with
``lambda_0 = eps~ / B~_noise`` the LR that makes the most progress per rollout at small batches,
so an LR within a factor of about 4 below to 4/3 above lambda_0 puts B* between a quarter and four
times the noise scale: :func:`sweep_batches` derives a sweep's batches from a measured noise scale.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rlvr_schedule.theory._forms import as_operator, as_vector, diagonal

__all__ = [
    "NoiseScaleEstimate",
    "SweepRange",
    "closed_form_b_simple",
    "critical_batch_from_noise",
    "noise_scale_from_draws",
    "sweep_batches",
    "zero_variance_share",
]


@dataclass(frozen=True)
class NoiseScaleEstimate:
    """The two-batch noise scale with its bootstrap interval (all batch sizes in samples).

    ``g2``/``trace``: the unbiased |G|^2 and tr(Sigma); ``b_simple = trace / g2`` (inf where
    ``g2 <= 0``). ``g2_cross``: |G|^2 from inner products of different big batches (NaN without a
    Gram matrix); ``g2_stable``: its difference to ``g2`` has a bootstrap interval holding 0
    (None: not checked). ``sq_small``/``sq_big``: the mean squared norms at the two sizes.
    """

    b_simple: float
    interval: tuple[float, float]
    g2: float
    g2_interval: tuple[float, float]
    trace: float
    trace_interval: tuple[float, float]
    b_small: float
    b_big: float
    units: int
    sq_small: float
    sq_big: float
    g2_cross: float = math.nan
    g2_cross_interval: tuple[float, float] = (math.nan, math.nan)
    g2_stable: bool | None = None
    level: float = 0.95
    notes: list[str] = field(default_factory=list)

    @property
    def bounded(self) -> bool:
        """Both ends of the interval finite and positive: the probe pins the noise scale down."""
        lo, hi = self.interval
        return math.isfinite(lo) and math.isfinite(hi) and lo > 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["bounded"] = self.bounded
        return d


def _ratio(trace: np.ndarray | float, g2: np.ndarray | float) -> np.ndarray:
    t, g = np.asarray(trace, float), np.asarray(g2, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(g > 0, t / np.where(g > 0, g, 1.0), np.inf)


def _two_batch(sq_small, sq_big, b_small: float, b_big: float):
    g2 = (b_big * sq_big - b_small * sq_small) / (b_big - b_small)
    tr = (sq_small - sq_big) / (1.0 / b_small - 1.0 / b_big)
    return g2, tr


def _cross_mean(gram: np.ndarray, idx: np.ndarray) -> float:
    """Mean inner product over pairs of draws that are different units (a resample may repeat one)."""
    sub = gram[np.ix_(idx, idx)]
    other = idx[:, None] != idx[None, :]
    return float(sub[other].mean()) if other.any() else math.nan


def _pct(x: np.ndarray, level: float) -> tuple[float, float]:
    a = (1.0 - level) / 2.0
    if np.isinf(x).any():  # an interpolated end next to an infinite draw would be NaN
        lo, hi = np.quantile(x, [a, 1.0 - a], method="nearest")
    else:
        lo, hi = np.quantile(x, [a, 1.0 - a])
    return float(lo), float(hi)


def noise_scale_from_draws(
    sq_small,
    sq_big,
    b_small: float,
    b_big: float,
    *,
    big_gram=None,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> NoiseScaleEstimate:
    """B_simple from repeated draws at two batch sizes, all at the same parameters.

    ``sq_small``: ``(n, m)`` squared norms of the small-batch gradients (or ``(n,)``: each unit's
    mean over its small batches); ``sq_big``: ``(n,)`` squared norms of the big-batch gradients,
    unit ``i`` paired with row ``i`` (the units are resampled whole, so nesting the small batches
    in the big one is allowed). ``big_gram``: optional ``(n, n)`` inner products of the big-batch
    gradients (its diagonal is ``sq_big``) for the cross-size check of |G|^2.
    """
    s = np.asarray(sq_small, dtype=float)
    s = s.mean(axis=1) if s.ndim == 2 else s
    b = np.asarray(sq_big, dtype=float)
    if s.ndim != 1 or b.ndim != 1 or s.size != b.size:
        raise ValueError(f"sq_small and sq_big need one entry per unit, got {s.shape} and {b.shape}")
    n = b.size
    if n < 2:
        raise ValueError(f"need at least 2 units (repeated draws), got {n}")
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(b))) or np.any(s < 0) or np.any(b < 0):
        raise ValueError("squared norms must be finite and >= 0")
    bs, bb = float(b_small), float(b_big)
    if not (0 < bs < bb):
        raise ValueError(f"need 0 < b_small < b_big, got {b_small}, {b_big}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    gram = None
    if big_gram is not None:
        gram = np.asarray(big_gram, dtype=float)
        if gram.shape != (n, n) or not np.all(np.isfinite(gram)):
            raise ValueError(f"big_gram must be a finite ({n}, {n}) matrix, got shape {gram.shape}")

    g2, tr = _two_batch(s.mean(), b.mean(), bs, bb)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(int(n_boot), n))
    g2_b, tr_b = _two_batch(s[idx].mean(axis=1), b[idx].mean(axis=1), bs, bb)
    bsimple_b = _ratio(tr_b, g2_b)
    notes: list[str] = []
    cross, cross_iv, stable = math.nan, (math.nan, math.nan), None
    if gram is not None:
        cross = _cross_mean(gram, np.arange(n))
        cb = np.array([_cross_mean(gram, i) for i in idx])
        ok = np.isfinite(cb)
        cross_iv = _pct(cb[ok], level)
        dlo, dhi = _pct((cb - g2_b)[ok], level)
        stable = bool(dlo <= 0.0 <= dhi)
        if not stable:
            notes.append(
                f"|G|^2 differs across the two sizes: {g2:.4g} from the two-batch estimate, "
                f"{cross:.4g} from the big batches alone (difference's interval [{dlo:.3g}, {dhi:.3g}])"
            )
    if g2 <= 0:
        notes.append("|G|^2 estimate <= 0: the noise dominates; the noise scale is not bounded above")
    lo, hi = _pct(bsimple_b, level)
    if not math.isfinite(hi):
        notes.append("the interval's upper end is open: more draws, or a bigger big batch, would bound it")
    return NoiseScaleEstimate(
        b_simple=float(_ratio(tr, g2)),
        interval=(lo, hi),
        g2=float(g2),
        g2_interval=_pct(g2_b, level),
        trace=float(tr),
        trace_interval=_pct(tr_b, level),
        b_small=bs,
        b_big=bb,
        units=n,
        sq_small=float(s.mean()),
        sq_big=float(b.mean()),
        g2_cross=cross,
        g2_cross_interval=cross_iv,
        g2_stable=stable,
        level=level,
        notes=notes,
    )


def closed_form_b_simple(gradient, noise_cov, preconditioner=None) -> float:
    """tr(D Sigma D) / |D G|^2 (D = diag(``preconditioner``), the identity when None): the value
    :func:`noise_scale_from_draws` estimates on (preconditioned) gradients of a known model."""
    g = as_vector("gradient", gradient)
    s = as_operator("noise_cov", noise_cov, g.size)
    d = np.ones_like(g) if preconditioner is None else as_vector("preconditioner", preconditioner)
    if d.size != g.size:
        raise ValueError(f"preconditioner must have {g.size} entries, got {d.size}")
    dg = d * g
    return float(np.sum(d * d * diagonal(s)) / (dg @ dg))


def critical_batch_from_noise(b_noise: float, lr_ratio) -> np.ndarray | float:
    """B* on the square-root rule for an LR ``lr_ratio`` times the small-batch best LR lambda_0:
    ``B~_noise (1 / lr_ratio - 1/2)`` (<= 0 from lr_ratio = 2 on: no batch makes progress)."""
    r = np.asarray(lr_ratio, dtype=float)
    if np.any(r <= 0) or not math.isfinite(b_noise) or b_noise <= 0:
        raise ValueError("b_noise and lr_ratio must be finite and > 0")
    out = float(b_noise) * (1.0 / r - 0.5)
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class SweepRange:
    """Batches for a constant-batch sweep around a measured noise scale, and why."""

    batches: list[int]
    low: float  # the wanted range before rounding: factor_low x the noise scale ...
    high: float  # ... to factor_high x it
    centre: float  # the noise scale the range is built on
    designed: bool  # False: the probe did not bound the noise scale; the batches are a fallback
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _round_to(x: float, multiple: int) -> int:
    return max(multiple, int(round(x / multiple)) * multiple)


def sweep_batches(
    b_noise: float,
    interval: tuple[float, float] | None = None,
    *,
    group_size: int = 1,
    factor_low: float = 0.25,
    factor_high: float = 4.0,
    steps: int = 5,
    max_batch: int | None = None,
    fallback: tuple[int, ...] = (),
) -> SweepRange:
    """``steps`` batches log-spaced from ``factor_low`` to ``factor_high`` times the noise scale
    (by default a quarter to four times, 16x in x2 steps), each a multiple of ``group_size``.

    The range holds B* for LRs from about lambda_0 / 4.5 to 4/3 lambda_0
    (:func:`critical_batch_from_noise`). When ``interval`` is given and not bounded (an open or
    non-positive end), the range is not designed: ``fallback`` is returned (noted). ``max_batch``
    (what the machine runs) caps the range, noted when it binds.
    """
    if group_size < 1 or steps < 2 or not 0 < factor_low < factor_high:
        raise ValueError("need group_size >= 1, steps >= 2 and 0 < factor_low < factor_high")
    notes: list[str] = []
    bounded = math.isfinite(b_noise) and b_noise > 0
    if interval is not None:
        lo, hi = interval
        bounded = bounded and math.isfinite(lo) and math.isfinite(hi) and lo > 0
    if not bounded:
        notes.append(
            f"noise scale {b_noise:.4g} {tuple(interval) if interval else ''} not bounded: "
            "no sweep range derived from it"
        )
        return SweepRange(sorted(fallback), math.nan, math.nan, float(b_noise), False, notes)
    low, high = factor_low * b_noise, factor_high * b_noise
    if interval is not None and interval[1] / interval[0] > factor_high / factor_low:
        notes.append(
            f"the noise scale's interval [{interval[0]:.4g}, {interval[1]:.4g}] is wider than the "
            f"sweep's {factor_high / factor_low:.0f}x range: B* may fall outside it"
        )
    grid = np.geomspace(low, high, steps)
    batches = sorted({_round_to(float(x), group_size) for x in grid})
    if max_batch is not None:
        cap = max(group_size, (int(max_batch) // group_size) * group_size)
        if batches[-1] > cap:
            notes.append(f"capped at the largest batch the machine runs ({cap})")
            batches = sorted({min(b, cap) for b in batches})
    if len(batches) < steps:
        notes.append(f"{steps - len(batches)} batch(es) merged by rounding to multiples of {group_size}")
    return SweepRange(batches, float(low), float(high), float(b_noise), True, notes)


def zero_variance_share(rewards, group_size: int) -> float:
    """Share of groups whose rewards are all equal (no advantage, no gradient); ``rewards`` flat,
    groups contiguous."""
    r = np.asarray(rewards, dtype=float)
    if group_size < 1 or r.size == 0 or r.size % group_size:
        raise ValueError(f"rewards must be a non-empty multiple of group_size={group_size}, got {r.size}")
    g = r.reshape(-1, group_size)
    return float(np.mean(np.all(g == g[:, :1], axis=1)))
