"""From a sweep directory as the reference trainer writes it to a schedule: ``fit``, ``plan`` and
``simulate`` read the directory as written, print one B* for the same runs, and say what they
could not identify and which task they simulate. (The trainer's own sweep and its ``schedule
--schedule`` are run end to end in ``tests/trainer/test_sweep_to_schedule.py``.)"""

from __future__ import annotations

import json

import pytest

from rlvr_schedule.cli import main
from rlvr_schedule.clocks import fit_sweep
from rlvr_schedule.ingest import JsonlWriter, find_runs, load_runs
from rlvr_schedule.synthetic import make_sweep

BATCHES = (32, 64, 128, 256)


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """rlvr-trainer's layout: <out>/sweep/b<B>-s0/{metrics.jsonl, config.json, decisions.jsonl}, and
    the sweep's report (<out>/report/summary.json, index.md) beside it."""
    out = tmp_path_factory.mktemp("sweep")
    runs = make_sweep(BATCHES, critical_batch=128, failure_samples=40_000, seed=1)
    for run in runs:
        d = out / "sweep" / f"b{run.records[0].batch}-s0"
        d.mkdir(parents=True)
        with JsonlWriter(d / "metrics.jsonl") as w:
            w.write_all(run.records)
        (d / "config.json").write_text(json.dumps({"batch": run.records[0].batch, "seed": 0}, indent=2))
        (d / "decisions.jsonl").write_text(json.dumps({"step": 1, "batch": 32, "switched": False}) + "\n")
    (out / "report").mkdir()
    (out / "report" / "summary.json").write_text(json.dumps({"fit": {"critical_batch": 1.0}}, indent=2))
    (out / "report" / "index.md").write_text("# report\n")
    return out


def test_a_trainer_sweep_directory_reads_as_its_runs(sweep_dir):
    found = find_runs(sweep_dir)
    assert sorted(p.relative_to(sweep_dir).as_posix() for p in found) == sorted(
        f"sweep/b{b}-s0/metrics.jsonl" for b in BATCHES
    )
    assert sorted(r.name for r in load_runs([sweep_dir])) == sorted(f"sweep/b{b}-s0" for b in BATCHES)


def test_fit_plan_and_the_trainers_report_give_one_critical_batch(sweep_dir, tmp_path, capsys):
    assert main(["fit", str(sweep_dir), "--json"]) == 0
    fitted = json.loads(capsys.readouterr().out)
    # the trainer's report fits the same runs under its own labels ("sweep b32-s0")
    runs = load_runs([sweep_dir / "sweep"])
    for r in runs:
        r.name = f"sweep {r.name}"
    assert fit_sweep(runs).critical_batch == fitted["critical_batch"]
    plan_file = tmp_path / "plan.json"
    assert main(["plan", str(sweep_dir), "--json", "--out", str(plan_file)]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["critical_batch"] == fitted["critical_batch"]
    assert json.loads(plan_file.read_text())["stages"] == planned["stages"]


def test_fit_says_why_the_critical_batch_is_not_identified(tmp_path, capsys):
    one = tmp_path / "one"
    one.mkdir()
    for seed in (0, 1):
        (run,) = make_sweep([64], critical_batch=128, failure_samples=1e9, max_samples=20_000, seed=seed)
        with JsonlWriter(one / f"b64-s{seed}.jsonl") as w:
            w.write_all(run.records)
    assert main(["fit", str(one)]) == 0
    out = capsys.readouterr().out
    assert "critical batch B*: not identified: needs constant-batch runs at two or more batches" in out
    assert "failure samples:   not identified: no run failed" in out


def test_simulate_prints_the_task_it_runs(sweep_dir, capsys):
    argv = ["simulate", "--max-samples", "4000", "--constant", "64", "--noise", "0"]
    assert main(argv) == 0
    assert "(the default synthetic task, not your sweep" in capsys.readouterr().out
    assert main([*argv, "--fit", str(sweep_dir), "--json"]) == 0
    task = json.loads(capsys.readouterr().out)["task"]
    fitted = fit_sweep(load_runs([sweep_dir]))
    assert task["critical_batch"] == pytest.approx(fitted.critical_batch)
    assert task["failure_samples"] == pytest.approx(fitted.failure_samples)
    assert task["base_batch"] == min(BATCHES) and task["from"].startswith("the fit of 4 sweep runs")
