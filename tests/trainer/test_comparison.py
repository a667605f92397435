"""The schedule comparison of RESULTS 3b (``rlvr-trainer evidence --compare``): the run list, the chunked resume and
the table, on synthetic logs written by a stand-in for the trainer (no training, seconds)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from rlvr_trainer.config import preset
from rlvr_trainer.experiments import comparison as cmp

BATCHES = (8, 16, 32, 64)


def _cfg():
    return preset("tiny", max_samples=4096, base_lr=1e-4)


class FakeTrain:
    """Writes a finished run for ``cfg``: reward rising at p0 (lr / 1e-4) (1 - B / 2B*) per rollout
    (B* = 40), crashing after ``crash`` rollouts; config.json as the trainer writes it."""

    def __init__(self, crash: int = 640, eval_every: int = 0):
        self.calls: list[str] = []
        self.crash = crash
        self.eval_every = eval_every  # rollouts between held-out evals (0: none logged)

    def __call__(self, cfg, out_dir, *, schedule=None, policy=None):
        self.calls.append(str(out_dir))
        out_dir.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng([cfg.seed, cfg.batch, int(cfg.base_lr * 1e7)])
        rate = 6e-4 * (cfg.base_lr / 1e-4) * (1 - cfg.batch / 80)
        lines = []
        # to max_samples as the trainer runs (a batch that does not divide it overshoots the last update)
        for step in range(1, -(-cfg.max_samples // cfg.batch) + 1):
            s = step * cfg.batch
            rew = 0.1 + 0.7 * (1 - np.exp(-rate * s / 0.7)) + rng.normal(0, 0.01)
            ent = 0.6 - 0.1 * s / cfg.max_samples
            if s > self.crash:
                rew, ent = 0.02, 0.01
            rec = {"step": step, "samples": s, "batch": cfg.batch, "lr": cfg.base_lr, "reward_mean": rew}
            rec.update(entropy=ent, rollout_s=0.01 * cfg.batch, update_s=0.02)
            if self.eval_every and (step == 1 or s // self.eval_every > (s - cfg.batch) // self.eval_every):
                # held-out accuracy: the reward's curve without the format's head start, no crash
                rec["eval_accuracy"] = round(0.9 * (1 - np.exp(-rate * s / 0.9)), 3)
            lines.append(json.dumps(rec))
        (out_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
        (out_dir / "config.json").write_text(json.dumps(cfg.to_dict()))


def test_design_counts_the_runs_short_sweeps_first_and_estimates_the_time():
    cfg = _cfg()
    d = cmp.design(cfg, base_lr=1e-4, side_lrs=[5e-5, 2e-4], batches=BATCHES, grid_factors=(0.5, 2.0))
    n = Counter((s.lr, s.arm) for s in d.specs)
    # 5 seeds at the chosen LR, 3 at each side LR; per seed: 4 constants, 2 grid points + the plan's
    # end LR, 5 schedule arms; one short sweep (4 batches, seed 0) per LR
    assert n[(1e-4, "constant")] == 20 and n[(5e-5, "constant")] == 12 and n[(2e-4, "constant")] == 12
    assert n[(1e-4, "grid")] == 15 and n[(2e-4, "grid")] == 9
    assert all(n[(lr, a)] == (5 if lr == 1e-4 else 3) for lr in d.lrs for a in cmp.SCHEDULE_ARMS)
    assert all(n[(lr, "short")] == 4 for lr in d.lrs)
    phases = [s.phase for s in d.specs]
    assert phases == sorted(phases)  # every short sweep before anything that needs a plan
    assert len(d.specs) == 3 * 4 + 5 * 12 + 2 * 3 * 12
    assert d.sweep_samples == 1024
    est = cmp.estimate_seconds(cfg, d)
    c = cmp.COST
    short = c["start_s"] + 1024 / 8 * (c["t0"] + c["t1"] * 8)
    assert est > 12 * short and est < len(d.specs) * (c["start_s"] + 4096 / 8 * (c["t0"] + c["t1"] * 8))


def test_comparison_resumes_in_chunks_and_writes_the_table(tmp_path, capsys):
    cfg = _cfg()
    d = cmp.design(
        cfg,
        base_lr=1e-4,
        batches=BATCHES,
        seeds=(0, 1, 2),
        grid_factors=(0.5, 2.0),
    )
    fake = FakeTrain()
    # zero-minute chunks: one run per call, None until done
    for k in range(1, 4):
        assert cmp.comparison(cfg, tmp_path, d, chunk_minutes=0, train=fake) is None
        assert len(fake.calls) == k
    printed = capsys.readouterr().out
    assert f"comparison: {len(d.specs)} runs (4 short-sweep runs first), estimated" in printed
    assert "runs left" in printed
    path = cmp.comparison(cfg, tmp_path, d, chunk_minutes=60, train=fake)
    assert path is not None and path.name == "compare.md"
    trained = len(fake.calls)
    assert len(set(fake.calls)) == trained  # nothing trained twice
    # the plan's first batch is in the sweep, so its constant is shared by the grid's x1 point:
    # grid points that coincide with a constant (same directory, same config) are not rerun
    assert trained <= len(d.specs)
    plan = json.loads((tmp_path / "lr0.0001" / "plan.json").read_text())
    assert plan["first_batch"] in BATCHES and len(plan["stages"]) >= 2  # the short sweep failed: switches
    assert plan["closed_form_postponement"] is not None
    for arm in cmp.SCHEDULE_ARMS:
        assert (tmp_path / "lr0.0001" / arm / "s2" / "metrics.jsonl").exists()
    # finished runs are read back: a second call trains nothing
    assert cmp.comparison(cfg, tmp_path, d, chunk_minutes=60, train=fake) == path
    assert len(fake.calls) == trained

    md = path.read_text()
    res = json.loads((tmp_path / "compare.json").read_text())["lrs"]["0.0001"]
    for label in ("constant B=8", "constant B=64", "planned", "live", "decay", "ramp", "noise"):
        assert f"| {label} |" in md
    assert "LR grid B=" in md and "(end)" in md
    m = res["measures"]
    r8 = np.mean([v["rollouts"] for v in m["constant B=8"].values()])
    r64 = [v["rollouts"] for v in m["constant B=64"].values()]
    assert all(x is None or x > r8 for x in r64)  # slower per rollout above B*
    u8 = np.mean([v["updates"] for v in m["constant B=8"].values()])
    assert u8 == pytest.approx(r8 / 8, rel=0.02)  # updates = rollouts / batch at a constant batch
    assert all(v["failure"] is not None for v in m["constant B=8"].values())
    assert "| 3/3 |" in md  # the failures column
    v = res["versus"]
    assert v["planned vs best constant (rollouts)"]["n"] == 3
    assert v["live vs best LR grid (best)"]["verdict"] in ("beats", "loses to", "not separated from")
    assert "- planned vs the best constant on rollouts" in md
    assert "Postponement of failure, planned vs constant B=" in md and "closed form" in md


def test_the_table_reads_held_out_accuracy_and_prices_the_cost_to_target(tmp_path):
    """Where every constant logged ``eval_accuracy`` the arms are read on it (target, best before
    failure), and the cost to target is rollouts + rho x updates at the price fitted from the
    constants' step times (rollout_s 0.01 s per rollout, update_s 0.02 s: rho = 2)."""
    cfg = _cfg()
    d = cmp.design(cfg, base_lr=1e-4, batches=BATCHES, seeds=(0, 1), grid_factors=(0.5,), arms=("planned",))
    assert {s.arm for s in d.specs} == {"short", "constant", "grid", "planned"}
    path = cmp.comparison(cfg, tmp_path, d, chunk_minutes=60, train=FakeTrain(crash=10**9, eval_every=256))
    md = path.read_text()
    res = json.loads((tmp_path / "compare.json").read_text())["lrs"]["0.0001"]
    assert res["metric"] == "eval_accuracy" and "target held-out accuracy" in md
    assert res["price"]["rollouts_per_update"] == pytest.approx(2.0, rel=1e-6)
    assert "best held-out accuracy before failure" in md and "rho 2.0 [" in md
    logged = [json.loads(x) for x in (tmp_path / "lr0.0001" / "sweep" / "b8-s0" / "metrics.jsonl").open()]
    acc = [r["eval_accuracy"] for r in logged if "eval_accuracy" in r]
    # evals 256 rollouts apart, a smoothing window of 82: the best is the best logged accuracy
    assert res["measures"]["constant B=8"]["0"]["best"] == pytest.approx(max(acc))
    for per in res["measures"].values():
        for m in per.values():
            if m["rollouts"] is not None:
                assert m["cost"] == pytest.approx(m["rollouts"] + 2.0 * m["updates"], rel=1e-6)
    with pytest.raises(ValueError, match="unknown arm"):
        cmp.design(cfg, base_lr=1e-4, arms=("planned", "sgd"))


