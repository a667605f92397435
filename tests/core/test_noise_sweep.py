"""The sweep's criterion reader on synthetic run folders in the trainer's layout: a sweep shaped
by the theory (B* ~ 1/lr, a failure at a fixed rollout count) meets the items it should, a sweep
whose per-rollout progress does not fall with the batch does not, and the reader agrees with
``power_check.criterion`` on the same rates (the reading the plan's power was computed for)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from benchmarks.evidence.noise_sweep import ITEM1, find_runs, markdown, read_sweep
from benchmarks.evidence.power_check import ITEMS

LRS = (1e-4, 1.41421e-4, 2e-4)
BATCHES = (16, 32, 64, 128, 256)
SEEDS = 5
BUDGET = 4096
TOP_BSTAR = 64.0


def _write_run(folder: Path, *, batch: int, lr: float, rate: float, fail_at: float | None, rng) -> None:
    folder.mkdir(parents=True)
    rows = []
    for step in range(1, BUDGET // batch + 1):
        n = step * batch
        acc = min(0.95, 0.3 + rate * (n - batch))
        if fail_at is not None and n > fail_at:
            acc = 0.02
        rows.append(
            {
                "step": step,
                "samples": n,
                "batch": batch,
                "lr": lr,
                "reward_mean": float(np.clip(acc + 0.02 * rng.standard_normal(), 0, 1)),
                "entropy": 0.7 if fail_at is None or n <= fail_at else 0.01,
                "eval_accuracy": acc,
            }
        )
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "config.json").write_text(json.dumps({"max_samples": BUDGET, "batch_size": batch}))


def _sweep(root: Path, *, flat: bool, fail_at: float | None = None) -> Path:
    rng = np.random.default_rng(0)
    for lr in LRS:
        bstar = math.inf if flat else TOP_BSTAR * LRS[-1] / lr
        for s in range(SEEDS):
            for b in BATCHES:
                rate = (
                    4e-4 * lr / LRS[-1] * max(0.0, 1.0 - b / (2 * bstar)) * (1 + 0.05 * rng.standard_normal())
                )
                f = fail_at * math.exp(0.2 * rng.standard_normal()) if fail_at and lr == LRS[-1] else None
                _write_run(
                    root / f"lr{lr:g}" / "sweep" / f"b{b}-s{s}", batch=b, lr=lr, rate=rate, fail_at=f, rng=rng
                )
    return root


def test_a_theory_shaped_sweep_meets_items_1_to_4(tmp_path):
    root = _sweep(tmp_path / "sweep", flat=False)
    r = read_sweep(root, batches=BATCHES, shift=0.0, seeds=SEEDS, n_boot=50)
    assert r["complete"] and r["lrs"] == sorted(LRS)
    tops = [r["per_lr"][f"{lr:g}"]["bstar"] for lr in LRS]
    assert tops[0] > tops[1] > tops[2]  # B* falls as the LR rises
    assert tops[2] == pytest.approx(TOP_BSTAR, rel=0.3)
    items = r["items"]
    assert items[ITEM1] and items[ITEMS[0]] and items[ITEMS[1]] and items[ITEMS[2]]
    assert r["slope_shifted"][1] <= -1.0 <= r["slope_shifted"][2]
    # nothing failed: item 5 and so the whole criterion are not met
    assert r["failing_constants_at_top"] == 0 and not items[ITEMS[3]] and not items[ITEMS[4]]
    text = markdown(r)
    assert "| 1. gain at or below B* | yes |" in text and "| 5. failure clock | no |" in text


def test_a_failure_at_a_fixed_rollout_count_meets_item_5(tmp_path):
    root = _sweep(tmp_path / "sweep", flat=False, fail_at=2500.0)
    r = read_sweep(root, batches=BATCHES, shift=0.0, seeds=SEEDS, n_boot=50)
    alpha, lo, hi = r["failure_exponent"]
    assert r["failing_constants_at_top"] == len(BATCHES) and lo <= 0.0 <= hi and (hi - lo) / 2 <= 0.5
    assert r["items"][ITEMS[3]] and r["items"][ITEMS[4]]


def test_a_flat_sweep_fails_items_2_and_3(tmp_path):
    root = _sweep(tmp_path / "sweep", flat=True)
    r = read_sweep(root, batches=BATCHES, shift=0.0, seeds=SEEDS, n_boot=50)
    assert not r["items"][ITEMS[0]] and not r["items"][ITEMS[1]] and not r["items"][ITEMS[4]]


def test_unfinished_runs_are_left_out_and_the_reading_is_marked_incomplete(tmp_path):
    root = _sweep(tmp_path / "sweep", flat=False)
    cut = root / f"lr{LRS[0]:g}" / "sweep" / "b16-s0" / "metrics.jsonl"
    cut.write_text("".join(cut.read_text().splitlines(keepends=True)[:10]))
    found, unfinished = find_runs(root)
    assert unfinished == [f"lr{LRS[0]:g}/sweep/b16-s0"]
    assert len(found[LRS[0]]) == len(BATCHES) * SEEDS - 1
    r = read_sweep(root, batches=BATCHES, shift=0.0, seeds=SEEDS, n_boot=50)
    assert not r["complete"] and "incomplete" in markdown(r)
