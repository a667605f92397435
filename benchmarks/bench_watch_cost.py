"""Per-record cost of the collapse watch's detector set and of one schedule decision, A/B in one run.

A is the set before the reward's CUSUM joined it: the watch ran the other detectors plus the live
failure forecast, ``fit`` the other detectors. B is today's :func:`default_detectors` (``reward_fall``
in, the forecast out, the same set everywhere). Both run in this process, interleaved run by run over
the records of the watch's synthetic runs (every update logged: reward, entropy, KL, grad norm), so
a shared machine's load falls on both alike; the two-clock policy's ``step(record)``
(``benchmarks/bench_scheduler.py``'s records) is timed the same way, once per round.

    python benchmarks/bench_watch_cost.py --rounds 5

``--one`` times only the checkout on ``PYTHONPATH`` (its ``watch_detectors()``, its
``default_detectors()`` and one decision), for an A/B across two checkouts run in turn under the
same load (``PYTHONPATH=OLD/src:. python benchmarks/bench_watch_cost.py --one``, then the new one).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

from benchmarks.bench_scheduler import Feeder, make_two_clock
from benchmarks.fixtures.watch_synthetic import make
from rlvr_schedule.clocks.failure import Detector, default_detectors
from rlvr_schedule.records import StepRecord


def set_a_watch() -> list[Detector]:
    from rlvr_schedule.clocks.failure import ForecastWarning  # this checkout's (not in older ones)

    return [d for d in default_detectors() if d.name != "reward_fall"] + [ForecastWarning()]


def set_a_fit() -> list[Detector]:
    return [d for d in default_detectors() if d.name != "reward_fall"]


def per_record(make_set: Callable[[], list[Detector]], recs: list[StepRecord]) -> float:
    dets = make_set()
    t0 = time.perf_counter_ns()
    for r in recs:
        for d in dets:
            d.update(r)
    return (time.perf_counter_ns() - t0) / len(recs)


def one(runs: list[list[StepRecord]], rounds: int, steps: int) -> int:
    """Per-record cost of the watch's and ``fit``'s sets, and one decision, of this checkout alone."""
    import rlvr_schedule
    from rlvr_schedule.clocks.failure.alarms import watch_detectors

    t: dict[str, list[float]] = {"watch": [], "fit": [], "decision": []}
    for _ in range(rounds):
        for recs in runs:
            t["watch"].append(per_record(watch_detectors, recs))
            t["fit"].append(per_record(default_detectors, recs))
        t["decision"].append(float(statistics.median(Feeder(make_two_clock()).feed(steps, timed=True))))
    med = {k: statistics.median(v) / 1000 for k, v in t.items()}
    print(
        f"{rlvr_schedule.__file__}: watch {med['watch']:.2f} us, fit {med['fit']:.2f} us a record; "
        f"one decision {med['decision']:.2f} us median"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--one", action="store_true", help="this checkout's sets and one decision only")
    a = p.parse_args(argv)
    runs = [make(seed)[0].records for seed in range(a.runs)]
    if a.one:
        return one(runs, a.rounds, a.steps)
    t: dict[str, list[float]] = {k: [] for k in ("watch A", "watch B", "fit A", "fit B", "decision")}
    for _ in range(a.rounds):
        for recs in runs:
            t["watch A"].append(per_record(set_a_watch, recs))
            t["watch B"].append(per_record(default_detectors, recs))
            t["fit A"].append(per_record(set_a_fit, recs))
            t["fit B"].append(per_record(default_detectors, recs))
        t["decision"].append(float(statistics.median(Feeder(make_two_clock()).feed(a.steps, timed=True))))
    med = {k: statistics.median(v) / 1000 for k, v in t.items()}
    print(
        f"watch: A {med['watch A']:.1f} us, B {med['watch B']:.1f} us a record, B/A {med['watch B'] / med['watch A']:.2f}"
    )
    print(
        f"fit:   A {med['fit A']:.1f} us, B {med['fit B']:.1f} us a record, B/A {med['fit B'] / med['fit A']:.2f}"
    )
    print(f"one decision (two-clock policy, unchanged code): {med['decision']:.1f} us median")
    return 0


if __name__ == "__main__":
    sys.exit(main())
