"""The known clocks behind the synthetic runs (ground truth that the fits should recover).

Progress clock: reward per rollout ``p(B, lr)`` follows the local quadratic model
(:mod:`rlvr_schedule.theory.quadratic`). Write ``r = lr / lr_sqrt(B)`` for the LR relative to the square-root rule from
``(base_batch, lr0)``; with drift ``a``, noise term ``c = q a`` and curvature term ``d``:

    p(B, lr) = a r - c r**2 - d r**2 B,     a - c = rate_at_zero,   B*(lr0) = critical_batch

so on the sqrt rule ``p(B) = p0 (1 - B / (2 B*))`` and the critical batch at another LR is
``B* (1/r - q) / (1 - q)`` (about 1/lr when the noise fraction ``q`` is small).

Failure clock: policy entropy is consumed at a first-order rate proportional to the LR's
per-sample drift ``r`` (Cui et al. 2025), so on the sqrt rule collapse arrives after
``failure_samples`` rollouts at any batch; ``failure_exponent`` alpha makes it
``failure_samples (B / base_batch)**alpha`` instead (alpha = 1: a step clock). With
``failure_rates = (k1, k2, k3)`` the entropy budget (health h, 1 at the start) is spent as

    dh/ds = -(k1 r + k2 r**2 + k3 r**2 B) / (F (k1 + k2 + k3 base_batch))

per rollout s (normalised so that the sqrt rule at ``base_batch`` collapses after F =
``failure_samples``); k3 B << k1 + k2 is a sample clock, (1, 0, 0) the default above.

``entropy_damping`` damps progress by exp(H - H0) as the entropy H runs down from H0 =
``entropy0``: along any constant run dR/dH is then -(p / kappa) exp(H - H0) (kappa: entropy per
rollout), so reward follows Cui et al.'s R = b - a exp(H) and flattens as entropy runs out instead of
climbing to a cliff. ``crash_hazard`` adds reward crashes as a separate hazard: expected crashes per F
rollouts at r = 1, scaling as r**2 (a crash can come before the entropy budget is spent).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from rlvr_schedule.theory.scaling import lr_for_batch

__all__ = ["ClockModel"]


@dataclass(frozen=True)
class ClockModel:
    """Ground-truth clocks of a synthetic task. Units: rollouts; reward is a success rate in [0, 1]."""

    critical_batch: float = 256.0
    failure_samples: float = 50_000.0
    lr0: float = 1e-6
    base_batch: int = 64
    rate_at_zero: float | None = None
    noise_fraction: float = 0.2
    failure_exponent: float = 0.0
    drift: float = 0.0
    reward0: float = 0.1
    reward_ceiling: float = 0.8
    entropy0: float = 1.0
    collapse_entropy: float = 0.1
    b_simple: float | None = None
    group_size: int = 8
    crash_fraction: float = 0.1
    failure_rates: tuple[float, float, float] = (1.0, 0.0, 0.0)
    entropy_damping: bool = False
    crash_hazard: float = 0.0

    def __post_init__(self) -> None:
        for name in ("critical_batch", "failure_samples", "lr0", "base_batch", "entropy0", "crash_fraction"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be finite and > 0, got {v!r}")
        if not 0.0 <= self.reward0 < self.reward_ceiling <= 1.0:
            raise ValueError(
                f"need 0 <= reward0 < reward_ceiling <= 1, got reward0={self.reward0!r}, "
                f"reward_ceiling={self.reward_ceiling!r}"
            )
        if not 0.0 <= self.collapse_entropy < self.entropy0:
            raise ValueError(f"collapse_entropy must be in [0, entropy0), got {self.collapse_entropy!r}")
        if not 0.0 <= self.noise_fraction < 1.0:
            raise ValueError(f"noise_fraction must be in [0, 1), got {self.noise_fraction!r}")
        if self.drift < 0:
            raise ValueError(f"drift must be >= 0, got {self.drift!r}")
        if self.rate_at_zero is not None and not self.rate_at_zero > 0:
            raise ValueError(f"rate_at_zero must be > 0, got {self.rate_at_zero!r}")
        if self.b_simple is not None and not self.b_simple > 0:
            raise ValueError(f"b_simple must be > 0, got {self.b_simple!r}")
        k = tuple(self.failure_rates)
        if len(k) != 3 or any(not (math.isfinite(x) and x >= 0) for x in k) or k[0] + k[1] + k[2] <= 0:
            raise ValueError(
                f"failure_rates must be three finite numbers >= 0, not all 0, got {self.failure_rates!r}"
            )
        if not (math.isfinite(self.crash_hazard) and self.crash_hazard >= 0):
            raise ValueError(f"crash_hazard must be finite and >= 0, got {self.crash_hazard!r}")
        if int(self.group_size) < 1:
            raise ValueError(f"group_size must be >= 1, got {self.group_size!r}")

    # -- progress clock -------------------------------------------------------------------
    @property
    def p0(self) -> float:
        """Reward per rollout as B -> 0 at lr0 (default: 86% of the climb by the failure point)."""
        if self.rate_at_zero is not None:
            return float(self.rate_at_zero)
        return 2.0 * (self.reward_ceiling - self.reward0) / self.failure_samples

    def sqrt_lr(self, batch: float) -> float:
        """The LR the square-root rule gives ``batch`` (the runs' default LR)."""
        return lr_for_batch(batch, self.base_batch, self.lr0, "sqrt")

    def lr_ratio(self, batch: float, lr: float | None) -> float:
        """``lr`` relative to the square-root rule at ``batch`` (1.0 when ``lr`` is None)."""
        if lr is None:
            return 1.0
        if not (math.isfinite(lr) and lr > 0):
            raise ValueError(f"lr must be finite and > 0, got {lr!r}")
        return float(lr) / self.sqrt_lr(batch)

    def critical_batch_at(self, lr_ratio: float = 1.0, progress: float = 0.0) -> float:
        """B* for an LR ``lr_ratio`` x the sqrt rule, after ``progress`` in [0, 1] of the climb."""
        q = self.noise_fraction
        base = self.critical_batch * (1.0 + self.drift * min(max(progress, 0.0), 1.0))
        return base * (1.0 / lr_ratio - q) / (1.0 - q)

    def progress_rate(self, batch: float, lr: float | None = None, progress: float = 0.0) -> float:
        """Initial reward gain per rollout ``p(B, lr)`` (negative past the zero-progress batch)."""
        r = self.lr_ratio(batch, lr)
        q = self.noise_fraction
        a = self.p0 / (1.0 - q)
        bstar = self.critical_batch * (1.0 + self.drift * min(max(progress, 0.0), 1.0))
        d = self.p0 / (2.0 * bstar)
        return a * r - q * a * r * r - d * r * r * float(batch)

    # -- failure clock --------------------------------------------------------------------
    def failure_at(self, batch: float, lr: float | None = None) -> float:
        """Rollouts until the entropy budget runs out at a constant ``(batch, lr)``."""
        r = self.lr_ratio(batch, lr)
        k1, k2, k3 = (float(x) for x in self.failure_rates)
        rate = (k1 * r + k2 * r * r + k3 * r * r * float(batch)) / (k1 + k2 + k3 * self.base_batch)
        return self.failure_samples * (float(batch) / self.base_batch) ** self.failure_exponent / rate

    def crash_rate(self, batch: float, lr: float | None = None) -> float:
        """Reward-crash hazard per rollout at ``(batch, lr)`` (0 without ``crash_hazard``)."""
        if self.crash_hazard == 0:
            return 0.0
        r = self.lr_ratio(batch, lr)
        return self.crash_hazard * r * r / self.failure_samples

    def damping(self, entropy: float) -> float:
        """Progress factor at policy entropy ``entropy``: exp(H - H0) with ``entropy_damping``, else 1."""
        return math.exp(entropy - self.entropy0) if self.entropy_damping else 1.0

    def noise_scale(self, progress: float = 0.0) -> float:
        """B_simple = tr(Sigma) / |G|^2 (default: the critical batch; rises with drift like B*)."""
        base = self.critical_batch if self.b_simple is None else self.b_simple
        return base * (1.0 + self.drift * min(max(progress, 0.0), 1.0))

    def reward_after(self, gain: float) -> float:
        """Reward after accumulated initial-rate gain ``gain``: saturates at the ceiling."""
        span = self.reward_ceiling - self.reward0
        return min(
            1.0, max(0.0, self.reward0 + span * (1.0 - math.exp(min(-gain / span, 700.0))))
        )  # no overflow past divergence

    def to_dict(self) -> dict:
        d = asdict(self)
        d["failure_rates"] = list(self.failure_rates)
        return d
