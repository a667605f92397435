"""Batch schedules users reach for instead of the two-clock policy: the baselines it must beat.

* :class:`LinearRampSchedule` - Megatron-LM's ``--rampup-batch-size <start> <increment> <ramp_samples>``:
  the batch grows from ``start`` by ``increment`` in equal sample intervals until it reaches
  ``final_batch`` after ``ramp_samples`` rollouts (GPT-3 style batch warm-up). Fixed in advance,
  so it is a :class:`~rlvr_schedule.policy.StaticSchedule` and exports to a static config file.
* :class:`NoiseScaleAdaptiveSchedule` - Pollux / AdaptDL (Qiao et al., OSDI'21): pick the batch
  ``M`` that maximises goodput = throughput x statistical efficiency, with
  ``efficiency(M) = (phi + M0) / (phi + M)`` and ``phi`` = B_simple = tr(Sigma)/|G|^2 from the
  online two-batch estimate (:class:`~rlvr_schedule.clocks.GradientNoiseScale`), throughput from a
  per-update cost model ``t0 + t1 x M``; the LR follows the AdaScale gain
  ``r = (phi + M0) / (phi + M) x M / M0`` (Johnson et al. 2020) or a scaling rule ("sqrt" for Adam).

Both are :class:`~rlvr_schedule.records.BatchSchedule`\\ s with JSON-able ``state_dict()``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rlvr_schedule.clocks import GradientNoiseScale
from rlvr_schedule.errors import ConfigError
from rlvr_schedule.policy.base import Schedule
from rlvr_schedule.policy.constraints import BatchConstraints
from rlvr_schedule.policy.static import StaticSchedule
from rlvr_schedule.records import Decision, Stage, StepRecord
from rlvr_schedule.theory.scaling import RULES, lr_for_batch

__all__ = ["LinearRampSchedule", "NoiseScaleAdaptiveSchedule", "goodput", "pollux_efficiency"]

_NS_KIND = "noise_scale_adaptive"
LR_RULES = ("adascale",) + tuple(RULES)


def _pos_int(name: str, v: Any, *, zero: bool = False) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < (0 if zero else 1):
        raise ConfigError(
            f"must be a {'non-negative' if zero else 'positive'} integer, got {v!r}", field=name
        )
    return v


def _pos_num(name: str, v: Any, *, zero: bool = False) -> float:
    if (
        isinstance(v, bool)
        or not isinstance(v, (int, float))
        or not math.isfinite(v)
        or (v < 0 if zero else v <= 0)
    ):
        raise ConfigError(
            f"must be a finite {'non-negative' if zero else 'positive'} number, got {v!r}", field=name
        )
    return float(v)


class LinearRampSchedule(StaticSchedule):
    """Megatron's linear batch ramp-up: ``start`` + ``increment`` x k after k intervals of
    ``ramp_samples / n`` rollouts (``n = (final_batch - start) // increment``), then ``final_batch``.

    The LR at each batch is ``base_lr`` at ``base_batch`` (default ``start``) scaled by ``lr_rule``
    (Megatron itself keeps the LR schedule independent of the ramp: ``lr_rule="constant"``).
    Every batch must be runnable under ``constraints`` (Megatron asserts divisibility too).
    """

    def __init__(
        self,
        start: int,
        increment: int,
        ramp_samples: int,
        final_batch: int,
        *,
        base_lr: float,
        base_batch: int | None = None,
        lr_rule: str = "sqrt",
        constraints: BatchConstraints | None = None,
    ) -> None:
        _pos_int("start", start)
        _pos_int("increment", increment)
        _pos_int("ramp_samples", ramp_samples)
        _pos_int("final_batch", final_batch)
        _pos_num("base_lr", base_lr)
        if base_batch is not None:
            _pos_int("base_batch", base_batch)
        if lr_rule not in RULES:
            raise ConfigError(f"must be one of {', '.join(RULES)}, got {lr_rule!r}", field="lr_rule")
        if final_batch < start:
            raise ConfigError(f"final_batch {final_batch} is below start {start}", field="final_batch")
        if (final_batch - start) % increment:
            raise ConfigError(
                f"final_batch - start ({final_batch - start}) must be a multiple of "
                f"increment {increment} (as Megatron requires)",
                field="increment",
            )
        n = (final_batch - start) // increment
        if n > ramp_samples:
            raise ConfigError(f"{n} increments do not fit in {ramp_samples} rollouts", field="ramp_samples")
        self.start, self.increment, self.ramp_samples, self.final_batch = (
            start,
            increment,
            ramp_samples,
            final_batch,
        )
        self.base_lr, self.lr_rule = float(base_lr), lr_rule
        ref = base_batch or start
        stages = []
        for k in range(n + 1):
            b = start + k * increment
            # stage k ends where Megatron's consumed_samples / per_increment reaches k + 1
            until = None if k == n else math.ceil((k + 1) * ramp_samples / n)
            stages.append(
                Stage(
                    batch=b,
                    lr=lr_for_batch(b, ref, base_lr, lr_rule),
                    reason="initial" if k == 0 else "ramp-up",
                    until_samples=until,
                )
            )
        super().__init__(stages, constraints)

    def __repr__(self) -> str:
        return (
            f"LinearRampSchedule(start={self.start}, increment={self.increment}, "
            f"ramp_samples={self.ramp_samples}, final_batch={self.final_batch}, lr_rule={self.lr_rule!r})"
        )


def pollux_efficiency(batch: float, phi: float, base_batch: float) -> float:
    """Statistical efficiency of ``batch`` relative to ``base_batch`` (Pollux): progress per rollout
    at ``batch`` over that at ``base_batch``, ``(phi + M0) / (phi + M)``, with ``phi`` = B_simple."""
    return (phi + base_batch) / (phi + batch)


def goodput(batch: float, phi: float, base_batch: float, t0: float, t1: float) -> float:
    """Pollux goodput: rollouts per second (``batch / (t0 + t1 x batch)``) x statistical efficiency."""
    return batch / (t0 + t1 * batch) * pollux_efficiency(batch, phi, base_batch)


class NoiseScaleAdaptiveSchedule(Schedule):
    """Pollux/AdaptDL-style adaptive batch: every ``interval`` records, move to the runnable batch
    with the highest :func:`goodput` under the current B_simple estimate.

    ``initial_batch`` is also Pollux's reference batch ``M0`` (efficiency 1) and the LR's base
    batch. Until ``warmup`` records with both gradient norms have been seen the batch stays put.
    ``candidates`` are the runnable batches from ``initial_batch`` up to ``max_batch`` (default
    64 x ``initial_batch``) on a geometric grid of ratio ``grid``; a move needs a goodput gain of
    at least ``min_gain`` (relative) so noise in the estimate does not make the batch flap.
    ``lr_rule``: "adascale" (gain r = efficiency x M / M0; SGD's rule) or "sqrt"/"linear"/"constant".
    """

    kind = _NS_KIND

    def __init__(
        self,
        initial_batch: int,
        *,
        base_lr: float,
        t0: float,
        t1: float,
        lr_rule: str = "adascale",
        max_batch: int | None = None,
        interval: int = 10,
        warmup: int = 50,
        grid: float = 2.0**0.25,
        min_gain: float = 0.02,
        beta: float = 0.99,
        allow_decrease: bool = True,
        constraints: BatchConstraints | None = None,
    ) -> None:
        self.constraints = c = constraints or BatchConstraints()
        _pos_int("initial_batch", initial_batch)
        if not c.is_valid(initial_batch):
            raise ConfigError(
                f"{initial_batch} is not runnable (a multiple of {c.multiple} within "
                f"[{c.lowest}, {c.highest}])",
                field="initial_batch",
            )
        self.base_lr = _pos_num("base_lr", base_lr)
        self.t0 = _pos_num("t0", t0, zero=True)
        self.t1 = _pos_num("t1", t1, zero=True)
        if self.t0 + self.t1 <= 0:
            raise ConfigError("t0 + t1 must be positive (an update takes time)", field="t1")
        if lr_rule not in LR_RULES:
            raise ConfigError(f"must be one of {', '.join(LR_RULES)}, got {lr_rule!r}", field="lr_rule")
        self.lr_rule = lr_rule
        self.interval = _pos_int("interval", interval)
        self.warmup = _pos_int("warmup", warmup, zero=True)
        self.grid = _pos_num("grid", grid)
        if self.grid <= 1:
            raise ConfigError(f"must be > 1, got {grid!r}", field="grid")
        self.min_gain = _pos_num("min_gain", min_gain, zero=True)
        self.allow_decrease = bool(allow_decrease)
        self.base_batch = int(initial_batch)
        hi = max_batch if max_batch is not None else 64 * initial_batch
        _pos_int("max_batch", hi)
        if hi < initial_batch:
            raise ConfigError(f"max_batch {hi} is below initial_batch {initial_batch}", field="max_batch")
        self.candidates = self._grid(initial_batch, hi)
        self.noise = GradientNoiseScale(beta=beta)
        self._records = 0
        super().__init__([Stage(batch=initial_batch, lr=self.base_lr, reason="initial")])

    def _grid(self, lo: int, hi: int) -> tuple[int, ...]:
        c, out, b = self.constraints, set(), float(lo)
        while b <= hi * (1 + 1e-9):
            out.add(c.snap(b, "nearest"))
            b *= self.grid
        return tuple(sorted(x for x in out if lo <= x <= hi and c.is_valid(x)))

    def lr_for(self, batch: int, phi: float) -> float:
        """The LR at ``batch`` given the noise scale ``phi`` (AdaScale gain or a scaling rule)."""
        if self.lr_rule == "adascale":
            gain = pollux_efficiency(batch, phi, self.base_batch) * batch / self.base_batch
            return self.base_lr * gain
        return lr_for_batch(batch, self.base_batch, self.base_lr, self.lr_rule)

    def best_batch(self, phi: float) -> int:
        """The candidate batch with the highest goodput at noise scale ``phi``."""
        return max(self.candidates, key=lambda m: (goodput(m, phi, self.base_batch, self.t0, self.t1), -m))

    def propose(self, record: StepRecord) -> Decision:
        self._records += 1
        phi = self.noise.update(record)
        cur = self._stages[-1]
        index = len(self._stages) - 1
        ready = self.noise.n_updates >= self.warmup and math.isfinite(phi) and phi > 0
        if not ready or self._records % self.interval:
            return self._decision(record)
        best = self.best_batch(phi)
        g_cur = goodput(cur.batch, phi, self.base_batch, self.t0, self.t1)
        g_best = goodput(best, phi, self.base_batch, self.t0, self.t1)
        lr = self.lr_for(cur.batch, phi)
        move = (
            best != cur.batch
            and g_best > (1 + self.min_gain) * g_cur
            and (self.allow_decrease or best > cur.batch)
        )
        if move:
            reason = (
                f"goodput: B_simple {phi:.4g} -> batch {best} "
                f"(efficiency {pollux_efficiency(best, phi, self.base_batch):.3f})"
            )
            return Decision(
                step=record.step,
                samples=record.samples,
                batch=best,
                lr=self.lr_for(best, phi),
                stage=index + 1,
                switched=True,
                reason=reason,
            )
        if self.lr_rule == "adascale" and not math.isclose(lr, cur.lr, rel_tol=1e-3):
            # AdaScale re-tunes the LR as the gain moves, within a stage (recorded as the stage's LR)
            return Decision(
                step=record.step,
                samples=record.samples,
                batch=cur.batch,
                lr=lr,
                stage=index,
                switched=True,
                reason=f"adascale gain at B_simple {phi:.4g}",
            )
        return self._decision(record)

    # --- state ---------------------------------------------------------------------------------
    def _settings(self) -> dict[str, Any]:
        return {
            "base_batch": self.base_batch,
            "base_lr": self.base_lr,
            "t0": self.t0,
            "t1": self.t1,
            "lr_rule": self.lr_rule,
            "interval": self.interval,
            "warmup": self.warmup,
            "candidates": list(self.candidates),
            "min_gain": self.min_gain,
            "allow_decrease": self.allow_decrease,
        }

    def _state(self) -> dict[str, Any]:
        return {
            "settings": self._settings(),
            "records": self._records,
            "stages": [s.to_dict() for s in self._stages],
            "noise": self.noise.state_dict(),
        }

    def _load_state(self, state: Mapping[str, Any]) -> None:
        saved = state.get("settings")
        if saved is not None and saved != self._settings():
            changed = sorted(k for k, v in self._settings().items() if saved.get(k) != v)
            raise ConfigError(
                f"the saved state belongs to a schedule with other settings ({', '.join(changed)})",
                field="settings",
            )
        self._stages = self._stages_from(state)
        self._records = int(state["records"])
        self.noise.load_state_dict(state["noise"])

    def __repr__(self) -> str:
        cur = self.current
        return (
            f"NoiseScaleAdaptiveSchedule(stage={len(self._stages) - 1}, batch={cur.batch}, "
            f"lr={cur.lr:g}, lr_rule={self.lr_rule!r})"
        )
