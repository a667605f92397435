"""The B* tracker's anchor varied: the lag and the priced bar with a shorter line span.

The tracker (:class:`~rlvr_schedule.policy.tracker.CriticalBatchTracker`) scales the known B* by
B_simple's ratio to its value at rollout 0. That value is the EMA when first warm (1,600-11,800
rollouts in, after a drifting B* has risen), moved back to rollout 0 along the line to the EMA now
once the line spans ``anchor_span`` times the first point's position. This runs
``tracker_lag.py`` (``--lag``) or ``schedules_v3.py``'s priced bar with ``anchor_span`` and
``anchor_floor`` set for the whole run; every other argument goes to that script unchanged.

    python -m benchmarks.evidence.tracker_anchor --span 1 --floor 0.5 -- \
        --lean --seeds 20 --prices 4,16,64 --tasks c2_drift3,c2_drift15,c5_drift3,c5_drift15 --md F.md
    python -m benchmarks.evidence.tracker_anchor --span 1 --floor 0.5 --lag -- --no-cost --seeds 20 ...
"""

from __future__ import annotations

import argparse

from rlvr_schedule.policy.tracker import CriticalBatchTracker


def main(argv: list[str] | None = None) -> int | None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--span", type=float, default=CriticalBatchTracker.anchor_span)
    ap.add_argument("--floor", type=float, default=CriticalBatchTracker.anchor_floor)
    ap.add_argument("--lag", action="store_true", help="run tracker_lag.py (default: schedules_v3.py)")
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="the arguments of the script run (after --)")
    args = ap.parse_args(argv)
    CriticalBatchTracker.anchor_span = args.span
    CriticalBatchTracker.anchor_floor = args.floor
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    if args.lag:
        from benchmarks.evidence import tracker_lag

        return tracker_lag.main(rest)
    from benchmarks.evidence import schedules_v3

    return schedules_v3.main(rest)


if __name__ == "__main__":
    raise SystemExit(main())
