"""Online estimators a scheduler feeds one record at a time (bounded memory, O(1) per record).

* :class:`OnlineProgress` - the progress clock at the current batch: a windowed regression of
  reward on cumulative samples gives reward per rollout, and after a batch switch the ratio of
  the new rate to the old one (``switch_effect``): < 1 means the larger batch buys less progress
  per rollout, the signature of passing the critical batch.
* :class:`GradientNoiseScale` - McCandlish's two-batch estimate of B_simple = tr(Sigma)/|G|^2
  from the full-batch and a micro-batch gradient norm logged at the same parameters.

Both follow ``torch.optim.lr_scheduler``: ``update(record)``, ``state_dict()``,
``load_state_dict()`` (plain JSON-able dicts that go into framework checkpoints).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any

from rlvr_schedule.clocks._stats import SlidingOLS, finite, t_quantile
from rlvr_schedule.records import StepRecord

__all__ = ["OnlineProgress", "GradientNoiseScale", "two_batch_estimate"]


class OnlineProgress:
    """Reward per rollout at the current batch, and the effect of each batch switch.

    ``window`` bounds how many recent records the regression uses (memory and how fast it
    forgets the reward curve's bend); the regression restarts at every batch switch so each
    stage's rate is measured at its own batch. ``rate`` is NaN until ``min_points`` records of
    the current stage have a reward.
    """

    def __init__(self, window: int = 200, min_points: int = 20, max_switches: int = 32) -> None:
        if window < 3:
            raise ValueError(f"window must be >= 3, got {window}")
        if not 3 <= min_points <= window:
            raise ValueError(f"min_points must be in [3, window], got {min_points}")
        self.window = int(window)
        self.min_points = int(min_points)
        self.max_switches = int(max_switches)
        self._ols = SlidingOLS(self.window)
        self.batch: int | None = None
        self.step_count = 0
        self.samples = 0
        self._before: dict[str, Any] | None = None  # the stage before the latest switch
        self.switches: deque[dict[str, Any]] = deque(maxlen=self.max_switches)

    # -- estimates -------------------------------------------------------------------------
    def _fit(self) -> tuple[float, float]:
        if len(self._ols) < self.min_points:
            return (math.nan, math.nan)
        slope, _, se, _ = self._ols.fit()
        return (slope, se)

    @property
    def rate(self) -> float:
        """Reward gained per rollout at the current batch (NaN until enough records)."""
        return self._fit()[0]

    @property
    def rate_stderr(self) -> float:
        return self._fit()[1]

    def rate_interval(self, level: float = 0.95) -> tuple[float, float]:
        r, se = self._fit()
        if not (finite(r) and finite(se)):
            return (math.nan, math.nan)
        h = t_quantile(0.5 + level / 2, len(self._ols) - 2) * se
        return (r - h, r + h)

    @property
    def rate_per_step(self) -> float:
        """Reward gained per optimizer update (rate x batch): maximal at the critical batch."""
        return self.rate * self.batch if self.batch else math.nan

    @property
    def switch_effect(self) -> float:
        """Rate after the latest batch switch / rate before it (NaN until both are known).

        1 means per-rollout progress survived the switch (below the critical batch); the
        theory's p(B) = p0 (1 - B/(2B*)) predicts (2B* - B_new)/(2B* - B_old).
        """
        if self._before is None:
            return math.nan
        after = self.rate
        before = self._before["rate"]
        if not (finite(after) and finite(before)) or before == 0:
            return math.nan
        return after / before

    # -- updates ---------------------------------------------------------------------------
    def update(self, record: StepRecord) -> float:
        """Consume one record; returns the current rate (NaN until known)."""
        self.step_count += 1
        self.samples = int(record.samples)
        if self.batch is not None and record.batch != self.batch:
            self._close_switch()
            r, se = self._fit()
            self._before = {
                "step": int(record.step),
                "samples": int(record.samples),
                "batch_before": int(self.batch),
                "batch_after": int(record.batch),
                "rate": r,
                "rate_stderr": se,
            }
            self._ols.clear()
        self.batch = int(record.batch)
        if finite(record.reward_mean):
            self._ols.add(float(record.samples), float(record.reward_mean))
        return self.rate

    def _close_switch(self) -> None:
        if self._before is not None:
            b = dict(self._before)
            b["rate_after"] = self.rate
            b["effect"] = self.switch_effect
            self.switches.append(b)

    def switch_history(self) -> list[dict[str, Any]]:
        """Closed switches plus the open one (latest), each with rates before/after and effect."""
        out = [dict(s) for s in self.switches]
        if self._before is not None:
            b = dict(self._before)
            b["rate_after"] = self.rate
            b["effect"] = self.switch_effect
            out.append(b)
        return out

    # -- checkpointing -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "min_points": self.min_points,
            "max_switches": self.max_switches,
            "ols": self._ols.state_dict(),
            "batch": self.batch,
            "step_count": self.step_count,
            "samples": self.samples,
            "before": None if self._before is None else dict(self._before),
            "switches": [dict(s) for s in self.switches],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.window = int(state["window"])
        self.min_points = int(state["min_points"])
        self.max_switches = int(state["max_switches"])
        self._ols = SlidingOLS(self.window)
        self._ols.load_state_dict(state["ols"])
        self.batch = None if state["batch"] is None else int(state["batch"])
        self.step_count = int(state["step_count"])
        self.samples = int(state["samples"])
        self._before = None if state["before"] is None else dict(state["before"])
        self.switches = deque((dict(s) for s in state["switches"]), maxlen=self.max_switches)


def two_batch_estimate(g2_small: float, b_small: float, g2_big: float, b_big: float) -> tuple[float, float]:
    """Unbiased (|G|^2, tr(Sigma)) from squared gradient norms at two batch sizes (same params).

    From E|G_B|^2 = |G|^2 + tr(Sigma)/B (McCandlish et al. 2018, appendix A).
    """
    if not b_big > b_small > 0:
        raise ValueError(f"need b_big > b_small > 0, got b_small={b_small}, b_big={b_big}")
    g2 = (b_big * g2_big - b_small * g2_small) / (b_big - b_small)
    tr_sigma = (g2_small - g2_big) / (1.0 / b_small - 1.0 / b_big)
    return g2, tr_sigma


class GradientNoiseScale:
    """B_simple = tr(Sigma)/|G|^2 from ``record.grad_norm`` (batch of ``record.batch`` rollouts)
    and ``record.grad_norm_micro`` (one micro-batch of ``record.micro_batch`` rollouts).

    Each record gives unbiased but very noisy estimates of |G|^2 and tr(Sigma); their ratio
    would be biased, so numerator and denominator get separate bias-corrected EMAs with decay
    ``beta`` and ``b_simple`` is the ratio of the EMAs. Records without both norms, or with
    micro_batch >= batch, are skipped. Norms must be taken before clipping.
    """

    def __init__(self, beta: float = 0.99) -> None:
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"beta must be in [0, 1), got {beta}")
        self.beta = float(beta)
        self._g2 = 0.0
        self._s = 0.0
        self._w = 0.0  # EMA of ones: bias correction that also works across beta changes
        self.n_updates = 0

    @property
    def g2(self) -> float:
        """Smoothed |G|^2 (squared norm of the true gradient); NaN before any update."""
        return self._g2 / self._w if self._w > 0 else math.nan

    @property
    def trace_sigma(self) -> float:
        """Smoothed tr(Sigma) (per-rollout gradient variance); NaN before any update."""
        return self._s / self._w if self._w > 0 else math.nan

    @property
    def b_simple(self) -> float:
        """tr(Sigma)/|G|^2 in rollouts; NaN while |G|^2 is not positive (noise dominates)."""
        g2 = self.g2
        if not finite(g2) or g2 <= 0:
            return math.nan
        return self.trace_sigma / g2

    def update(self, record: StepRecord) -> float:
        """Consume one record; returns the current ``b_simple``."""
        mb = record.micro_batch
        if (
            mb is None
            or not finite(record.grad_norm)
            or not finite(record.grad_norm_micro)
            or not 0 < mb < record.batch
        ):
            return self.b_simple
        g2, s = two_batch_estimate(record.grad_norm_micro**2, mb, record.grad_norm**2, record.batch)
        b = self.beta
        self._g2 = b * self._g2 + (1 - b) * g2
        self._s = b * self._s + (1 - b) * s
        self._w = b * self._w + (1 - b)
        self.n_updates += 1
        return self.b_simple

    def state_dict(self) -> dict[str, Any]:
        return {"beta": self.beta, "g2": self._g2, "s": self._s, "w": self._w, "n_updates": self.n_updates}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.beta = float(state["beta"])
        self._g2 = float(state["g2"])
        self._s = float(state["s"])
        self._w = float(state["w"])
        self.n_updates = int(state["n_updates"])
