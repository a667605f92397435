"""The hindsight frontier of the synthetic section 3a bar (benchmarks/evidence/bar_frontier.py): what it keeps and
what it finds on two section 3a tasks whose answers differ."""

from __future__ import annotations


def test_frontier_reaches_the_bar_where_b_star_drifts_and_not_where_it_stays() -> None:
    from benchmarks.evidence import bar_frontier as bf

    drifting, flat = bf.frontier("c5_drift15"), bf.frontier("c2_drift0")
    for res in (drifting, flat):
        # the reference is the constant with the best noise-free reward, and the target 0.9x it
        best = max(res["constants"].values(), key=lambda c: c["best"])
        assert res["constants"][str(res["reference"])] is best
        assert abs(res["target"] - 0.9 * best["best"]) < 1e-12
        # only the frontier is kept: no point is beaten on both updates and rollouts by another
        pts = res["points"]
        assert pts
        for p in pts:
            assert not any(
                q["updates"] <= p["updates"]
                and q["rollouts"] <= p["rollouts"]
                and (q["updates"], q["rollouts"]) != (p["updates"], p["rollouts"])
                for q in pts
            )
            assert 0.25 <= p["start_lr_ratio"] <= 1.0 and p["start_batch"] >= 8
    assert drifting["feasible"] and drifting["at"]["updates"] <= 0.6 and drifting["at"]["rollouts"] <= 1.15
    # B* does not rise on c2_drift0: a larger batch only spends rollouts, the bar stays out of reach
    assert not flat["feasible"] and flat["min_updates_within_rollouts_bar"] > 0.6
    md = bf.markdown([drifting, flat])
    assert "| c5_drift15 | 64 | 16 | 0.25 |" in md and "| **no** |" in md
