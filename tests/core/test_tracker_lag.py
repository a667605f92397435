"""The tracker-lag measurement (benchmarks/evidence/tracker_lag.py): the live B* estimate against the
simulator's true B*, and the oracle tracker that reads the truth."""

from __future__ import annotations

import numpy as np

from benchmarks.evidence import schedules_v3 as S
from benchmarks.evidence import tracker_lag as L
from rlvr_schedule.synthetic import SyntheticEnvironment


def _lag(name: str, seed: int = 0) -> dict:
    clock = {}  # no failure clock: the run is about the tracker alone
    S.PRICES = (16.0,)
    try:
        sched = S.makers(name, clock)[S.priced(16.0)]()
    finally:
        S.PRICES = ()
    env = SyntheticEnvironment(seed=seed, **S.task_kw(name))
    return L.lag_run(env, sched, 20_000)


def test_the_estimate_matches_a_flat_critical_batch_and_trails_a_rising_one():
    flat, rising = _lag("c5_drift0"), _lag("c5_drift15")
    # no drift: the estimate is the known B* scaled by B_simple's ratio to its first value, ~ the truth
    assert 0.8 < float(np.median(flat["ratio"])) < 1.25
    # drift 15: B* has risen before the estimate is first warm, so it reads a fraction of the truth,
    # and the truth had the estimated value many updates earlier
    assert float(np.median(rising["ratio"])) < 0.6
    lag_rising, lag_flat = (float(np.nanmedian(r["lag_updates"])) for r in (rising, flat))
    assert lag_rising > 50 > lag_flat
    assert (np.nan_to_num(rising["lag_rollouts"]) >= 0).all()
    # below the starting B*: no lag is defined (a level error)
    assert np.isnan(flat["lag_updates"][flat["below_start"]]).all()


def test_the_oracle_tracker_reads_the_true_critical_batch():
    env = SyntheticEnvironment(seed=0, **S.task_kw("c2_drift15"))
    oracle = L.OracleTracker(1600, 64.0)
    oracle.env = env
    for _ in range(200):
        env.step(32)
    assert oracle.estimate(float("nan"), 1.0) == L.true_critical_batch(env) > 64.0
    assert oracle.estimate(float("nan"), 0.5) == 2 * L.true_critical_batch(env)  # an LR held below the rule
