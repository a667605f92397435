"""Three held-out synthetic tasks for issue 20's schedule check (docs/RESULTS.md section 3a).

Committed before the issue-20 policy was tuned, and never tuned on: parameters and seeds are fixed
here. They differ from :data:`rlvr_schedule.synthetic.tasks.TASKS` in the critical batch (48 and
96 at the start), the failure clock's length (14k-30k rollouts), a small batch dependence of the
failure clock (alpha 0.1) on one task, and the crash hazard.
"""

from __future__ import annotations

from typing import Any

__all__ = ["HELDOUT", "HELDOUT_SEEDS"]

#: name -> the keyword arguments of SyntheticEnvironment (merged over ``synthetic.tasks.COMMON``).
HELDOUT: dict[str, dict[str, Any]] = {
    "h1_b48_f14k_drift5": dict(
        critical_batch=48.0, failure_samples=14_000.0, noise_fraction=0.3, drift=5.0, crash_hazard=0.2
    ),
    "h2_b96_f30k_drift8": dict(
        critical_batch=96.0, failure_samples=30_000.0, noise_fraction=0.4, drift=8.0, crash_hazard=0.4
    ),
    "h3_b64_f20k_drift10_alpha": dict(
        critical_batch=64.0,
        failure_samples=20_000.0,
        noise_fraction=0.25,
        drift=10.0,
        failure_exponent=0.1,
        crash_hazard=0.3,
    ),
}

#: The seeds of the held-out check (20, paired across schedules).
HELDOUT_SEEDS = tuple(range(1000, 1020))
