"""The CLI on users' logs: real formats, options, LR after warm-up, watch, replay, bad input."""

from __future__ import annotations

import gzip
import json
import math
import re
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from rlvr_schedule import cli
from rlvr_schedule.ingest import write_jsonl
from rlvr_schedule.records import StepRecord
from rlvr_schedule.synthetic import make_sweep

FORMATS_DIR = Path(__file__).resolve().parents[1] / "data" / "real" / "formats"
QWEN = FORMATS_DIR / "verl_console" / "Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log.gz"
GEMMA = FORMATS_DIR / "verl_console" / "gemma-2-2b-it-ppo-bsz512_4-prompt1024-resp-512-0.640.log.gz"
TRL = FORMATS_DIR / "trl_local"
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert cli.main(argv) == 0
    return json.loads(capsys.readouterr().out)


# -- real logs, unconverted -------------------------------------------------------------------


def test_fit_reads_verl_console_logs_with_their_rollouts_per_update(
    capsys: pytest.CaptureFixture[str],
) -> None:
    d = _json(capsys, ["fit", str(QWEN), str(GEMMA), "--json"])
    rows = {r["name"].split("-")[0]: r for r in d["runs"]}
    assert rows["Qwen2.5"]["batch"] == 256 and rows["gemma"]["batch"] == 512
    assert "config in the log" in rows["Qwen2.5"]["batch_source"]
    assert "command line in the log" in rows["gemma"]["batch_source"]
    assert rows["Qwen2.5"]["lr"] == pytest.approx(1e-6)
    for r in d["runs"]:  # rollout counts are integers in JSON
        for k in ("samples_to_target", "failure_samples"):
            assert r[k] is None or isinstance(r[k], int)


