"""Three held-out synthetic tasks for issue 20's schedule check (docs/RESULTS.md section 3a).

Committed before the issue-20 policy was tuned, and never tuned on: parameters and seeds are fixed
here. They differ from :data:`rlvr_schedule.synthetic.tasks.TASKS` in the critical batch (48 and
96 at the start), the failure clock's length (14k-30k rollouts), a small batch dependence of the
failure clock (alpha 0.1) on one task, and the crash hazard.
"""

from __future__ import annotations

from typing import Any

__all__ = ["HELDOUT", "HELDOUT2", "HELDOUT2_SEEDS", "HELDOUT_SEEDS"]

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


# -- The second held-out set (issue 20, 2026-12-05) -----------------------------------------------
# h1-h3 were run once on the issue-20 defaults (results/schedules_i20_heldout.md) and are part of the
# tuning set since. h4-h6 and their seeds were committed before any further tuning and before anything
# was run on them; they are run once, with the final defaults.
#
# Rule: each parameter takes a value that neither the section 3a tasks (B* 64, F 20k, noise 0.2/0.5,
# drift 3/15, alpha 0, hazard 0.3) nor h1-h3 used, from the plausible ranges B* 40-112, F 12k-40k,
# noise 0.15-0.45, drift 4-12, alpha 0-0.15, hazard 0.2-0.5. Pairing: B* and F ascend together on h1-h3,
# so here they do not (the shortest clock goes with the middle B*, the longest with the largest); noise,
# drift and hazard are spread so that each task holds an extreme of at least one of them, and the
# batch-dependent clock (alpha 0.15) goes with the largest B* (h3's alpha 0.1 went with the middle one).
HELDOUT2: dict[str, dict[str, Any]] = {
    "h4_b40_f25k_drift4": dict(
        critical_batch=40.0, failure_samples=25_000.0, noise_fraction=0.35, drift=4.0, crash_hazard=0.25
    ),
    "h5_b80_f12k_drift12": dict(
        critical_batch=80.0, failure_samples=12_000.0, noise_fraction=0.15, drift=12.0, crash_hazard=0.5
    ),
    "h6_b112_f40k_drift6_alpha": dict(
        critical_batch=112.0,
        failure_samples=40_000.0,
        noise_fraction=0.45,
        drift=6.0,
        failure_exponent=0.15,
        crash_hazard=0.2,
    ),
}

#: The seeds of the second held-out check (20, paired across schedules; a range no other check used).
HELDOUT2_SEEDS = tuple(range(2000, 2020))
