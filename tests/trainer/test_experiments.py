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
    from rlvr_trainer.experiments import _finished

    cfg = TrainConfig(max_samples=64)
    old = tmp_path / "old"
    _finished_run(old, cfg, 64)
    saved = json.loads((old / "config.json").read_text())
    del saved["overlap"]  # written before issue 13 added it
    (old / "config.json").write_text(json.dumps(saved))
    assert _finished(old, cfg)
    assert not _finished(old, cfg.replace(overlap=True))
    assert not _finished(old, cfg.replace(max_samples=128))
    saved["no_such_field"] = 1
    (old / "config.json").write_text(json.dumps(saved))
    assert not _finished(old, cfg)


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
