"""The `rlvr-schedule` CLI: each subcommand, the JSON contract, and bad input."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr_schedule import cli
from rlvr_schedule.ingest import write_jsonl
from rlvr_schedule.synthetic import make_sweep

B_STAR = 128
FAIL = 60_000


@pytest.fixture(scope="module")
def sweep_logs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("sweep")
    paths = []
    for run in make_sweep([16, 32, 64, 128, 256], critical_batch=B_STAR, failure_samples=FAIL, seed=1):
        p = d / f"b{run.batch}.jsonl"
        write_jsonl(p, run.records)
        paths.append(str(p))
    return paths


def _json_out(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_fit_json_contract(sweep_logs: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    d = _json_out(capsys, ["fit", *sweep_logs, "--json"])
    assert set(d) >= {"critical_batch", "failure_samples", "runs"}
    assert len(d["runs"]) == 5
    assert sorted(r["batch"] for r in d["runs"]) == [16, 32, 64, 128, 256]
    for r in d["runs"]:
        assert set(r) >= {"batch", "lr", "samples_to_target", "failure_samples"}
    # the synthetic sweep has known clocks: the CLI reports them
    assert abs(d["critical_batch"] / B_STAR - 1) < 0.25
    assert abs(d["failure_samples"] / FAIL - 1) < 0.15


def test_fit_human_output_names_the_clocks(sweep_logs: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fit", *sweep_logs]) == 0
    out = capsys.readouterr().out
    assert "critical batch" in out and "failure samples" in out


def test_plan_json_contract_and_schedule_file(
    sweep_logs: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan.json"
    d = _json_out(capsys, ["plan", *sweep_logs, "--json", "--out", str(out)])
    stages = d["stages"]
    assert len(stages) >= 1
    assert all(set(s) >= {"batch", "lr", "until_samples"} for s in stages)
    assert stages[-1]["until_samples"] is None
    assert all(s["until_samples"] is not None for s in stages[:-1])
    assert stages[0]["batch"] < B_STAR * 1.25  # starts below the critical batch
    # the written plan is a schedule file the policy loads back
    from rlvr_schedule.policy import load_schedule

    sched = load_schedule(out)
    assert [s.batch for s in sched.stages][0] == stages[0]["batch"]


def test_simulate_runs_the_closed_loop(capsys: pytest.CaptureFixture[str]) -> None:
    d = _json_out(
        capsys,
        [
            "simulate",
            "--json",
            "--max-samples",
            "40000",
            "--critical-batch",
            "64",
            "--failure-samples",
            "30000",
            "--constant",
            "16",
            "256",
        ],
    )
    names = [r["run"] for r in d["runs"]]
    assert names == ["schedule", "constant-16", "constant-256"]
    assert all(r["best_reward"] is not None for r in d["runs"])


def test_report_writes_pngs_and_summary(
    sweep_logs: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rep"
    assert cli.main(["report", *sweep_logs, "--out", str(out)]) == 0
    index = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert index == out / "index.html" and index.exists()
    for png in ["reward_vs_samples.png", "progress_vs_batch.png", "failure_signal.png"]:
        data = (out / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    summary = json.loads((out / "summary.json").read_text())
    assert math.isfinite(summary["fit"]["critical_batch"])
    assert "progress_vs_batch.png" in index.read_text()


def test_bad_input_exits_2_with_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"step": 1, "batch": 8, "lr": 0.001, "reward_mean": 0.1}\n{"step": 2, oops\n'
        '{"step": 3, "batch": 8, "lr": 0.001, "reward_mean": 0.2}\n'
    )
    res = subprocess.run(
        [sys.executable, "-m", "rlvr_schedule.cli", "fit", str(bad)], capture_output=True, text=True
    )
    assert res.returncode == 2
    assert f"{bad}:2" in res.stderr
    assert "Traceback" not in res.stderr


def test_missing_file_exits_2(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "rlvr_schedule.cli", "fit", str(tmp_path / "nope.jsonl")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2 and "nope.jsonl" in res.stderr and "Traceback" not in res.stderr
