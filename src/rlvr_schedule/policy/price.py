"""The price of an update in rollouts, and the batch that is cheapest at it.

A run's GPU time is close to ``sum t_step(B)`` with ``t_step(B) = a B + b``: ``a`` the per-rollout
work (generation, scoring, the log-prob and training passes), ``b`` the fixed per-update work
(optimizer step, weight sync, launch and stragglers). So a run costs ``a x (rollouts + rho x
updates)`` with the price ``rho = b / a`` in rollouts per update. A user states it
(``rollouts_per_update``, or ``seconds_per_rollout`` and ``seconds_per_update``); else it is fitted
from step times at two or more batches (:class:`StepTimeFit`: a sweep's logs, or a live run after a
switch, :class:`LivePrice`); before either, :data:`DEFAULT_PRICE`.

The cheapest batch at a price (docs/ARCHITECTURE.md, "The operating batch at a price"): on the local
model samples to a fixed progress are ``E(B) = E0 / (1 - B/2B*)`` and updates ``E(B)/B``, so the
cost ``E + rho E/B`` is least at ``B^2 + 2 rho B - 2 rho B* = 0``:
``B = -rho + sqrt(rho^2 + 2 rho B*)`` (:func:`cost_optimal_batch`), below B* at every price.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rlvr_schedule.clocks._stats import t_quantile

__all__ = [
    "DEFAULT_PRICE",
    "LivePrice",
    "StepTimeFit",
    "cost_optimal_batch",
    "price_equivalent",
    "run_cost",
    "step_seconds",
]

#: The price (rollouts per update) before any is stated or measured: the middle of the plausible
#: range 4-64 at a batch of about 64 (a verl FSDP2 step of a 7B model; docs/ARCHITECTURE.md).
DEFAULT_PRICE = 16.0


def cost_optimal_batch(critical_batch: float, price: float) -> float:
    """The batch with the least ``rollouts + price x updates`` to a fixed progress at B*
    ``critical_batch``: ``-rho + sqrt(rho^2 + 2 rho B*)`` (0 at price 0, -> B* as the price grows)."""
    rho, bstar = float(price), float(critical_batch)
    if rho <= 0 or bstar <= 0:
        return 0.0
    # the same root written without cancellation at small rho: 2 rho B* / (rho + sqrt(rho^2 + 2 rho B*))
    return 2.0 * rho * bstar / (rho + math.sqrt(rho * rho + 2.0 * rho * bstar))


def price_equivalent(fraction: float, critical_batch: float) -> float:
    """The price at which ``fraction`` x B* is the cheapest batch: ``f^2 B* / (2 (1 - f))``."""
    f = float(fraction)
    return math.inf if f >= 1 else f * f * float(critical_batch) / (2.0 * (1.0 - f))


def run_cost(rollouts: float, updates: float, price: float) -> float:
    """What a run costs in rollouts' worth of time: ``rollouts + price x updates``."""
    return float(rollouts) + float(price) * float(updates)


#: Where hosts log the wall seconds of one update (first found wins): TRL's ``step_time``, this
#: library's driver, verl's ``timing_s/step``; the reference trainer's parts are summed.
STEP_TIME_KEYS = ("step_time", "timing_s/step")
STEP_TIME_PARTS = ("rollout_s", "update_s", "push_s")


def step_seconds(extra: Mapping[str, Any]) -> float:
    """The wall seconds of one update from a record's ``extra`` (NaN when the host logged none)."""
    for k in STEP_TIME_KEYS:
        v = extra.get(k)
        if isinstance(v, (int, float)) and math.isfinite(v) and v > 0:
            return float(v)
    parts = [extra.get(k) for k in STEP_TIME_PARTS]
    if parts[0] is not None and parts[1] is not None:
        vals = [float(p) for p in parts if isinstance(p, (int, float)) and math.isfinite(p)]
        if len(vals) >= 2 and sum(vals) > 0:
            return float(sum(vals))
    return math.nan


