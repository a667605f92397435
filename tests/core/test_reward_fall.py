"""The reward's fall confirmed by evidence (a CUSUM on the run's own noise), not a fixed streak: a fall
far outside the noise counts within a record or two, a fall inside the noise never, and the public
TRL cliffs of the calibration half are raised within 3 logged rows of the labelled collapse point
(the watch raised them 6-7 rows late with a fixed streak)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.fixtures.real_runs import SPLIT, load_real
from rlvr_schedule.clocks.failure import RewardFall
from rlvr_schedule.clocks.failure.alarms import CollapseWatch
from rlvr_schedule.records import StepRecord


def _run(rewards: list[float], batch: int = 64) -> list[StepRecord]:
    return [
        StepRecord(step=i + 1, samples=(i + 1) * batch, batch=batch, lr=1e-6, reward_mean=float(r))
        for i, r in enumerate(rewards)
    ]


def _first(det: RewardFall, recs: list[StepRecord]) -> int | None:
    for i, r in enumerate(recs):
        if det.update(r) is not None:
            return i
    return None


def test_a_cliff_far_outside_the_noise_counts_at_once_and_a_dip_inside_it_never() -> None:
    rng = np.random.default_rng(0)
    level = list(0.8 + rng.normal(0, 0.03, 40))
    cliff = _run(level + [0.0] * 5)
    assert _first(RewardFall(), cliff) == 40  # its first record: evidence far past what it needs
    a = RewardFall()
    for r in cliff[:41]:
        a.update(r)
    assert a.first_alarm is not None and a.first_alarm.step == 41 == a.first_alarm.confirmed_step
    noisy = list(0.5 + rng.normal(0, 0.2, 40))
    assert _first(RewardFall(), _run(noisy + [0.15, 0.2, 0.6, 0.5])) is None  # inside its own noise


def test_a_shallower_fall_needs_more_records() -> None:
    rng = np.random.default_rng(1)
    level = list(0.8 + rng.normal(0, 0.03, 40))
    deep = _first(RewardFall(), _run(level + [0.02] * 8))
    mid = _first(RewardFall(), _run(level + [0.16] * 8))
    assert deep is not None and mid is not None and deep < mid


def test_state_round_trip_mid_fall() -> None:
    rng = np.random.default_rng(2)
    recs = _run(list(0.7 + rng.normal(0, 0.05, 30)) + [0.2, 0.15, 0.1, 0.05, 0.0])
    a, b = RewardFall(), RewardFall()
    for r in recs[:32]:
        a.update(r)
        b.update(r)
    c = RewardFall()
    c.load_state_dict(json.loads(json.dumps(b.state_dict())))
    out_a = [a.update(r) for r in recs[32:]]
    out_c = [c.update(r) for r in recs[32:]]
    assert [x.to_dict() if x else None for x in out_a] == [x.to_dict() if x else None for x in out_c]


@pytest.mark.parametrize(
    "name", [n for n in SPLIT["calibration"] if SPLIT["labels"][n]["label"] == "collapsed"]
)
def test_calibration_cliffs_are_raised_within_three_rows(name: str) -> None:
    recs = load_real(name).records
    collapse = next(i for i, r in enumerate(recs) if r.step >= SPLIT["labels"][name]["collapse_step"])
    w = CollapseWatch()
    raised = None
    for i, r in enumerate(recs):
        if any(a.kind == "failure" for a in w.update(r)):
            raised = i
            break
    assert raised is not None and 0 <= raised - collapse <= 3


def test_an_entropy_surge_inside_the_warm_up_is_judged_against_a_prior() -> None:
    """The warm-up's own median absorbed an entropy that tripled within it; the prior (3x the first
    records, above the 2.5x healthy calibration warm-ups rose at most) flags it."""
    from rlvr_schedule.clocks.failure import EntropySurge

    recs = [
        StepRecord(step=i + 1, samples=(i + 1) * 8, batch=8, lr=1e-6, entropy=0.2 if i < 4 else 1.0)
        for i in range(30)
    ]
    det = EntropySurge()
    for r in recs:
        det.update(r)
    assert det.warnings and "inside the warm-up" in det.warnings[0].message
    assert det.warnings[0].step <= 7
    old = EntropySurge(warmup_ratio=None)
    for r in recs:
        old.update(r)
    assert not old.warnings  # without the prior: absorbed


def test_the_slow_cusum_raises_a_slide_sooner_and_is_off_by_default() -> None:
    """A slide declines before it passes half its level; the slow CUSUM (an option, off by default:
    it raised a healthy real run's slow decline and dip) counts its first record below half."""
    rng = np.random.default_rng(3)
    level = list(0.8 + rng.normal(0, 0.03, 40))
    slide = _run(level + [0.8 - 0.07 * i for i in range(1, 12)] + [0.02] * 6)
    default, slow = _first(RewardFall(), slide), _first(RewardFall(drift=(1.0, 6.0)), slide)
    assert RewardFall().drift is None
    assert default is not None and slow is not None and slow < default
    assert slide[slow].reward_mean < 0.4  # still a record below half the level


def test_the_information_bound_follows_the_noise_and_the_dips() -> None:
    """The bound on any detector's delay: a cliff at 128 rollouts an update is known at its first
    record; at 8, a healthy dip to 20% of the level for 3 updates looks the same for those 3."""
    from benchmarks.evidence.collapse_watch import WSYN_DIPS, bound_row

    rates = [0.8] * 20 + [0.02] * 10
    log_arl, log_dips = np.log(6000.0), np.log(30.0)
    assert bound_row(rates, [128] * 30, 20, 0.8, log_arl, log_dips, WSYN_DIPS) == 20
    assert bound_row(rates, [8] * 30, 20, 0.8, log_arl, log_dips, None) == 20
    assert bound_row(rates, [8] * 30, 20, 0.8, log_arl, log_dips, WSYN_DIPS) == 23
