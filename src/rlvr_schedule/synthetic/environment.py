"""A closed-loop synthetic task: a schedule picks (batch, lr), the task answers with the next record.

The task keeps three pieces of state: rollouts consumed, reward gained (at the progress-clock rate
``p(B, lr)`` of :class:`~rlvr_schedule.synthetic.model.ClockModel`, optionally with the critical
batch rising as reward climbs, as Merrill et al. 2025 observed in pretraining) and *health*, the
entropy budget that every rollout consumes at a rate set by the LR. When health runs out the run
collapses: entropy falls to near zero, reward crashes, the gradient norm spikes and the KL blows up
over ``crash_fraction x failure_samples`` rollouts. Per-step metrics carry sampling noise scaled by
``noise`` (0 gives the exact clocks); the full-batch and micro-batch gradient norms are drawn at the
same parameters from a gradient whose noise scale is ``B_simple``, as the two-batch estimator assumes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlvr_schedule.records import BatchSchedule, Decision, Run, StepRecord
from rlvr_schedule.synthetic.model import ClockModel

__all__ = ["SyntheticEnvironment"]

_GRAD_DIM = 16  # dimension of the sampled gradient (only its norms are logged)
_GRAD_SQ = 0.01  # |G|^2 of the true gradient before collapse
_REWARD_FLOOR = 0.02  # reward after a full crash
_MAX_STEPS = 1_000_000


class SyntheticEnvironment:
    """Answers a schedule's ``(batch, lr)`` each update with the next :class:`StepRecord`.

    Parameters are those of :class:`ClockModel` plus ``noise`` (metric noise multiplier, 0 for
    exact clocks), ``seed`` and, for a host's wall clock, ``seconds_per_rollout`` and
    ``seconds_per_update``: each record then logs ``step_time`` = a B + b (x a 5% log-normal jitter
    from a stream of its own, so the metrics' random numbers are unchanged). :meth:`run` resets the task first, so two runs with the same
    seed share their random numbers (a fair comparison between schedules).
    """

    def __init__(
        self,
        critical_batch: float = ClockModel.critical_batch,
        failure_samples: float = ClockModel.failure_samples,
        lr0: float = ClockModel.lr0,
        base_batch: int = ClockModel.base_batch,
        noise: float = 1.0,
        seed: int | None = 0,
        drift: float = ClockModel.drift,
        seconds_per_rollout: float | None = None,
        seconds_per_update: float | None = None,
        **model_kwargs: Any,
    ) -> None:
        if not (math.isfinite(noise) and noise >= 0):
            raise ValueError(f"noise must be finite and >= 0, got {noise!r}")
        self.model = ClockModel(
            critical_batch=critical_batch,
            failure_samples=failure_samples,
            lr0=lr0,
            base_batch=base_batch,
            drift=drift,
            **model_kwargs,
        )
        self.noise = float(noise)
        self.step_time = (
            None
            if seconds_per_rollout is None or seconds_per_update is None
            else (float(seconds_per_rollout), float(seconds_per_update))
        )
        self.seed = seed
        self.decisions: list[Decision] = []
        self.reset()

    # -- state ----------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        """Start the task again (same seed unless one is given)."""
        if seed is not None:
            self.seed = seed
        self.rng = np.random.default_rng(self.seed)
        self.step_count = 0
        self.samples = 0
        self.gain = 0.0
        self.health = 1.0
        #: rollouts consumed when collapse began (None while healthy)
        self.collapsed_at: float | None = None
        #: what ended the run: "entropy" (budget spent) or "hazard" (a reward crash); None while healthy
        self.crash_cause: str | None = None
        # exponential draw for the crash hazard (drawn from its own stream: the metric noise is unchanged)
        self._crash_budget = float(
            np.random.default_rng(None if self.seed is None else [int(self.seed), 7]).exponential()
        )
        self._reward_at_collapse = self.model.reward0
        self._clock_rng = np.random.default_rng(None if self.seed is None else [int(self.seed), 11])
        direction = np.zeros(_GRAD_DIM)
        direction[0] = 1.0
        self._grad = direction * math.sqrt(_GRAD_SQ)

    @property
    def progress(self) -> float:
        """Fraction of the climb from reward0 to the ceiling done so far (ground truth)."""
        m = self.model
        return (m.reward_after(self.gain) - m.reward0) / (m.reward_ceiling - m.reward0)

    @property
    def collapsed(self) -> bool:
        return self.collapsed_at is not None

    # -- one update -----------------------------------------------------------------------
    def step(self, batch: int, lr: float | None = None) -> StepRecord:
        """Do one optimizer update of ``batch`` rollouts at ``lr`` (None: the sqrt rule)."""
        if isinstance(batch, bool) or int(batch) != batch or batch < 1:
            raise ValueError(f"batch must be a positive integer, got {batch!r}")
        batch = int(batch)
        m = self.model
        lr_used = m.sqrt_lr(batch) if lr is None else float(lr)
        ratio = m.lr_ratio(batch, lr_used)
        before = self.samples
        self.samples += batch
        self.step_count += 1
        if not self.collapsed:
            damp = m.damping(m.collapse_entropy + (m.entropy0 - m.collapse_entropy) * self.health)
            self.gain += m.progress_rate(batch, lr_used, self.progress) * damp * batch
            span = m.failure_at(batch, lr_used)
            hazard = m.crash_rate(batch, lr_used)
            crash_in = (self._crash_budget / hazard) if hazard > 0 else math.inf  # rollouts to a crash
            if self.health - batch / span <= 0.0 or crash_in <= batch:
                by_entropy = self.health * span
                self.collapsed_at = before + min(by_entropy, crash_in)
                self.crash_cause = "entropy" if by_entropy <= crash_in else "hazard"
                self._reward_at_collapse = m.reward_after(self.gain)
                self.health = max(0.0, self.health - min(by_entropy, crash_in) / span)
            else:
                self.health -= batch / span
                self._crash_budget -= hazard * batch
        return self._observe(batch, lr_used, ratio)

    def _observe(self, batch: int, lr: float, ratio: float) -> StepRecord:
        m, rng, noise = self.model, self.rng, self.noise
        progress = self.progress
        if self.collapsed_at is not None:
            crash = 1.0 - math.exp(
                -(self.samples - self.collapsed_at) / (m.crash_fraction * m.failure_samples)
            )
            reward = self._reward_at_collapse * (1.0 - crash) + _REWARD_FLOOR * crash
            level = m.collapse_entropy + (m.entropy0 - m.collapse_entropy) * self.health
            entropy = level * (1.0 - 0.9 * crash)
        else:
            crash = 0.0
            reward = m.reward_after(self.gain)
            entropy = m.collapse_entropy + (m.entropy0 - m.collapse_entropy) * self.health
        used = 1.0 - self.health
        kl = (0.002 + 0.05 * used**2) * (1.0 + 50.0 * crash)
        clip = min(1.0, 0.02 + 0.08 * used + 0.4 * crash)
        length = (200.0 + 300.0 * progress) * (1.0 + crash)
        micro = max(1, batch // 8) if batch >= 2 else None
        big, small = self._grad_norms(batch, micro, m.noise_scale(progress))
        spike = 1.0 + 9.0 * crash
        if noise > 0:
            p = reward
            reward = p + noise * math.sqrt(max(p * (1 - p), 1e-4) / batch) * rng.standard_normal()
            entropy *= math.exp(noise * 0.1 / math.sqrt(batch) * rng.standard_normal())
            kl *= math.exp(noise * 0.05 * rng.standard_normal())
            clip *= math.exp(noise * 0.05 * rng.standard_normal())
            length *= math.exp(noise * 0.02 * rng.standard_normal())
        reward = min(1.0, max(0.0, reward))
        g = int(m.group_size)
        return StepRecord(
            step=self.step_count,
            samples=self.samples,
            batch=batch,
            lr=lr,
            reward_mean=reward,
            reward_std=math.sqrt(reward * (1.0 - reward)),
            entropy=entropy,
            kl=kl,
            grad_norm=big * spike,
            clip_frac=min(1.0, clip),
            response_length=length,
            frac_zero_std=reward**g + (1.0 - reward) ** g,
            grad_norm_micro=math.nan if small is None else small * spike,
            micro_batch=micro,
            extra={} if self.step_time is None else {"step_time": self._step_seconds(batch)},
        )

    def _step_seconds(self, batch: int) -> float:
        assert self.step_time is not None
        a, b = self.step_time
        return (a * batch + b) * math.exp(0.05 * self._clock_rng.standard_normal())

    def _grad_norms(self, batch: int, micro: int | None, b_simple: float) -> tuple[float, float | None]:
        """Full-batch and micro-batch gradient norms at the same parameters (E|g_B|^2 = |G|^2 + trS/B)."""
        tr_sigma = b_simple * _GRAD_SQ
        if self.noise == 0:
            big = math.sqrt(_GRAD_SQ + tr_sigma / batch)
            small = None if micro is None else math.sqrt(_GRAD_SQ + tr_sigma / micro)
            return big, small
        per_dim = math.sqrt(tr_sigma / _GRAD_DIM)  # per-sample noise std per coordinate
        if micro is None:
            n_big = self.rng.standard_normal(_GRAD_DIM) * per_dim / math.sqrt(batch)
            return float(np.linalg.norm(self._grad + n_big)), None
        n_micro = self.rng.standard_normal(_GRAD_DIM) * per_dim / math.sqrt(micro)
        n_rest = self.rng.standard_normal(_GRAD_DIM) * per_dim / math.sqrt(batch - micro)
        n_big = (micro * n_micro + (batch - micro) * n_rest) / batch
        return float(np.linalg.norm(self._grad + n_big)), float(np.linalg.norm(self._grad + n_micro))

    # -- closed loop ----------------------------------------------------------------------
    def run(
        self,
        schedule: BatchSchedule,
        max_samples: float,
        *,
        name: str = "schedule",
        max_steps: int = _MAX_STEPS,
    ) -> Run:
        """Reset, then drive ``schedule`` until ``max_samples`` rollouts are consumed.

        Starts from ``schedule.current``; each record goes to ``schedule.step`` and the returned
        decision sets the next update's batch and LR. The decisions are kept in ``self.decisions``.
        """
        if not (max_samples > 0):
            raise ValueError(f"max_samples must be > 0, got {max_samples!r}")
        self.reset()
        self.decisions = []
        stage = schedule.current
        batch, lr = int(stage.batch), float(stage.lr)
        records: list[StepRecord] = []
        while self.samples < max_samples and len(records) < max_steps:
            rec = self.step(batch, lr)
            records.append(rec)
            decision = schedule.step(rec)
            self.decisions.append(decision)
            if decision.batch < 1 or not (decision.lr > 0):
                raise ValueError(
                    f"schedule decision at step {rec.step} has batch={decision.batch!r}, "
                    f"lr={decision.lr!r}; both must be positive"
                )
            batch, lr = int(decision.batch), float(decision.lr)
        return Run(records, name=name)

    def run_constant(
        self,
        batch: int,
        max_samples: float | None = None,
        *,
        lr: float | None = None,
        steps: int | None = None,
        name: str | None = None,
    ) -> Run:
        """Reset, then train at a constant ``batch`` (LR: ``lr`` or the sqrt rule).

        Stops after ``steps`` updates or at ``max_samples`` rollouts (default: 1.3 x this batch's
        failure point, so the collapse is in the log).
        """
        if steps is None and max_samples is None:
            max_samples = 1.3 * self.model.failure_at(batch, lr)
        self.reset()
        self.decisions = []
        records: list[StepRecord] = []
        while (steps is None or len(records) < steps) and (max_samples is None or self.samples < max_samples):
            records.append(self.step(batch, lr))
        return Run(records, name=name or f"B{batch}")

    def __repr__(self) -> str:
        return f"SyntheticEnvironment({self.model!r}, noise={self.noise}, seed={self.seed})"
