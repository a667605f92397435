"""The priced rule shared by the bar's frontier and the one-price check (benchmarks/evidence/bar_frontier.py,
priced_rule.py): what the rule picks, and that the oracle schedule runs in the comparison's place."""

from __future__ import annotations

import math

import pytest

from rlvr_schedule.synthetic.model import ClockModel


def test_the_rule_picks_b_star_for_free_rollouts_and_a_smaller_batch_as_they_cost() -> None:
    from benchmarks.evidence import bar_frontier as bf

    grid = bf.PricedGrid(ClockModel(critical_batch=64.0, failure_samples=20_000.0), lr_ratios=[1.0])
    # at the square-root rule the gain per update is B (1 - B / 2B*) up to a constant: largest at B*
    assert grid.choose(64.0, 0.0, 0.0)[0] == 64
    assert grid.choose(128.0, 0.0, 0.0)[0] == 128
    picks = [grid.choose(64.0, lam, 0.0)[0] for lam in (0.0, 0.01, 0.1, 1.0)]
    assert picks == sorted(picks, reverse=True) and picks[-1] < picks[0]
    # a price on the failure budget also lowers the batch (each update spends B / span of it)
    assert grid.choose(64.0, 0.0, 1000.0)[0] < 64
    # with lower LR ratios allowed and the failure budget priced, the rule holds the LR below the rule
    full = bf.PricedGrid(ClockModel(critical_batch=64.0, failure_samples=20_000.0))
    assert full.choose(64.0, 0.05, 3000.0)[2] < 1.0


def test_one_price_cells_and_the_oracle_in_the_comparison() -> None:
    from benchmarks.evidence import priced_rule as pr

    res = pr.noise_free_cells("c5_drift15")
    assert len(res["cells"]) == len(pr.CS) * len(pr.MUS)
    # the drift of B* makes the bar's corner reachable on this task at some price
    assert any(pr.meets(c) for c in res["cells"].values())
    key = pr.hindsight_price(res)
    assert pr.meets(res["cells"][key])
    assert pr.meets(dict(rollouts=1.1, updates=0.5, best_diff=-0.005))
    assert not pr.meets(dict(rollouts=1.1, updates=0.5, best_diff=-0.02))
    assert pr.meets(dict(rollouts=1.1, updates=0.5, best_diff=-0.02), reward=False)
    assert not pr.meets(dict(rollouts=math.nan, updates=math.nan, best_diff=0.0))

    cell = res["cells"][key]
    sched = pr.OraclePricedSchedule("c5_drift15", cell["c"], cell["mu"])
    with pytest.raises(RuntimeError, match="bind"):
        sched.step(None)
    rows = pr.noisy(["c5_drift15"], 2, (cell["c"], cell["mu"]))
    assert rows[0]["task"] == "c5_drift15" and rows[0]["updates"] is not None
    # the hook is cleared afterwards: the comparison runs the policy again
    assert pr.S.POLICY_MAKER is None
    assert pr.task_set("h20_b84_f42k_drift8p5_alpha") == "h19-h21" and pr.task_set("c2_drift3") == "3a"