class StepTimeFit:
    """``t_step = a x B + b`` by least squares over (batch, seconds) pairs; ``price_ = b / a``.

    Fitted values: ``seconds_per_rollout_`` (a), ``seconds_per_update_`` (b), ``price_`` and its 95%
    ``price_interval_`` (delta method on b/a, heteroscedasticity-robust), ``batches_`` (distinct batches seen) and
    ``unidentified_``: why no price (None when one is). One batch cannot separate a from b: every
    timing grows with the batch, so the split between per-rollout and per-update work is unknown.
    """

    def __init__(self, level: float = 0.95) -> None:
        self.level = level

    def fit(self, batches: Sequence[float], seconds: Sequence[float], source: str = "") -> StepTimeFit:
        b = np.asarray(batches, dtype=float)
        t = np.asarray(seconds, dtype=float)
        ok = np.isfinite(b) & np.isfinite(t) & (t > 0) & (b > 0)
        b, t = b[ok], t[ok]
        self.source_ = source
        self.n_ = int(b.size)
        self.batches_ = sorted({int(x) for x in b})
        self.seconds_per_rollout_ = self.seconds_per_update_ = math.nan
        self.price_ = math.nan
        self.price_interval_: tuple[float, float] = (math.nan, math.nan)
        self.unidentified_: str | None = None
        if self.n_ == 0:
            self.unidentified_ = "no step times in the records (a host logs step_time or timing_s/step)"
            return self
        if len(self.batches_) < 2:
            self.unidentified_ = (
                f"step times at one batch only ({self.batches_[0]}, {self.n_} updates): every timing grows "
                "with the batch, so per-rollout and per-update time cannot be separated; give "
                "rollouts_per_update, or step times at a second batch"
            )
            return self
        X = np.column_stack([b, np.ones_like(b)])
        coef, *_ = np.linalg.lstsq(X, t, rcond=None)
        a, c = float(coef[0]), float(coef[1])
        self.seconds_per_rollout_, self.seconds_per_update_ = a, c
        if a <= 0:
            self.unidentified_ = f"step time does not grow with the batch (slope {a:.3g} s/rollout)"
            return self
        self.price_ = max(c, 0.0) / a
        dof = self.n_ - 2
        if dof >= 1:
            # heteroscedasticity-robust (HC1) covariance: a step's noise grows with its batch
            resid = t - X @ coef
            bread = np.linalg.inv(X.T @ X)
            cov = bread @ (X.T * resid**2) @ X @ bread * (self.n_ / dof)
            rho = c / a
            var = (cov[1, 1] + rho * rho * cov[0, 0] - 2 * rho * cov[0, 1]) / (a * a)
            h = t_quantile(0.5 + self.level / 2, dof) * math.sqrt(max(var, 0.0))
            self.price_interval_ = (max(rho - h, 0.0), max(rho + h, 0.0))
        # an update that costs no rollouts, or one whose interval admits that, says nothing: the
        # cheapest batch at price 0 is the smallest, whatever the task
        if c <= 0:
            self.unidentified_ = (
                f"per-update time not above 0 (fitted {c:.3g} s at {a:.3g} s/rollout): the step times "
                "grow in proportion to the batch"
            )
        elif self.price_interval_[0] <= 0:
            self.unidentified_ = (
                f"measured {self.price_:.3g} rollouts/update, but its interval "
                f"[{self.price_interval_[0]:.3g}, {self.price_interval_[1]:.3g}] spans 0"
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        """What ``fit --json`` reports as ``price``."""
        fin = math.isfinite
        return dict(
            rollouts_per_update=self.price_ if fin(self.price_) else None,
            interval=[x if fin(x) else None for x in self.price_interval_],
            seconds_per_rollout=self.seconds_per_rollout_ if fin(self.seconds_per_rollout_) else None,
            seconds_per_update=self.seconds_per_update_ if fin(self.seconds_per_update_) else None,
            batches=self.batches_,
            updates=self.n_,
            source=self.source_,
            unidentified=self.unidentified_,
        )

    @classmethod
    def from_runs(cls, runs: Iterable[Any], source: str = "step times in the logs") -> StepTimeFit:
        """From :class:`~rlvr_schedule.records.Run` objects (each record's ``extra``)."""
        bs, ts = [], []
        for run in runs:
            for r in run.records:
                s = step_seconds(r.extra)
                if math.isfinite(s):
                    bs.append(r.batch)
                    ts.append(s)
        return cls().fit(bs, ts, source)


class LivePrice:
    """The price as a live run measures it: an EMA of the step time per batch (``smoothing``, the
    weight of a new record), fitted as a line once ``min_updates`` updates at each of two or more
    batches are seen (a run after a switch). :meth:`value` is the stated price where one is given,
    else the measured one, else ``default``."""

    def __init__(
        self,
        stated: float | None = None,
        default: float = DEFAULT_PRICE,
        smoothing: float = 0.2,
        min_updates: int = 3,
    ) -> None:
        self.stated = stated
        self.default = default
        self.smoothing = smoothing
        self.min_updates = min_updates
        self._mean: dict[int, float] = {}
        self._count: dict[int, int] = {}
        self._measured: float | None = None

    def update(self, batch: int, seconds: float) -> None:
        """Feed one update's step time (NaN: nothing logged, ignored)."""
        if not (math.isfinite(seconds) and seconds > 0):
            return
        b = int(batch)
        m = self._mean.get(b)
        self._mean[b] = seconds if m is None else m + self.smoothing * (seconds - m)
        self._count[b] = self._count.get(b, 0) + 1
        ready = [k for k, n in self._count.items() if n >= self.min_updates]
        if len(ready) >= 2:
            fit = StepTimeFit().fit(ready, [self._mean[k] for k in ready], "live")
            if fit.unidentified_ is None:
                self._measured = fit.price_

    @property
    def measured(self) -> float | None:
        """The price the step times give (None until two batches are seen)."""
        return self._measured

    @property
    def source(self) -> str:
        if self.stated is not None:
            return "stated"
        return "measured" if self._measured is not None else "default"

    def value(self) -> float:
        if self.stated is not None:
            return float(self.stated)
        return self._measured if self._measured is not None else float(self.default)

    def state_dict(self) -> dict[str, Any]:
        return dict(
            mean={str(k): v for k, v in self._mean.items()},
            count={str(k): v for k, v in self._count.items()},
            measured=self._measured,
        )

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._mean = {int(k): float(v) for k, v in (state.get("mean") or {}).items()}
        self._count = {int(k): int(v) for k, v in (state.get("count") or {}).items()}
        m = state.get("measured")
        self._measured = None if m is None else float(m)
