"""PartClock: seconds per named part of an update (host clock on the CPU), nested and repeated
parts summed by name, and each part a torch.profiler range of the same name."""

from __future__ import annotations

import time

import torch

from rlvr_trainer.timing import PartClock


def test_parts_sum_by_name_and_nest_inside_the_span():
    clock = PartClock("cpu")
    span = clock.start("span")
    for _ in range(3):
        with clock.part("forward"):
            time.sleep(0.01)
    with clock.part("optimizer"):
        time.sleep(0.02)
    clock.stop(span)
    s = clock.seconds()
    assert s == clock.host_seconds()  # the CPU: host time is the parts' time
    assert clock.count("forward") == 3 and clock.count("span") == 1
    assert s["forward"] >= 0.03 and s["optimizer"] >= 0.02
    assert s["forward"] + s["optimizer"] <= s["span"]


def test_parts_are_profiler_ranges():
    clock = PartClock("cpu")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with clock.part("backward"):
            torch.ones(8, 8) @ torch.ones(8, 8)
    assert "backward" in {e.key for e in prof.key_averages()}
