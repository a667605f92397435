"""The experiment pipeline (sweep -> live two-clock schedule -> report) on the transformers
rollout path (``--rollout hf``), small enough to run in seconds."""

from __future__ import annotations

import json

import pytest

from rlvr_trainer.cli import main


@pytest.mark.slow
def test_compare_writes_logs_checkpoints_and_report(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = [
        "compare",
        "--out",
        str(out),
        "--batches",
        "8",
        "16",
        "--max-samples",
        "48",
        "--rollout",
        "hf",
        "--model",
        str(tiny_model_dir),
        "--no-progress",
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "report:" in printed and (out / "report" / "index.html").exists()
    assert "Verdicts on the predictions:\n- per-sample progress falls above B*" in printed  # on the console
    for run in ("sweep/b8-s0", "sweep/b16-s0", "schedule/s0"):
        rows = [json.loads(x) for x in (out / run / "metrics.jsonl").read_text().splitlines()]
        assert rows[-1]["samples"] == 48
        assert all(r["batch"] % 8 == 0 for r in rows)
        assert (out / run / "checkpoint.pt").exists()
    sweep8 = [json.loads(x) for x in (out / "sweep/b8-s0/metrics.jsonl").read_text().splitlines()]
    sweep16 = [json.loads(x) for x in (out / "sweep/b16-s0/metrics.jsonl").read_text().splitlines()]
    assert sweep16[0]["lr"] == pytest.approx(sweep8[0]["lr"] * 2**0.5)  # square-root rule
    md = (out / "report" / "index.md").read_text()
    assert "Schedule vs constant batches" in md and "schedule s0" in md
    assert "per-sample progress falls above B*" in md  # the verdict section
    # finished runs are reused: a second call trains nothing and rewrites the same report
    mtime = (out / "sweep/b8-s0/metrics.jsonl").stat().st_mtime
    assert main(argv) == 0
    assert (out / "sweep/b8-s0/metrics.jsonl").stat().st_mtime == mtime
    # --report-only refits the logs without touching them (no engine, no training)
    (out / "report" / "index.md").unlink()
    assert main([*argv, "--report-only"]) == 0
    assert (out / "sweep/b8-s0/metrics.jsonl").stat().st_mtime == mtime
    md = (out / "report" / "index.md").read_text()
    assert md.index("## Verdicts on the predictions") < md.index("## Fitted clocks")
    fit = json.loads((out / "report" / "summary.json").read_text())["fit"]
    for r in fit["runs"]:  # a run's rate lies in its own interval
        lo, hi = r["rate_interval"]
        assert r["rate"] is None or lo is None or lo <= r["rate"] <= hi, r


@pytest.mark.slow
def test_evidence_runs_in_chunks_and_ends_with_verdicts(tiny_model_dir, tmp_path, capsys):
    """`evidence` with a zero-minute chunk trains one run per call (exit 3: not finished), then
    the schedule and the report with a verdict per prediction, B* ~ 1/lr from the per-LR fits."""
    out = tmp_path / "ev"
    argv = [
        "evidence",
        "--out",
        str(out),
        "--batches",
        "8",
        "16",
        "--max-samples",
        "48",
        "--rollout",
        "hf",
        "--model",
        str(tiny_model_dir),
        "--no-progress",
        "--seeds",
        "0",
        "--base-lr",
        "1e-4",
        "--lrs",
        "1e-4",
        "2e-4",
        "--chunk-minutes",
        "0",
    ]
    codes = [main(argv) for _ in range(5)]
    assert codes == [3, 3, 3, 3, 0]  # 2 LRs x 2 batches, then schedule + report
    runs = sorted(p.parent.relative_to(out).as_posix() for p in out.rglob("metrics.jsonl"))
    assert runs == [
        "lr0.0001/schedule/s0",
        "lr0.0001/sweep/b16-s0",
        "lr0.0001/sweep/b8-s0",
        "lr0.0002/sweep/b16-s0",
        "lr0.0002/sweep/b8-s0",
    ]
    fits = json.loads((out / "fits_by_lr.json").read_text())
    assert sorted(fits) == ["0.0001", "0.0002"]
    md = (out / "lr0.0001" / "report" / "index.md").read_text()
    assert "## Verdicts on the predictions" in md and "B* ~ 1/lr" in md and "the schedule switched" in md
    assert "## LR grid of constants vs the schedule" in md and "constant B=16, base LR 0.0002" in md
    assert "## Fits at each base LR" in md


def _finished_run(d, cfg, samples):
    d.mkdir(parents=True)
    (d / "config.json").write_text(cfg.json())
    (d / "metrics.jsonl").write_text(json.dumps({"step": 1, "samples": samples}) + "\n")


def test_a_finished_run_stays_finished_when_the_config_gains_a_field(tmp_path):
    """A run made before a field existed is the same run at that field's default; a run with a key
    this version does not know, a different setting, or too few samples is not finished."""
    from rlvr_trainer.config import TrainConfig
    from rlvr_trainer.experiments import finished

    cfg = TrainConfig(max_samples=64)
    old = tmp_path / "old"
    _finished_run(old, cfg, 64)
    saved = json.loads((old / "config.json").read_text())
    del saved["overlap"]  # written before the overlap measure existed
    (old / "config.json").write_text(json.dumps(saved))
    assert finished(old, cfg)
    assert not finished(old, cfg.replace(overlap=True))
    assert not finished(old, cfg.replace(max_samples=128))
    saved["no_such_field"] = 1
    (old / "config.json").write_text(json.dumps(saved))
    assert not finished(old, cfg)


def test_a_fresh_start_sets_old_logs_aside_instead_of_appending(tmp_path):
    """Without a checkpoint, a start in a directory with another run's logs renames them: appending
    would interleave two runs' steps (it did, when a config change made a finished run look unfinished)."""
    from types import SimpleNamespace

    from rlvr_trainer.train import Trainer

    m, d = tmp_path / "metrics.jsonl", tmp_path / "decisions.jsonl"
    for _ in range(2):
        m.write_text('{"step": 1}\n')
        d.write_text('{"step": 1}\n')
        Trainer._set_aside_old_logs(SimpleNamespace(metrics_path=m, decisions_path=d))
    assert not m.exists() and not d.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "decisions.jsonl.old-1",
        "decisions.jsonl.old-2",
        "metrics.jsonl.old-1",
        "metrics.jsonl.old-2",
    ]


def _scan_run(d, lr, seed, *, rate, crash_at=None, batch=8, samples=8192):
    """A synthetic constant-batch run: reward rising at ``rate`` per rollout towards 0.8 (small
    seed noise), entropy falling slowly; from ``crash_at`` rollouts reward and entropy collapse."""
    import numpy as np

    rng = np.random.default_rng([seed, int(lr * 1e7)])
    d.mkdir(parents=True)
    lines = []
    for step in range(1, samples // batch + 1):
        s = step * batch
        rew = 0.1 + 0.7 * (1 - np.exp(-rate * s / 0.7)) + rng.normal(0, 0.01)
        ent = 0.6 - 0.2 * s / samples
        if crash_at is not None and s > crash_at:
            rew, ent = 0.02, 0.01
        lines.append(
            json.dumps(
                {"step": step, "samples": s, "batch": batch, "lr": lr / 2, "reward_mean": rew, "entropy": ent}
            )
        )
    (d / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def test_scan_report_applies_the_plans_criterion(tmp_path):
    """Rates x1.7 per LR step on the first three LRs (tight seeds: in the regime), flat on the
    fourth; two of three runs crash at the third LR: the criterion is met there, and scan.md says so."""
    from rlvr_trainer.experiments import scan_report

    lrs = [1e-4, 1.7e-4, 2.9e-4, 5e-4]
    rates = [2e-4, 3.4e-4, 5.8e-4, 5.8e-4]
    for lr, rate in zip(lrs, rates, strict=True):
        for s in (0, 1, 2):
            crash = 6000 if (lr == 2.9e-4 and s < 2) else None
            _scan_run(
                tmp_path / f"lr{lr:g}" / "sweep" / f"b8-s{s}",
                lr,
                s,
                rate=rate * (1 + 0.02 * s),
                crash_at=crash,
            )
    md = scan_report(tmp_path, lrs=lrs, seeds=(0, 1, 2)).read_text()
    res = json.loads((tmp_path / "scan.json").read_text())
    v = res["verdict"]
    assert v["regime"] == lrs[:3]
    assert v["failure_clock_shows"] == [2.9e-4]
    assert v["met"] is True and v["chosen_base_lr"] == 2.9e-4
    rows = res["rows"]
    assert [r["failures"] for r in rows] == [0, 0, 2, 0]
    means = [r["rate_mean"] for r in rows]
    assert means[0] < means[1] < means[2]
    assert "Criterion met: **yes**" in md and "| 0.00029 |" in md


@pytest.mark.slow
def test_evidence_scan_runs_in_chunks_and_writes_the_scan(tiny_model_dir, tmp_path, capsys):
    """`evidence --scan`: one run per zero-minute chunk (exit 3), then scan.md / scan.json, in
    evidence's layout at batch 8."""
    out = tmp_path / "scan"
    argv = ["evidence", "--scan", "--out", str(out), "--max-samples", "48", "--rollout", "hf"]
    argv += ["--model", str(tiny_model_dir), "--no-progress", "--seeds", "0", "--lrs", "1e-4", "2e-4"]
    codes = [main([*argv, "--chunk-minutes", "0"]) for _ in range(2)]
    assert codes == [3, 0]
    runs = sorted(p.parent.relative_to(out).as_posix() for p in out.rglob("metrics.jsonl"))
    assert runs == ["lr0.0001/sweep/b8-s0", "lr0.0002/sweep/b8-s0"]
    assert "scan: " in capsys.readouterr().out
    res = json.loads((out / "scan.json").read_text())
    assert [r["base_lr"] for r in res["rows"]] == [1e-4, 2e-4] and res["batch"] == 8
    assert main([*argv, "--report-only"]) == 0


def test_scan_designs_change_only_the_planned_task_and_lrs(capsys):
    """`--scan` is v1 (the demo's task, LR_SCAN_PLAN.md's first scan); `--scan v2` the re-planned
    scan: warm-up 64 rollouts, all arithmetic levels, base LRs 2.5e-5..8e-4 in x2 steps; an
    unknown design is a clear error (exit 2)."""
    from rlvr_trainer.config import preset
    from rlvr_trainer.experiments import SCAN_LRS, scan_design

    cfg = preset("tiny")
    v1, lrs1 = scan_design(cfg, "v1")
    assert v1 == cfg and lrs1 == SCAN_LRS
    v2, lrs2 = scan_design(cfg, "v2")
    assert (v2.warmup_samples, v2.task_max_level) == (64, None)
    assert v2.replace(warmup_samples=cfg.warmup_samples, task_max_level=cfg.task_max_level) == cfg
    assert lrs2 == (2.5e-5, 5e-5, 1e-4, 2e-4, 4e-4, 8e-4)
    assert main(["evidence", "--scan", "v9", "--out", "x", "--report-only"]) == 2
    assert "unknown scan design 'v9'" in capsys.readouterr().err
