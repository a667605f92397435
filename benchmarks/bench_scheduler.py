"""Per-record decision time and memory of the batch schedules.

Goal: one ``step(record) -> Decision`` under 20 us median, and flat memory over 10^6 records
(``tracemalloc``). Records are built on the fly (entropy falling slowly with noise, two-batch
gradient norms), so only the schedule's own memory is measured.

    python benchmarks/bench_scheduler.py                # timing on 200k records, memory over 10^6
    python benchmarks/bench_scheduler.py --steps 100000 --memory-steps 100000
"""

from __future__ import annotations

import argparse
import gc
import math
import platform
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

from rlvr_schedule.policy import BatchConstraints, PolicyConfig, StaticSchedule, TwoClockScheduler
from rlvr_schedule.records import Stage, StepRecord


class Feeder:
    """Builds records on the fly for one schedule and feeds them: the samples follow the schedule's
    batch, entropy falls slowly with noise, grad norms follow E|g_B|^2 = 1 + 256/B."""

    def __init__(self, sched, seed: int = 0) -> None:
        self.sched, self.rng = sched, np.random.default_rng(seed)
        self.step = self.samples = 0

    def feed(self, n: int, timed: bool = False) -> list[int]:
        """``n`` more records; per-call nanoseconds of ``step()`` when ``timed``."""
        sched, perf, times = self.sched, time.perf_counter_ns, []
        for start in range(0, n, 4096):
            z = self.rng.standard_normal((min(4096, n - start), 3))
            for z0, z1, z2 in z.tolist():
                cur = sched.current
                b = cur.batch
                self.samples += b
                rec = StepRecord(
                    step=self.step,
                    samples=self.samples,
                    batch=b,
                    lr=cur.lr,
                    entropy=max(0.05, 1.0 - self.samples / 5e9) * (1 + 0.02 * z0),
                    reward_mean=0.5 + 0.01 * z0,
                    grad_norm=math.sqrt(1 + 256 / b) * (1 + 0.05 * z1),
                    grad_norm_micro=math.sqrt(1 + 256 / 8) * (1 + 0.05 * z2),
                    micro_batch=8,
                )
                self.step += 1
                if timed:
                    t0 = perf()
                    sched.step(rec)
                    times.append(perf() - t0)
                else:
                    sched.step(rec)
        return times


def make_two_clock() -> TwoClockScheduler:
    return TwoClockScheduler(
        PolicyConfig(
            initial_batch=64, base_lr=1e-6, constraints=BatchConstraints(group_size=8, max_batch=4096)
        )
    )


def make_two_clock_plugins() -> object:
    from rlvr_schedule.driver import ScheduleDriver
    from rlvr_schedule.plugins import PluginHost, hookimpl

    class Observer:
        n = 0

        @hookimpl
        def rlvr_schedule_on_record(self, record):
            self.n += 1

        @hookimpl
        def rlvr_schedule_on_decision(self, decision, record):
            self.n += 1

    host = PluginHost(load_entrypoints=False)
    host.register(Observer())
    sched = make_two_clock()
    return ScheduleDriver(sched, lambda b, lr: True, host, in_effect=(sched.current.batch, sched.current.lr))


def make_static() -> StaticSchedule:
    return StaticSchedule(
        [Stage(64, 1e-6, until_samples=10**7), Stage(128, 1.4e-6, until_samples=10**8), Stage(256, 2e-6)]
    )


CASES: dict[str, Callable[[], object]] = {
    "TwoClockScheduler (default config)": make_two_clock,
    "TwoClockScheduler in a ScheduleDriver + PluginHost (2 observer hooks)": make_two_clock_plugins,
    "StaticSchedule (3 stages)": make_static,
}


def timing(n: int) -> None:
    print(f"## Decision time per record ({n} records, perf_counter_ns around each step())\n")
    print("| schedule | median us | p90 us | p99 us |")
    print("|---|---|---|---|")
    for name, make in CASES.items():
        gc.collect()
        t = sorted(Feeder(make()).feed(n, timed=True))
        p90, p99 = (t[min(len(t) - 1, int(p * len(t)))] / 1000 for p in (0.9, 0.99))
        print(f"| {name} | {statistics.median(t) / 1000:.2f} | {p90:.2f} | {p99:.2f} |")
    print()


def memory(n: int) -> None:
    marks_at = sorted(m for m in {1_000, 10_000, 100_000, n} if m <= n)
    print(f"## Memory over {n} records (tracemalloc; records are created and dropped each step)\n")
    print(
        "| schedule | " + " | ".join(f"after {m:,} KiB" for m in marks_at) + " | peak KiB | state JSON KiB |"
    )
    print("|---|" + "---|" * (len(marks_at) + 2))
    import json

    for name, make in CASES.items():
        if "PluginHost" in name:
            continue
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        sched: Any = make()
        feeder = Feeder(sched)
        marks, done = {}, 0
        for mark in marks_at:
            feeder.feed(mark - done)
            done = mark
            marks[mark] = (tracemalloc.get_traced_memory()[0] - base) / 1024
        peak = (tracemalloc.get_traced_memory()[1] - base) / 1024
        tracemalloc.stop()
        state_kib = len(json.dumps(sched.state_dict())) / 1024
        cells = [f"{marks[m]:.1f}" for m in marks_at]
        print(f"| {name} | " + " | ".join(cells) + f" | {peak:.1f} | {state_kib:.1f} |")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200_000, help="records for the timing table")
    ap.add_argument("--memory-steps", type=int, default=1_000_000, help="records for the memory table")
    args = ap.parse_args()
    print(
        f"# bench_scheduler ({platform.python_implementation()} {platform.python_version()}, "
        f"{platform.machine()}, numpy {np.__version__})\n"
    )
    timing(args.steps)
    memory(args.memory_steps)


if __name__ == "__main__":
    main()
