"""The B* tracker: the critical batch now, from a known B* and the online gradient-noise estimate.

B_simple (:class:`~rlvr_schedule.clocks.GradientNoiseScale`) is LR-free while B* ~ 1/lr, so it
serves as a *relative* tracker: the known B* (``fit_sweep``'s, rescaled to the policy's LR) times
B_simple's ratio to its value at rollout 0; with no B* known, B_simple itself. The value at rollout
0 is a line through the EMA when first ready and the EMA now (each at its mean rollout position),
extrapolated back to 0 once the line spans 6x the first point's distance from 0 (clipped to a
factor 2 of it): the first value alone reads B* at 0.5-0.7 of the truth for a whole run when B*
rises early (``tests/core/test_policy_tracker.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rlvr_schedule.clocks import GradientNoiseScale
from rlvr_schedule.records import StepRecord

__all__ = ["CriticalBatchTracker"]


class CriticalBatchTracker:
    """The B* estimate, warm after ``estimate_samples`` rollouts of records carrying both gradient
    norms and the noise EMA's horizon in records (100 at beta 0.99). ``known``: the known B* at the
    policy's own LR (None: none known)."""

    #: the line through the first warm EMA and the EMA now freezes its value at rollout 0 once it
    #: spans this many times the first point's position: a shorter span reads the start sooner but
    #: noisier (``benchmarks/evidence/tracker_anchor.py`` runs the priced bar with 1-2: cheaper at
    #: small prices, short of the section 3a bar at 16 or 64, so 6 stays)
    anchor_span: float = 6.0
    #: the frozen value's clip below, as a fraction of the first warm value (above: 2x)
    anchor_floor: float = 0.5

    def __init__(self, estimate_samples: int, known: float | None = None) -> None:
        self.known = known
        self.noise = GradientNoiseScale()
        self.est_samples = int(estimate_samples)
        self.est_records = math.ceil(1.0 / (1.0 - self.noise.beta) - 1e-9)
        self.noise_samples = 0  # rollouts of the records that fed the gradient-noise estimate
        self.warm = False  # the estimate has its records and rollouts
        self.bs_ref = math.nan  # B_simple when first estimated: the reference of the relative tracker
        self.pos_ref = math.nan  # the EMA's mean rollout position then
        self.b0 = math.nan  # B_simple extrapolated back to rollout 0, frozen once the span allows
        self.ps = 0.0  # EMA (the noise estimate's weights) of the rollout position of its records
        self.pw = 0.0

    def update(self, record: StepRecord) -> float:
        """Fold ``record`` into the noise estimate; B_simple now (NaN before it is ready)."""
        n0 = self.noise.n_updates
        b_simple = self.noise.update(record)
        if self.noise.n_updates != n0:  # the record entered the noise EMA: so does its position
            beta = self.noise.beta
            self.ps = beta * self.ps + (1 - beta) * float(record.samples)
            self.pw = beta * self.pw + (1 - beta)
            self.noise_samples += record.batch
        return b_simple

    @property
    def pos(self) -> float:
        """The noise EMA's mean rollout position (the rollout count its value stands for)."""
        return self.ps / self.pw if self.pw > 0 else math.nan

    def start_level(self) -> float:
        """B_simple at rollout 0: the frozen line's value there, else the reference itself."""
        return self.b0 if self.b0 == self.b0 else self.bs_ref  # NaN: not frozen yet

    def _maybe_freeze_b0(self, bs: float) -> None:
        ref, pa, pn = self.bs_ref, self.pos_ref, self.pos
        if self.b0 == self.b0 or not (math.isfinite(pn) and math.isfinite(pa)):
            return
        span = pn - pa
        if span > 0 and span >= self.anchor_span * pa:
            b0 = ref - (bs - ref) / span * pa
            self.b0 = min(max(b0, self.anchor_floor * ref), 2.0 * ref)

    def estimate(self, b_simple: float, scale: float) -> float:
        """The B* estimate once the noise estimate is warm (NaN before); ``scale``: the stage's LR
        ratio to the LR rule (B* ~ 1/r)."""
        if not self.warm:  # both counts only grow: checked until they pass
            self.warm = self.noise_samples >= self.est_samples and self.noise.n_updates >= self.est_records
        if not (self.warm and math.isfinite(b_simple) and b_simple > 0):
            return math.nan
        if math.isnan(self.bs_ref):
            self.bs_ref, self.pos_ref = b_simple, self.pos
        self._maybe_freeze_b0(b_simple)
        return self.critical_estimate(b_simple, scale)

    def critical_estimate(self, b_simple: float | None = None, scale: float = 1.0) -> float:
        """The known B* x B_simple / B_simple at rollout 0 (B_simple alone when no B* is known),
        divided by ``scale``; NaN before the noise estimate is ready."""
        bs = self.noise.b_simple if b_simple is None else b_simple
        ref = self.bs_ref
        if math.isnan(ref) or math.isnan(bs) or ref <= 0:
            return math.nan
        est = bs if self.known is None else self.known * bs / self.start_level()
        return est / scale  # an LR held below the rule (failure switches) raises B*

    def state_dict(self) -> dict[str, Any]:
        out = {
            k: v
            for k, v in vars(self).items()
            if k not in ("noise", "known", "est_samples", "est_records", "warm")
        }
        return {**out, "noise": self.noise.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.noise.load_state_dict(state["noise"])
        for k, v in state.items():
            if k != "noise" and k in vars(self):
                setattr(self, k, type(getattr(self, k))(v))
        self.warm = self.noise_samples >= self.est_samples and self.noise.n_updates >= self.est_records
