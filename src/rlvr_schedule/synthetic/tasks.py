"""The task table of the schedule evaluation (docs/RESULTS.md section 3, policy v3).

Fixed before the policy was tuned on them: an entropy-driven failure clock that is
nearly a sample clock (k3 B << k1 + k2 over the 16x batch range), progress damped as entropy runs
out (R = b - a exp(H)), a separate reward-crash hazard, noise fraction c/a of 0.2 and 0.5 and the
critical batch rising 1x, 4x or 16x over the climb (drift 0, 3, 15). Units: rollouts.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BATCHES", "COMMON", "TASKS"]

#: Everything the tasks share (keyword arguments of SyntheticEnvironment).
COMMON: dict[str, Any] = dict(
    critical_batch=64.0,
    failure_samples=20_000.0,
    lr0=1e-6,
    base_batch=64,
    failure_rates=(1.0, 0.3, 0.0005),
    entropy_damping=True,
    crash_hazard=0.3,
    reward0=0.1,
    reward_ceiling=0.8,
    failure_exponent=0.0,
)

#: name -> the task's own parameters.
TASKS: dict[str, dict[str, Any]] = {
    f"c{int(q * 10)}_drift{int(d)}": dict(noise_fraction=q, drift=d)
    for q in (0.2, 0.5)
    for d in (0.0, 3.0, 15.0)
}

#: The 16x range of constant batches the evaluation compares against.
BATCHES = (16, 32, 64, 128, 256)
