"""Held-out synthetic tasks of the schedule check (docs/RESULTS.md section 3a), as data: one row
per task.

Eight sets, each committed before the tuning round it was held out from, parameters and seeds fixed
here: set 1 (h1-h3, 2026-12-04), set 2 (h4-h6, f10d6fa), set 3 (h7-h9, 74ab106), set 4 (h10-h12,
b81fb7a), set 5 (h13-h15, f314555), set 6 (h16-h18, 187d61a), set 7 (h19-h21, b8d223f), sets 2-7
on 2026-12-05, and set 8 (h22-h24, drawn at random by ``draw_heldout.py``) on 2026-12-07. Each set
is run once on the defaults of its round and joins the tuning set after that. h1-h3 differ from :data:`rlvr_schedule.synthetic.tasks.TASKS` in the critical batch (48 and 96
at the start), the failure clock's length (14k-30k rollouts), a small batch dependence of the failure
clock (alpha 0.1) on one task, and the crash hazard; the rule each later set was drawn by is stated
below, before the table.
"""

from __future__ import annotations

from typing import Any

__all__ = ["COLUMNS", "ROWS", "SEEDS", "SETS", "HELDOUT", "task_set"]

# How each later set was drawn, stated before any run on it.
#
# Set 2 (2026-12-05):
# h1-h3 were run once on the first defaults (results/schedules_fraction_heldout.md) and are part of the
# tuning set since. h4-h6 and their seeds were committed before any further tuning and before anything
# was run on them; they are run once, with the final defaults.
#
# Rule: each parameter takes a value that neither the section 3a tasks (B* 64, F 20k, noise 0.2/0.5,
# drift 3/15, alpha 0, hazard 0.3) nor h1-h3 used, from the plausible ranges B* 40-112, F 12k-40k,
# noise 0.15-0.45, drift 4-12, alpha 0-0.15, hazard 0.2-0.5. Pairing: B* and F ascend together on h1-h3,
# so here they do not (the shortest clock goes with the middle B*, the longest with the largest); noise,
# drift and hazard are spread so that each task holds an extreme of at least one of them, and the
# batch-dependent clock (alpha 0.15) goes with the largest B* (h3's alpha 0.1 went with the middle one).
#
# Set 3 (2026-12-05, third round):
# h1-h6 are part of the tuning set since their single runs (results/schedules_fraction_heldout{,2}.md).
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
#
# Set 4 (2026-12-05, fourth round):
# h7-h9 were run once on the unchanged defaults (results/schedules_fraction_heldout3.md: 1 of 3) and are
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
#
# Set 5 (2026-12-05, fifth round):
# h10-h12 were run once on the fourth round's default (results/schedules_fraction_heldout4.md: 1 of 3) and
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
#
# Set 6 (2026-12-05):
# h13-h15 were run once on the unchanged default (results/schedules_fraction_heldout5.md: 1 of 3) and are
# part of the tuning set since, with 3a and h1-h12. h16-h18 and their seeds were committed before the
# round's tuning or analysis and before anything was run on them; they are run once, with the round's
# final defaults.
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
#
# Set 7 (2026-12-05, after h16-h18):
# h16-h18 were run once on the unchanged default (results/schedules_fraction_heldout6.md: 0 of 3) and are
# part of the tuning set since, with 3a and h1-h15. h19-h21 and their seeds were committed before the
# round's design work and before anything was run on them; they are run once, with the round's
# final defaults.
#
# Rule (stated before any run): per parameter, three values that neither the section 3a tasks nor
# h1-h18 used (the lists above plus B* 52/76/116, F 13k/24k/38k, noise 0.14/0.27/0.44, drift
# 4.5/7.5/12.5, alpha 0.04/0.11/0.17, hazard 0.18/0.33/0.52), from the same plausible ranges:
#   B* (60, 84, 100), F (15k, 28k, 42k), noise (0.16, 0.24, 0.36), drift (5.5, 8.5, 11.5),
#   alpha (0.01, 0.09, 0.14), hazard (0.22, 0.38, 0.58)  -- each sorted low, middle, high.
# Task i (0, 1, 2 for h19, h20, h21) takes, by index into those lists: B* i, F (i+1) mod 3, noise i,
# drift 2-i, alpha 2-i, hazard (i+2) mod 3 (a permutation no earlier set used).
#
# Set 8 (2026-12-07, held out from the cost-priced recipe's design and tuning):
# h22-h24 and their seeds (8000-8019) were committed before any design or tuning of the priced
# operating point and before anything was run on them; they are run once, at the end, on its final
# defaults. Rule: each parameter drawn uniformly between the smallest and largest value h1-h21 used
# (a missing alpha counts as 0), by ``draw_heldout.py`` with seed 8, rounded to the table's grain.
#
# Set 9 (2026-12-07, held out from the B* tracker's anchor):
# h22-h24 were run once on the priced defaults and are part of the tuning set since. h25-h27 and
# their seeds (9000-9019) were committed before any design or tuning of the tracker's anchor and
# before anything was run on them, to be run once on its final defaults. Rule: as set 8's, by
# ``python -m benchmarks.evidence.draw_heldout --set 9 --first 25 --seed 9``. No change of the anchor
# was kept (results/tracker_anchor.md); run once on the unchanged defaults, both configurations
# (results/schedules_priced_heldout9.md, schedules_priced_fitted_heldout9.md).