def test_a_run_that_fails_before_three_evaluations_is_measured_not_fatal():
    """A grid point at a high LR can crash before its third held-out evaluation: it never reached
    the target, its best is the best it logged before failing, and the table is still written."""
    from rlvr_schedule.records import Run, StepRecord

    recs = []
    for step in range(1, 201):
        s = step * 8
        ok = s <= 600
        extra = {"eval_accuracy": 0.25} if step in (1, 64) else {}
        recs.append(
            StepRecord(
                step=step,
                samples=s,
                batch=8,
                lr=1e-3,
                reward_mean=0.3 if ok else 0.0,
                entropy=0.5 if ok else 0.0,
                extra=extra,
            )
        )
    run = Run(recs, name="crashed")
    m = cmp.measure(run, 0.5, window=80, metric="eval_accuracy", price=2.0)
    assert m["failure"] is not None and m["failure"] < 1600
    assert m["rollouts"] is None and m["cost"] is None and m["best"] == pytest.approx(0.25)
    # as a constant it has no curve for the target: left out, not fatal
    assert np.isnan(cmp._target([run], 80, "eval_accuracy"))


def test_cli_arms_are_the_schedule_arms():
    from rlvr_trainer.cli import build_parser

    act = next(
        a
        for a in build_parser()._subparsers._group_actions[0].choices["evidence"]._actions
        if a.dest == "arms"
    )
    assert tuple(act.choices) == cmp.SCHEDULE_ARMS