def test_fit_warns_when_runs_differ_beyond_batch_and_lr(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fit", str(QWEN), str(GEMMA)]) == 0
    err = capsys.readouterr().err
    assert "differ in more than batch and LR" in err and "Qwen/Qwen2.5-0.5B-Instruct" in err


def test_fit_trainer_state_with_batch_option(capsys: pytest.CaptureFixture[str]) -> None:
    state = str(TRL / "trainer_state.json")
    assert cli.main(["fit", state]) == 2
    assert "--batch" in capsys.readouterr().err
    d = _json(capsys, ["fit", state, "--batch", "8", "--json"])
    (row,) = d["runs"]
    assert row["batch"] == 8 and row["batch_source"] == "option --batch"
    # the LR after the 6-step warm-up (peak logged 9.924e-4), not the first logged 1.667e-4
    assert row["lr"] == pytest.approx(9.924e-4, rel=1e-3) and row["lr_first"] == pytest.approx(
        1.667e-4, rel=1e-3
    )
    assert "warm-up" in row["lr_schedule"] and "decays" in row["lr_schedule"]


def test_alias_and_format_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "custom.jsonl"
    log.write_text(
        "".join(json.dumps({"it": i, "acc": 0.1 + 0.01 * i, "n": 64}) + "\n" for i in range(1, 30))
    )
    assert cli.main(["fit", str(log)]) == 2
    assert "--alias" in capsys.readouterr().err
    d = _json(
        capsys,
        [
            "fit",
            str(log),
            "--alias",
            "acc=reward_mean",
            "--alias",
            "it=step",
            "--alias",
            "n=batch",
            "--base-lr",
            "1e-6",
            "--json",
        ],
    )
    assert d["runs"][0]["batch"] == 64 and d["runs"][0]["lr"] == pytest.approx(1e-6)
    assert cli.main(["fit", str(log), "--alias", "acc=nonsense"]) == 2
    assert "unknown field 'nonsense'" in capsys.readouterr().err


# -- LR after warm-up ---------------------------------------------------------------------------


def test_plan_on_logs_with_lr_warm_up_gives_sqrt_rule_lrs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 2048-rollout linear warm-up and a final linear decay logged on every run: the plan's first
    stage follows the square-root rule from the LR the smallest run trained at, within 20%, and its
    failure switches hold that LR (the live policy's rule at a switch)."""
    runs = make_sweep([16, 32, 64, 128, 256], critical_batch=128, failure_samples=60_000, seed=1)
    paths, trained, first = [], {}, {}
    for run in runs:
        lr = run.records[0].lr
        trained[run.batch] = lr
        last = run.records[-1].samples
        recs = []
        for r in run.records:
            warm = min(1.0, r.samples / 2048)
            decay = 1.0 if r.samples < 0.7 * last else max(0.1, 1 - (r.samples - 0.7 * last) / (0.3 * last))
            recs.append(
                StepRecord(**{**{f: getattr(r, f) for f in r.__dataclass_fields__}, "lr": lr * warm * decay})
            )
        first[run.batch] = recs[0].lr
        p = tmp_path / f"b{run.batch}.jsonl"
        write_jsonl(p, recs)
        paths.append(str(p))
    assert first[16] < 0.01 * trained[16]  # the first record's LR is a warm-up value (16 of 2048)
    d = _json(capsys, ["plan", *paths, "--json"])
    b0, lr0 = 16, trained[16]
    first_lr = d["stages"][0]["lr"]
    assert first_lr == pytest.approx(lr0 * math.sqrt(d["stages"][0]["batch"] / b0), rel=0.2)
    assert len(d["stages"]) >= 2
    for st in d["stages"]:
        assert st["lr"] <= first_lr * (1 + 1e-12), st  # held (or divided at the largest batch)
        assert isinstance(st["batch"], int)
        assert st["until_samples"] is None or isinstance(st["until_samples"], int)
    assert any("after warm-up" in n for n in d["notes"])


# -- bad input ----------------------------------------------------------------------------------


def test_data_errors_exit_2_without_traceback(tmp_path: Path) -> None:
    short = tmp_path / "short.jsonl"
    short.write_text('{"step": 1, "samples": 8, "reward": 0.1}\n{"step": 2, "samples": 16, "reward": 0.2}\n')
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    cases = [
        (["fit", str(short)], "has 2 record(s); at least 3"),
        (["report", str(QWEN), "--out", str(a_file)], "is a file"),
        (["fit", str(QWEN), "--target", "nan"], "--target must be a finite"),
        (["fit", str(QWEN), str(QWEN)], "given twice"),
    ]
    for argv, msg in cases:
        proc = subprocess.run(
            [sys.executable, "-m", "rlvr_schedule.cli", *argv],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
            timeout=120,
        )
        assert proc.returncode == 2, (argv, proc.stderr)
        assert msg in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_version_help_and_subcommand_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and "rlvr-schedule 0." in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for fmt in ("verl-console", "trl-console", "trainer-state", "wandb-chart", "tensorboard", "jsonl", "csv"):
        assert fmt in out
    assert "each record needs" in out
    with pytest.raises(SystemExit) as e:
        cli.main(["fit", str(QWEN), "--batchh", "3"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "usage: rlvr-schedule fit" in err and "--batchh" in err


def test_lr_zero_is_flagged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "zero.jsonl"
    log.write_text(
        "".join(
            json.dumps({"step": i, "batch": 8, "lr": 0.0, "reward": 0.1 * i}) + "\n" for i in range(1, 10)
        )
    )
    cli.main(["fit", str(log), "--json"])
    assert "LR 0" in capsys.readouterr().err


def test_undetermined_estimates_are_said_so() -> None:
    d = {
        "failure_exponent": -2.4,
        "failure_exponent_interval": [-35.9, 31.1],
        "critical_batch": 100.0,
        "critical_batch_interval": [50.0, 200.0],
    }
    und = cli._undetermined(d)
    assert und == ["failure_exponent"]
    assert cli._estimate(d, "failure_exponent", und).startswith("undetermined")
    assert cli._estimate(d, "critical_batch", und, count=True) == "100 (interval [50, 200])"


def test_report_tells_runs_of_equal_batch_apart_and_plots_the_fired_signal() -> None:
    from rlvr_schedule.report import _label, fired_signal

    a, b = make_sweep([64, 64], critical_batch=128, failure_samples=20_000, seed=3, steps=10)
    a.name, b.name = "seed0", "seed1"
    assert _label(a, [a, b]) != _label(b, [a, b])
    assert (
        fired_signal(
            [
                {"failure_signal": "reward_crash"},
                {"failure_signal": "reward_crash"},
                {"failure_signal": "entropy_collapse"},
            ]
        )
        == "reward_mean"
    )
    assert fired_signal([{"failure_signal": None}], [a]) == "entropy"


# -- watch and replay ---------------------------------------------------------------------------


def test_watch_follows_a_log_that_grows_while_it_runs(tmp_path: Path) -> None:
    """A writer thread appends verl console lines (from the real Qwen log) while `watch` reads."""
    with gzip.open(QWEN, "rt", encoding="utf-8") as fh:
        lines = fh.readlines()
    first_step = next(i for i, line in enumerate(lines) if "step:0 - " in line)
    step_of = [re.search(r"step:(\d+) - ", ln) for ln in lines]
    head = lines[:first_step]
    steps = [ln for ln, m in zip(lines[first_step:], step_of[first_step:], strict=True) if m][:60]
    log = tmp_path / "train.log"
    log.write_text("".join(head), encoding="utf-8")

    def writer() -> None:
        for i in range(0, len(steps), 10):
            time.sleep(0.4)
            with open(log, "a", encoding="utf-8") as fh:
                chunk = "".join(steps[i : i + 10])
                fh.write(chunk[:-40])  # a line half written ...
                fh.flush()
                time.sleep(0.1)
                fh.write(chunk[-40:])  # ... then finished

    t = threading.Thread(target=writer)
    t.start()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlvr_schedule.cli",
            "watch",
            str(log),
            "--interval",
            "0.05",
            "--until-idle",
            "2.5",
            "--json",
        ],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    t.join()
    assert proc.returncode == 0, proc.stderr
    states = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert len(states) >= 3  # it refreshed as lines arrived, not once at the end
    samples = [s["samples"] for s in states]
    n_steps = len({re.search(r"step:(\d+)", ln).group(1) for ln in steps})  # validation lines share a step
    assert samples == sorted(samples) and samples[-1] == n_steps * 256 and samples[0] < samples[-1]
    assert all(s["samples"] == s["records"] * 256 for s in states)  # only complete lines were used
    assert all(isinstance(s["samples"], int) for s in states)


def test_watch_max_records_on_a_finished_log(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["watch", str(QWEN), "--max-records", "50", "--interval", "0.01"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out and "rollouts 12,800" in out[-1] and "batch 256" in out[-1]


def test_watch_reports_the_entropy_limited_ceiling_of_the_real_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The ceiling R(H = 0) of the entropy-reward fit over the records read so far, the same
    number as RewardCeilingFit on the whole run's (entropy, reward) pairs."""
    from rlvr_schedule.clocks import RewardCeilingFit
    from rlvr_schedule.ingest import load_run

    assert cli.main(["watch", str(QWEN), "--interval", "0.01", "--until-idle", "0.2", "--json"]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = load_run(QWEN)
    want = RewardCeilingFit().fit(run.array("entropy"), run.array("reward_mean"))
    assert last["reward_ceiling"] == pytest.approx(want.ceiling_, rel=1e-9)
    lo, hi = last["reward_ceiling_interval"]
    assert lo < last["reward_ceiling"] < hi
    assert cli.main(["watch", str(QWEN), "--max-records", "5", "--interval", "0.01", "--json"]) == 0
    early = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert early["reward_ceiling"] is None  # fewer than CEILING_MIN_RECORDS records


def test_replay_a_static_schedule_over_the_real_qwen_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sched = tmp_path / "s.json"
    sched.write_text(
        json.dumps(
            {"stages": [{"batch": 256, "lr": 1e-6, "until_samples": 50_000}, {"batch": 512, "lr": 1.414e-6}]}
        )
    )
    d = _json(capsys, ["replay", str(QWEN), "--schedule", str(sched), "--json"])
    (ev,) = [e for e in d["events"] if e["kind"] == "schedule"]
    # the first record with >= 50,000 rollouts: 256 per update from step 0 -> step 195 (50,176)
    assert ev["samples"] == 50_176 and ev["step"] == 195
    assert ev["batch"] == 512 and ev["run_batch"] == 256 and "50000" in ev["reason"]
    assert d["run_batches"] == [256] and d["records"] == 435
    assert cli.main(["replay", str(QWEN), "--schedule", str(sched)]) == 0
    assert "advisory" in capsys.readouterr().out


def test_int_counts_helper() -> None:
    out = cli._int_counts(
        {
            "samples_to_target": 1234.6,
            "rate": 0.5,
            "failure_samples_interval": [1.2, 3.7],
            "stages": [{"until_samples": 10.0, "lr": 1e-6}],
        }
    )
    assert out == {
        "samples_to_target": 1235,
        "rate": 0.5,
        "failure_samples_interval": [1, 4],
        "stages": [{"until_samples": 10, "lr": 1e-6}],
    }
    assert np.isfinite(out["rate"])


def test_plan_worse_than_the_best_constant_run_warns(capsys: pytest.CaptureFixture[str]) -> None:
    import warnings

    d = {
        "predicted": {"samples_to_target": 40_000},
        "constant": [{"samples_to_target": 20_000}, {"samples_to_target": None}],
    }
    with pytest.warns(UserWarning, match="more than 1.5x the best constant run"):
        cli._warn_plan_worse(d)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cli._warn_plan_worse({"predicted": {"samples_to_target": 25_000}, "constant": d["constant"]})


def test_batch_per_log_for_a_sweep_of_trainer_states(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """trainer_state.json holds no batch: a sweep of them needs one --batch per log (LOG=N)."""
    import shutil

    for d in ("b8", "b16"):
        (tmp_path / d).mkdir()
        shutil.copy(TRL / "trainer_state.json", tmp_path / d / "trainer_state.json")
    a, b = str(tmp_path / "b8" / "trainer_state.json"), str(tmp_path / "b16" / "trainer_state.json")
    d = _json(capsys, ["fit", a, b, "--batch", f"{a}=8", "--batch", f"{b}=16", "--json"])
    assert [r["batch"] for r in d["runs"]] == [8, 16]
    assert cli.main(["fit", a, b, "--batch", "nowhere.json=8"]) == 2
    assert "no such log" in capsys.readouterr().err
    assert cli.main(["fit", a, "--batch", "x"]) == 2