#: The keyword arguments of SyntheticEnvironment a row gives (merged over ``synthetic.tasks.COMMON``).
COLUMNS = ("critical_batch", "failure_samples", "noise_fraction", "drift", "failure_exponent", "crash_hazard")

#: The held-out tasks: (set, name, *COLUMNS); None leaves COMMON's value (alpha 0: a failure clock
#: the batch does not change).
# fmt: off
ROWS: tuple[tuple[Any, ...], ...] = (
    # set  name                          B*         F      noise  drift  alpha  hazard
    (1, "h1_b48_f14k_drift5",              48.0, 14_000.0,   0.3,   5.0,  None,   0.2),
    (1, "h2_b96_f30k_drift8",              96.0, 30_000.0,   0.4,   8.0,  None,   0.4),
    (1, "h3_b64_f20k_drift10_alpha",       64.0, 20_000.0,  0.25,  10.0,   0.1,   0.3),
    (2, "h4_b40_f25k_drift4",              40.0, 25_000.0,  0.35,   4.0,  None,  0.25),
    (2, "h5_b80_f12k_drift12",             80.0, 12_000.0,  0.15,  12.0,  None,   0.5),
    (2, "h6_b112_f40k_drift6_alpha",      112.0, 40_000.0,  0.45,   6.0,  0.15,   0.2),
    (3, "h7_b32_f50k_drift14_alpha",       32.0, 50_000.0,  0.28,  14.0,   0.2,   0.1),
    (3, "h8_b56_f18k_drift2_alpha",        56.0, 18_000.0,  0.48,   2.0,  0.12,  0.35),
    (3, "h9_b128_f10k_drift7_alpha",      128.0, 10_000.0,   0.1,   7.0,  0.05,   0.6),
    (4, "h10_b36_f22k_drift11_alpha",      36.0, 22_000.0,  0.42,  11.0,  0.03,  0.45),
    (4, "h11_b72_f35k_drift2p5_alpha",     72.0, 35_000.0,  0.32,   2.5,  0.08,  0.55),
    (4, "h12_b104_f16k_drift9_alpha",     104.0, 16_000.0,  0.12,   9.0,  0.18,  0.15),
    (5, "h13_b44_f45k_drift13_alpha",      44.0, 45_000.0,  0.22,  13.0,  0.07,  0.48),
    (5, "h14_b88_f11k_drift6p5_alpha",     88.0, 11_000.0,  0.38,   6.5,  0.16,  0.28),
    (5, "h15_b120_f27k_drift3p5_alpha",   120.0, 27_000.0,  0.18,   3.5,  0.02,  0.12),
    (6, "h16_b52_f13k_drift7p5_alpha",     52.0, 13_000.0,  0.44,   7.5,  0.17,  0.33),
    (6, "h17_b76_f24k_drift12p5_alpha",    76.0, 24_000.0,  0.14,  12.5,  0.04,  0.52),
    (6, "h18_b116_f38k_drift4p5_alpha",   116.0, 38_000.0,  0.27,   4.5,  0.11,  0.18),
    (7, "h19_b60_f28k_drift11p5_alpha",    60.0, 28_000.0,  0.16,  11.5,  0.14,  0.58),
    (7, "h20_b84_f42k_drift8p5_alpha",     84.0, 42_000.0,  0.24,   8.5,  0.09,  0.22),
    (7, "h21_b100_f15k_drift5p5_alpha",   100.0, 15_000.0,  0.36,   5.5,  0.01,  0.38),
    (8, "h22_b64_f49k_drift11p5_alpha",    64.0, 49_000.0,  0.22,  11.5,  0.17,   0.3),
    (8, "h23_b76_f25k_drift7p5_alpha",     76.0, 25_000.0,  0.14,   7.5,  0.05,  0.23),
    (8, "h24_b48_f18k_drift7_alpha",       48.0, 18_000.0,  0.41,   7.0,  0.05,   0.4),
    (9, "h25_b116_f21k_drift11p5_alpha",  116.0, 21_000.0,  0.33,  11.5,  0.14,  0.56),
    (9, "h26_b116_f47k_drift7_alpha",     116.0, 47_000.0,  0.11,   7.0,   0.1,  0.13),
    (9, "h27_b32_f43k_drift11p5_alpha",    32.0, 43_000.0,  0.47,  11.5,  0.06,  0.45),
)
# fmt: on

#: The seeds of each set's check (20, paired across schedules; a range no other check used).
SEEDS: dict[int, tuple[int, ...]] = {k: tuple(range(1000 * k, 1000 * k + 20)) for k in range(1, 10)}


def task_set(k: int) -> dict[str, dict[str, Any]]:
    """Set ``k``'s tasks: name -> the keyword arguments of SyntheticEnvironment."""
    return {
        name: {c: v for c, v in zip(COLUMNS, values, strict=True) if v is not None}
        for s, name, *values in ROWS
        if s == k
    }


#: set -> (its tasks, its seeds), in the order the sets were committed
SETS: dict[int, tuple[dict[str, dict[str, Any]], tuple[int, ...]]] = {
    k: (task_set(k), SEEDS[k]) for k in SEEDS
}

#: The first set (h1-h3), run by default beside the section 3a tasks.
HELDOUT = SETS[1][0]