def test_grid_points_and_decay_follow_the_plan():
    cfg = _cfg()
    plan = {"first_batch": 8, "rule_lr_at_first": 5e-5, "end_lr": 2e-5}
    assert cmp.grid_base_lr(cfg, plan, "x2") == pytest.approx(2e-4)  # 2 x 5e-5 at batch 8 = base 2e-4 at 32
    assert cmp.grid_base_lr(cfg, plan, "end") == pytest.approx(4e-5)
    sched = cmp.cosine_decay(8, 1e-3, 1600, stages=4)
    lrs = [s.lr for s in sched.stages]
    assert lrs == sorted(lrs, reverse=True) and lrs[0] < 1e-3 and lrs[-1] > 0
    assert [s.until_samples for s in sched.stages] == [400, 800, 1200, None]


def test_cli_compare_report_only_counts_what_is_missing(tmp_path, capsys):
    """`evidence --compare v2 --report-only` on an empty directory: no training, a table that says
    how many runs of the design are not there yet."""
    from rlvr_trainer.cli import main

    argv = ["evidence", "--compare", "v2", "--base-lr", "1e-4", "--lrs", "5e-5", "--out", str(tmp_path)]
    assert main([*argv, "--report-only"]) == 0
    assert "comparison: " in capsys.readouterr().out
    md = (tmp_path / "compare.md").read_text()
    # 5 seeds at 1e-4 and 3 at 5e-5, 14 full-budget runs per seed (5 constants, 4 grid points, 5 arms)
    assert "base LRs 0.0001, 5e-05 (seeds: 0.0001: 5; 5e-05: 3)" in md
    assert "no constant run yet" in md and f"({8 * 14} runs of the design not there yet.)" in md


