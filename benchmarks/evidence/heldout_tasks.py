"""Held-out synthetic tasks for issue 20's schedule check (docs/RESULTS.md section 3a).

Seven sets, each committed before the tuning round it was held out from, parameters and seeds fixed
here: ``HELDOUT`` (h1-h3, 2026-12-04), ``HELDOUT2`` (h4-h6, f10d6fa), ``HELDOUT3`` (h7-h9, 74ab106),
``HELDOUT4`` (h10-h12, b81fb7a), ``HELDOUT5`` (h13-h15, f314555), ``HELDOUT6`` (h16-h18, 187d61a)
and ``HELDOUT7`` (h19-h21, b8d223f), the last six on 2026-12-05.
Each set is run once on the defaults of its round and joins the tuning set after that. h1-h3 differ from
:data:`rlvr_schedule.synthetic.tasks.TASKS` in the critical batch (48 and 96 at the start), the
failure clock's length (14k-30k rollouts), a small batch dependence of the failure clock (alpha 0.1)
on one task, and the crash hazard; the later sets' rules are given beside them.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "HELDOUT",
    "HELDOUT2",
    "HELDOUT2_SEEDS",
    "HELDOUT3",
    "HELDOUT3_SEEDS",
    "HELDOUT4",
    "HELDOUT4_SEEDS",
    "HELDOUT5",
    "HELDOUT5_SEEDS",
    "HELDOUT6",
    "HELDOUT6_SEEDS",
    "HELDOUT7",
    "HELDOUT7_SEEDS",
    "HELDOUT_SEEDS",
]

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


# -- The third held-out set (issue 20, 2026-12-05, third round) -----------------------------------
# h1-h6 are part of the tuning set since their single runs (results/schedules_i20_heldout{,2}.md).
# h7-h9 and their seeds were committed before the third round's tuning and before anything was run on
# them; they are run once, with the final defaults.
#
# Rule (stated before any run): per parameter, three values that neither the section 3a tasks nor
# h1-h6 used (B* 40/48/64/80/96/112; F 12k/14k/20k/25k/30k/40k; noise 0.15/0.2/0.25/0.3/0.35/0.4/0.45/0.5;
# drift 3/4/5/6/8/10/12/15; alpha 0/0.1/0.15; hazard 0.2/0.25/0.3/0.4/0.5), taken from the wider
# plausible ranges B* 32-128, F 10k-50k, noise 0.1-0.5, drift 2-15, alpha 0-0.2, hazard 0.1-0.6:
#   B* (32, 56, 128), F (10k, 18k, 50k), noise (0.1, 0.28, 0.48), drift (2, 7, 14),
#   alpha (0.05, 0.12, 0.2), hazard (0.1, 0.35, 0.6)  -- each sorted low, middle, high.
# Task i (0, 1, 2 for h7, h8, h9) takes, by index into those lists: B* i, F 2-i (B* and F in opposite
# order: the largest B* with the shortest clock), noise (i+1) mod 3, drift (i+2) mod 3, alpha 2-i,
# hazard i. Every task has a batch-dependent clock, since alpha 0 was already used.
HELDOUT3: dict[str, dict[str, Any]] = {
    "h7_b32_f50k_drift14_alpha": dict(
        critical_batch=32.0,
        failure_samples=50_000.0,
        noise_fraction=0.28,
        drift=14.0,
        failure_exponent=0.2,
        crash_hazard=0.1,
    ),
    "h8_b56_f18k_drift2_alpha": dict(
        critical_batch=56.0,
        failure_samples=18_000.0,
        noise_fraction=0.48,
        drift=2.0,
        failure_exponent=0.12,
        crash_hazard=0.35,
    ),
    "h9_b128_f10k_drift7_alpha": dict(
        critical_batch=128.0,
        failure_samples=10_000.0,
        noise_fraction=0.1,
        drift=7.0,
        failure_exponent=0.05,
        crash_hazard=0.6,
    ),
}

#: The seeds of the third held-out check (20, paired across schedules; a range no other check used).
HELDOUT3_SEEDS = tuple(range(3000, 3020))


# -- The fourth held-out set (issue 20, 2026-12-05, fourth round) ---------------------------------
# h7-h9 were run once on the unchanged defaults (results/schedules_i20_heldout3.md: 1 of 3) and are
# part of the tuning set since, with 3a and h1-h6. h10-h12 and their seeds were committed before the
# fourth round's tuning and before anything was run on them; they are run once, with the final
# defaults.
#
# Rule (stated before any run): per parameter, three values that neither the section 3a tasks nor
# h1-h9 used (B* 32/40/48/56/64/80/96/112/128; F 10k/12k/14k/18k/20k/25k/30k/40k/50k; noise
# 0.1/0.15/0.2/0.25/0.28/0.3/0.35/0.4/0.45/0.48/0.5; drift 0/2/3/4/5/6/7/8/10/12/14/15; alpha
# 0/0.05/0.1/0.12/0.15/0.2; hazard 0.1/0.2/0.25/0.3/0.35/0.4/0.5/0.6), from the same plausible ranges:
#   B* (36, 72, 104), F (16k, 22k, 35k), noise (0.12, 0.32, 0.42), drift (2.5, 9, 11),
#   alpha (0.03, 0.08, 0.18), hazard (0.15, 0.45, 0.55)  -- each sorted low, middle, high.
# Task i (0, 1, 2 for h10, h11, h12) takes, by index into those lists: B* i, F (i+1) mod 3, noise 2-i,
# drift (i+2) mod 3, alpha i, hazard (i+1) mod 3 (a permutation no earlier set used).
HELDOUT4: dict[str, dict[str, Any]] = {
    "h10_b36_f22k_drift11_alpha": dict(
        critical_batch=36.0,
        failure_samples=22_000.0,
        noise_fraction=0.42,
        drift=11.0,
        failure_exponent=0.03,
        crash_hazard=0.45,
    ),
    "h11_b72_f35k_drift2p5_alpha": dict(
        critical_batch=72.0,
        failure_samples=35_000.0,
        noise_fraction=0.32,
        drift=2.5,
        failure_exponent=0.08,
        crash_hazard=0.55,
    ),
    "h12_b104_f16k_drift9_alpha": dict(
        critical_batch=104.0,
        failure_samples=16_000.0,
        noise_fraction=0.12,
        drift=9.0,
        failure_exponent=0.18,
        crash_hazard=0.15,
    ),
}

#: The seeds of the fourth held-out check (20, paired across schedules; a range no other check used).
HELDOUT4_SEEDS = tuple(range(4000, 4020))


# -- The fifth held-out set (issue 20, 2026-12-05, fifth round) -----------------------------------
# h10-h12 were run once on the fourth round's default (results/schedules_i20_heldout4.md: 1 of 3) and
# are part of the tuning set since, with 3a and h1-h9. h13-h15 and their seeds were committed before
# the fifth round's tuning and before anything was run on them; they are run once, with the final
# defaults.
#
# Rule (stated before any run): per parameter, three values that neither the section 3a tasks nor
# h1-h12 used (B* 32/36/40/48/56/64/72/80/96/104/112/128; F 10k/12k/14k/16k/18k/20k/22k/25k/30k/35k/
# 40k/50k; noise 0.1/0.12/0.15/0.2/0.25/0.28/0.3/0.32/0.35/0.4/0.42/0.45/0.48/0.5; drift
# 0/2/2.5/3/4/5/6/7/8/9/10/11/12/14/15; alpha 0/0.03/0.05/0.08/0.1/0.12/0.15/0.18/0.2; hazard
# 0.1/0.15/0.2/0.25/0.3/0.35/0.4/0.45/0.5/0.55/0.6), from the same plausible ranges:
#   B* (44, 88, 120), F (11k, 27k, 45k), noise (0.18, 0.22, 0.38), drift (3.5, 6.5, 13),
#   alpha (0.02, 0.07, 0.16), hazard (0.12, 0.28, 0.48)  -- each sorted low, middle, high.
# Task i (0, 1, 2 for h13, h14, h15) takes, by index into those lists: B* i, F (i+2) mod 3,
# noise (i+1) mod 3, drift 2-i, alpha (i+1) mod 3, hazard 2-i (a permutation no earlier set used).
HELDOUT5: dict[str, dict[str, Any]] = {
    "h13_b44_f45k_drift13_alpha": dict(
        critical_batch=44.0,
        failure_samples=45_000.0,
        noise_fraction=0.22,
        drift=13.0,
        failure_exponent=0.07,
        crash_hazard=0.48,
    ),
    "h14_b88_f11k_drift6p5_alpha": dict(
        critical_batch=88.0,
        failure_samples=11_000.0,
        noise_fraction=0.38,
        drift=6.5,
        failure_exponent=0.16,
        crash_hazard=0.28,
    ),
    "h15_b120_f27k_drift3p5_alpha": dict(
        critical_batch=120.0,
        failure_samples=27_000.0,
        noise_fraction=0.18,
        drift=3.5,
        failure_exponent=0.02,
        crash_hazard=0.12,
    ),
}

#: The seeds of the fifth held-out check (20, paired across schedules; a range no other check used).
HELDOUT5_SEEDS = tuple(range(5000, 5020))


# -- The sixth held-out set (issue 20, 2026-12-05, tenth session) ---------------------------------
# h13-h15 were run once on the unchanged default (results/schedules_i20_heldout5.md: 1 of 3) and are
# part of the tuning set since, with 3a and h1-h12. h16-h18 and their seeds were committed at the start
# of the tenth session, before any tuning or analysis in it and before anything was run on them; they
# are run once, with the session's final defaults.
#
# Rule (stated before any run): per parameter, three values that neither the section 3a tasks nor
# h1-h15 used (B* 32/36/40/44/48/56/64/72/80/88/96/104/112/120/128; F 10k/11k/12k/14k/16k/18k/20k/
# 22k/25k/27k/30k/35k/40k/45k/50k; noise 0.1/0.12/0.15/0.18/0.2/0.22/0.25/0.28/0.3/0.32/0.35/0.38/0.4/
# 0.42/0.45/0.48/0.5; drift 0/2/2.5/3/3.5/4/5/6/6.5/7/8/9/10/11/12/13/14/15; alpha 0/0.02/0.03/0.05/
# 0.07/0.08/0.1/0.12/0.15/0.16/0.18/0.2; hazard 0.1/0.12/0.15/0.2/0.25/0.28/0.3/0.35/0.4/0.45/0.48/
# 0.5/0.55/0.6), from the same plausible ranges:
#   B* (52, 76, 116), F (13k, 24k, 38k), noise (0.14, 0.27, 0.44), drift (4.5, 7.5, 12.5),
#   alpha (0.04, 0.11, 0.17), hazard (0.18, 0.33, 0.52)  -- each sorted low, middle, high.
# Task i (0, 1, 2 for h16, h17, h18) takes, by index into those lists: B* i, F i, noise (i+2) mod 3,
# drift (i+1) mod 3, alpha (i+2) mod 3, hazard (i+1) mod 3 (a permutation no earlier set used).
HELDOUT6: dict[str, dict[str, Any]] = {
    "h16_b52_f13k_drift7p5_alpha": dict(
        critical_batch=52.0,
        failure_samples=13_000.0,
        noise_fraction=0.44,
        drift=7.5,
        failure_exponent=0.17,
        crash_hazard=0.33,
    ),
    "h17_b76_f24k_drift12p5_alpha": dict(
        critical_batch=76.0,
        failure_samples=24_000.0,
        noise_fraction=0.14,
        drift=12.5,
        failure_exponent=0.04,
        crash_hazard=0.52,
    ),
    "h18_b116_f38k_drift4p5_alpha": dict(
        critical_batch=116.0,
        failure_samples=38_000.0,
        noise_fraction=0.27,
        drift=4.5,
        failure_exponent=0.11,
        crash_hazard=0.18,
    ),
}

#: The seeds of the sixth held-out check (20, paired across schedules; a range no other check used).
HELDOUT6_SEEDS = tuple(range(6000, 6020))


# -- The seventh held-out set (issue 20, 2026-12-05, tenth session, after h16-h18) ------------------
# h16-h18 were run once on the unchanged default (results/schedules_i20_heldout6.md: 0 of 3) and are
# part of the tuning set since, with 3a and h1-h15. h19-h21 and their seeds were committed before the
# session's design work and before anything was run on them; they are run once, with the session's
# final defaults.
#
# Rule (stated before any run): per parameter, three values that neither the section 3a tasks nor
# h1-h18 used (the lists above plus B* 52/76/116, F 13k/24k/38k, noise 0.14/0.27/0.44, drift
# 4.5/7.5/12.5, alpha 0.04/0.11/0.17, hazard 0.18/0.33/0.52), from the same plausible ranges:
#   B* (60, 84, 100), F (15k, 28k, 42k), noise (0.16, 0.24, 0.36), drift (5.5, 8.5, 11.5),
#   alpha (0.01, 0.09, 0.14), hazard (0.22, 0.38, 0.58)  -- each sorted low, middle, high.
# Task i (0, 1, 2 for h19, h20, h21) takes, by index into those lists: B* i, F (i+1) mod 3, noise i,
# drift 2-i, alpha 2-i, hazard (i+2) mod 3 (a permutation no earlier set used).
HELDOUT7: dict[str, dict[str, Any]] = {
    "h19_b60_f28k_drift11p5_alpha": dict(
        critical_batch=60.0,
        failure_samples=28_000.0,
        noise_fraction=0.16,
        drift=11.5,
        failure_exponent=0.14,
        crash_hazard=0.58,
    ),
    "h20_b84_f42k_drift8p5_alpha": dict(
        critical_batch=84.0,
        failure_samples=42_000.0,
        noise_fraction=0.24,
        drift=8.5,
        failure_exponent=0.09,
        crash_hazard=0.22,
    ),
    "h21_b100_f15k_drift5p5_alpha": dict(
        critical_batch=100.0,
        failure_samples=15_000.0,
        noise_fraction=0.36,
        drift=5.5,
        failure_exponent=0.01,
        crash_hazard=0.38,
    ),
}

#: The seeds of the seventh held-out check (20, paired across schedules; a range no other check used).
HELDOUT7_SEEDS = tuple(range(7000, 7020))
