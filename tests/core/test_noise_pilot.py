"""The pilot table's reading of one run's records: the eval curve's first, best and end points
(the final evaluation after the budget included), the gain, and the share of updates a clip
at 1.0 would have acted on."""

from __future__ import annotations

import pytest

from benchmarks.evidence.noise_pilot import run_summary


def test_run_summary_reads_the_curve_and_the_final_eval():
    rows = [
        {"samples": 48, "batch": 48, "eval_accuracy": 0.1, "grad_norm": 2.0, "clip_would_act": 1.0},
        {"samples": 96, "batch": 48, "eval_accuracy": 0.6, "grad_norm": 0.5, "clip_would_act": 0.0},
        {"samples": 144, "batch": 48, "grad_norm": 0.8, "clip_would_act": 0.0, "rollout_s": 1.5},
        {
            "samples": 192,
            "batch": 48,
            "grad_norm": 1.5,
            "clip_would_act": 1.0,
            "eval_final_accuracy": 0.4,
            "eval_final_samples": 192,
        },
    ]
    s = run_summary(rows)
    assert s["eval_curve"] == [(0, 0.1), (48, 0.6), (192, 0.4)]
    assert (s["eval_first"], s["eval_best"], s["eval_best_at"], s["eval_end"]) == (0.1, 0.6, 48, 0.4)
    assert s["gain"] == pytest.approx(0.5)
    assert s["clip_would_act_share"] == 0.5 and s["grad_norm_median"] == pytest.approx(1.15)
    assert s["wall_s"] == 1.5