@pytest.mark.slow
def test_comparison_runs_every_arm_on_the_real_trainer(tiny_model_dir, tmp_path, capsys):
    """The whole design at a toy budget on the transformers rollout path: every arm's schedule
    object drives the real trainer to its budget, the plan is written, and the table comes out."""
    from rlvr_trainer.cli import main

    argv = ["evidence", "--compare", "--base-lr", "1e-4", "--out", str(tmp_path), "--batches", "8", "16"]
    argv += ["--seeds", "0", "--max-samples", "96", "--sweep-fraction", "0.5", "--rollout", "hf"]
    argv += ["--model", str(tiny_model_dir), "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "comparison: 13 runs (2 short-sweep runs first), estimated" in printed
    assert (tmp_path / "lr0.0001" / "plan.json").exists()
    for arm in cmp.SCHEDULE_ARMS:
        rows = [
            json.loads(x)
            for x in (tmp_path / "lr0.0001" / arm / "s0" / "metrics.jsonl").read_text().splitlines()
        ]
        assert rows[-1]["samples"] >= 96 and all(r["batch"] % 8 == 0 for r in rows), arm
    short = (tmp_path / "lr0.0001" / "short" / "b8-s0" / "metrics.jsonl").read_text().splitlines()
    assert json.loads(short[-1])["samples"] == 48
    md = (tmp_path / "compare.md").read_text()
    assert "| planned |" in md and "| noise |" in md


def test_a_run_claimed_by_another_process_is_left_to_it(tmp_path, capsys):
    """Two chunks on one --out (one per core) never train the same run: a run whose lock another
    process holds is skipped, and the call does not write the table until that run is there."""
    import fcntl

    cfg = _cfg()
    d = cmp.design(cfg, base_lr=1e-4, batches=BATCHES, seeds=(0,), grid_factors=(2.0,))
    first = d.specs[0]  # a short-sweep run
    run_dir = cmp._dir(tmp_path, first)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    locks = tmp_path / ".locks"
    locks.mkdir()
    name = str(run_dir.resolve().relative_to(tmp_path.resolve())).replace("/", "__")
    fake = FakeTrain()
    with open(locks / f"{name}.lock", "w") as other:  # "another process" holds the first run
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert cmp.comparison(cfg, tmp_path, d, chunk_minutes=60, train=fake) is None
    # the other short runs ran; nothing that needs the plan did (its short sweep is not complete)
    assert str(run_dir) not in fake.calls and len(fake.calls) == len(BATCHES) - 1
    assert f"{len(d.specs) - len(BATCHES) + 1} runs held by another process" in capsys.readouterr().out
    assert not (tmp_path / "compare.md").exists()
    # released (the other process ended without finishing it): the next call trains it and reports
    path = cmp.comparison(cfg, tmp_path, d, chunk_minutes=60, train=fake)
    assert path is not None and fake.calls.count(str(run_dir)) == 1


def test_postponement_counts_a_planned_run_that_outlived_the_budget_as_censored():
    """A planned run that never failed postponed the constant's failure by more than the rest of
    the budget: listed as a lower bound, not dropped (2 of 3 seeds at base LR 4e-4 did)."""
    plan = {"first_batch": 8, "closed_form_postponement": 5682.0}
    meas = {
        "constant B=8": {0: {"failure": 1888}, 1: {"failure": 1592}, 2: {"failure": None}},
        "planned": {0: {"failure": None}, 1: {"failure": 1592}, 2: {"failure": None}},
    }
    line = cmp._postponement(meas, plan, 14336)
    assert "both failed 0 (1/1)" in line
    assert "censored): > 12,448" in line and "> 12,742" not in line  # seed 2: the constant never failed
    assert "closed form 5,682" in line


def test_postponement_falls_back_to_the_grid_end_point_when_no_constant_has_the_plans_batch():
    """A plan at B=48 (not a sweep batch) that holds its LR: the grid's end point is that batch at
    that LR, held, so it is the constant the postponement is measured against."""
    plan = {"first_batch": 48, "first_lr": 9.8e-4, "end_lr": 9.8e-4, "closed_form_postponement": 464.0}
    meas = {
        "constant B=16": {0: {"failure": 900}},
        "LR grid B=48, base LR 0.0008 (end)": {0: {"failure": 1000}, 1: {"failure": 1200}},
        "planned": {0: {"failure": 1500}, 1: {"failure": None}},
    }
    line = cmp._postponement(meas, plan, 14336)
    assert "planned vs B=48 held at the plan's LR" in line
    assert "both failed 500 (1/1)" in line and "censored): > 13,136" in line
    # a plan that cuts its LR: the end point runs at another LR, no stand-in
    line = cmp._postponement(meas, {**plan, "end_lr": 4e-4}, 14336)
    assert "vs constant B=48" in line and "both failed - (0/0)" in line
