"""The power and size check of the embedded experiment's criterion (benchmarks/evidence/power_check.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.evidence.power_check import PILOT, Design, criterion, pilot_spread, power, simulate


@pytest.fixture(scope="module")
def pilot():
    return pilot_spread(json.loads(PILOT.read_text()))


def test_pilot_spread_is_read_from_the_recorded_runs(pilot):
    # the default task's 45 runs: 3 LRs x 5 batches x 3 seeds, 8 failed runs at the highest LR
    assert pilot.lrs == (1e-4, 2e-4, 4e-4)
    assert all(r.size == 15 for r in pilot.rate_residuals)
    sd = [float(np.std(r)) for r in pilot.rate_residuals]
    assert sd[0] < sd[1] < sd[2] and 0.25 < sd[2] < 0.45  # the spread grows with the LR
    assert pilot.failure_residuals.size == 8 and abs(float(pilot.failure_residuals.mean())) < 1e-9


def test_pilot_without_repeated_runs_is_refused():
    fits = {"1e-4": {"runs": [{"batch": 8, "rate": 1.0}, {"batch": 16, "rate": 0.9}]}}
    with pytest.raises(ValueError, match="two or more runs"):
        pilot_spread(fits)


DESIGN = Design((48, 96, 200, 400, 800), 100.0, 6000.0, 14336.0, seeds=5, spread=0.5, shift=100.0)


def test_criterion_passes_under_the_theory_and_not_under_the_nulls(pilot):
    d = DESIGN
    theory = power(d, pilot, "theory", reps=8, n_boot=100)
    assert theory["all"] >= 0.75
    for null, item in (
        ("flat", "2. B* inside"),
        ("lr-free", "4. B* ~ 1/lr"),
        ("step-clock", "5. failure clock"),
    ):
        p = power(d, pilot, null, reps=8, n_boot=100)
        assert p[item] <= 0.25 and p["all"] <= 0.25, null


def test_plain_slope_misses_the_theory_line_when_b_noise_is_not_small(pilot):
    """B* = B~_noise (lambda_0 / lambda - 1/2): log B* falls faster than 1/lr, so the slope of plain
    B* (the last plan's item 4) excludes -1 where the slope of B* + B~_noise / 2 holds it."""
    rates, fails = simulate(DESIGN, pilot, "theory", np.random.default_rng(3))
    items = criterion(DESIGN, rates, fails, n_boot=100)
    assert items["4. B* ~ 1/lr"] and not items["4 on plain B*"]


def test_unknown_truth_is_refused(pilot):
    with pytest.raises(ValueError, match="truth"):
        simulate(DESIGN, pilot, "maybe", np.random.default_rng(0))
