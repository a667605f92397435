"""W&B run directories written by wandb itself (``wandb.init(mode="offline")`` in a subprocess):
the record reader's pinned behaviour, fit / report / watch on a run directory, the console
fallback, a run file read while it grows, and the error without wandb."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from rlvr_schedule import cli
from rlvr_schedule.errors import IngestError
from rlvr_schedule.ingest import detect_format, load_run, load_runs
from rlvr_schedule.ingest.follow import LogFollower
from rlvr_schedule.ingest.wandb_records import INSTALL_HINT, PINNED, scan

wandb = pytest.importorskip("wandb")

LOOP = """
import wandb
run = wandb.init(mode="offline", project="rlvr", config={"batch": 8, "optim": {"lr": 1e-6}})
for s in range(1, 31):
    wandb.log({"train/global_step": s, "reward": round(0.02 * s, 4), "entropy": round(1 - 0.02 * s, 4),
               "lr": 1e-6, "grads": {"norm": s / 10}})
    print(f"step {s} reward {0.02 * s:.2f}")
run.finish()
"""

CONSOLE_ONLY = """
import numpy as np, wandb
run = wandb.init(mode="offline", project="rlvr")
print("***** Running training *****")
print("  Total train batch size (w. parallel, distributed & accumulation) = 8")
for s in range(1, 7):
    print({"loss": np.float32(0.5), "reward": np.float64(s / 10), "learning_rate": 1e-06, "step": s})
run.finish()
"""

VERL = """
import wandb
cfg = {"data": {"train_batch_size": 16}, "actor_rollout_ref": {"rollout": {"n": 4}, "actor": {"optim": {"lr": 1e-6}}}}
run = wandb.init(mode="offline", project="rlvr", config=cfg)
for s in range(1, 6):  # as verl's Tracking logs: the global step as W&B's step
    wandb.log({"critic/score/mean": s / 10, "actor/entropy": 1 - s / 10, "actor/lr": 1e-6,
               "training/global_step": s}, step=s)
run.finish()
"""


def _write_run(tmp: Path, script: str) -> Path:
    """Run ``script`` with W&B offline under ``tmp``; the run directory it leaves."""
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp),
        "WANDB_SILENT": "true",
        "WANDB_DISABLE_GIT": "true",
    }
    subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, check=True, timeout=300, cwd=tmp)
    (run_dir,) = [p for p in (tmp / "wandb").glob("offline-run-*") if p.is_dir()]
    return run_dir


@pytest.fixture(scope="module")
def loop_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_run(tmp_path_factory.mktemp("loop"), LOOP)


@pytest.fixture(scope="module")
def console_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_run(tmp_path_factory.mktemp("console"), CONSOLE_ONLY)


def _quiet(fn, *a, **k):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


def test_the_pinned_wandb_writes_and_reads_records_as_this_reader_expects(loop_run: Path) -> None:
    """What the wrapper relies on in wandb's internal format; fails first when a new wandb changes it."""
    assert wandb.__version__ == PINNED
    (file,) = loop_run.glob("run-*.wandb")
    rec = scan(file)
    assert len(rec.history) == 30 and not rec.torn
    first = rec.history[0]
    # one row per wandb.log: values as logged, nested dicts as dotted keys, W&B's _step from 0
    assert first["reward"] == 0.02 and first["train/global_step"] == 1 and first["grads.norm"] == 0.1
    assert first["_step"] == 0 and rec.history[-1]["_step"] == 29
    assert rec.config["batch"] == 8 and rec.config["optim"] == {"lr": 1e-6}
    assert rec.run_id and file.name == f"run-{rec.run_id}.wandb"
    assert "step 1 reward 0.02" in rec.output and "step 30 reward 0.60" in rec.output  # console captured


def test_a_run_directory_reads_as_a_run_with_the_trainers_step(loop_run: Path) -> None:
    assert detect_format(loop_run) == "wandb"
    run = _quiet(load_run, loop_run)
    assert [r.step for r in run.records] == list(range(1, 31))  # train/global_step, not _step
    assert run.batch == 8 and run.meta["batch_source"] == "W&B config: batch 8"
    assert [r.reward_mean for r in run.records][:3] == pytest.approx([0.02, 0.04, 0.06])
    assert run.records[-1].entropy == pytest.approx(0.4) and run.records[-1].samples == 30 * 8
    (file,) = loop_run.glob("run-*.wandb")
    same = _quiet(load_run, file)  # the .wandb file alone
    assert [r.reward_mean for r in same.records] == [r.reward_mean for r in run.records]
    # the wandb/ folder: one run (latest-run and the debug.log links are not runs of their own)
    assert [r.name for r in _quiet(load_runs, loop_run.parent)] == [loop_run.name]


def test_fit_report_and_watch_take_a_run_directory(
    loop_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _quiet(cli.main, ["fit", str(loop_run), "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["batch"]) for r in fit["runs"]] == [(loop_run.name, 8)]
    assert _quiet(cli.main, ["report", str(loop_run), "--out", str(tmp_path / "rep")]) == 0
    assert (tmp_path / "rep").is_dir() and any((tmp_path / "rep").iterdir())
    capsys.readouterr()
    assert (
        _quiet(cli.main, ["watch", str(loop_run), "--json", "--max-records", "30", "--interval", "0.01"]) == 0
    )
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[-1]["at"] == "step 30" and lines[-1]["samples"] == 240


def test_watch_follows_a_run_file_as_it_grows(loop_run: Path, tmp_path: Path) -> None:
    """The file written in pieces (cut anywhere, also inside a record): each poll reads what is
    complete, nothing is read twice, and the end is the whole run."""
    (file,) = loop_run.glob("run-*.wandb")
    data = file.read_bytes()
    live = tmp_path / "offline-run-live" / file.name
    live.parent.mkdir()
    seen: list[int] = []
    torn = 0
    with LogFollower(live.parent) as follower:
        for cut in range(0, len(data) + 1, max(len(data) // 9, 1)):
            live.write_bytes(data[:cut])
            new = _quiet(follower.poll)
            seen += [r.step for r in new]
            torn += bool(follower.run is not None and follower.run.meta.get("wandb_torn"))
        live.write_bytes(data)
        seen += [r.step for r in _quiet(follower.poll)]
    assert seen == list(range(1, 31)) and torn >= 1


def test_a_run_with_no_history_is_read_from_its_console_output(console_run: Path, tmp_path: Path) -> None:
    run = _quiet(load_run, console_run)
    assert [r.step for r in run.records] == [1, 2, 3, 4, 5, 6] and run.batch == 8
    assert [r.reward_mean for r in run.records] == pytest.approx(
        [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    )  # np.float64(...)
    assert "console output in the run file" in run.meta["wandb_source"]
    # online runs keep the console as files/output.log: that file is read first
    copy = tmp_path / console_run.name
    subprocess.run(["cp", "-r", str(console_run), str(copy)], check=True)
    (copy / "files").mkdir(exist_ok=True)
    (copy / "files" / "output.log").write_text(
        "  Total train batch size (w. parallel, distributed & accumulation) = 16\n"
        + "".join(f"{{'reward': {s / 4}, 'step': {s}}}\n" for s in range(1, 4))
    )
    run = _quiet(load_run, copy)
    assert run.batch == 16 and [r.reward_mean for r in run.records] == [0.25, 0.5, 0.75]
    assert run.meta["wandb_source"].startswith("files/output.log")


def test_without_wandb_the_error_says_what_to_install(
    loop_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for mod in [m for m in sys.modules if m == "wandb" or m.startswith("wandb.")]:
        monkeypatch.setitem(sys.modules, mod, None)  # as if not installed
    with pytest.raises(IngestError, match=r"pip install 'rlvr-schedule\[wandb\]'") as exc:
        load_run(loop_run)
    assert INSTALL_HINT in str(exc.value)


def test_a_verl_run_takes_its_batch_from_the_nested_config(tmp_path: Path) -> None:
    run = _quiet(load_run, _write_run(tmp_path, VERL))
    assert [r.step for r in run.records] == [1, 2, 3, 4, 5] and run.batch == 64
    assert run.meta["batch_source"] == "W&B config: train_batch_size 16 x rollout.n 4"
    assert [r.reward_mean for r in run.records] == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])


def test_a_cut_run_file_is_named_as_truncated(loop_run: Path, tmp_path: Path) -> None:
    """A .wandb file cut mid-file (a bad copy, a full disk) reads the rows before the cut, with a
    warning that says the file is truncated and where; not a bare count of the rows left."""
    import shutil

    from rlvr_schedule.errors import IngestWarning
    from rlvr_schedule.ingest.wandb_run import wandb_run_file

    cut = tmp_path / loop_run.name
    shutil.copytree(loop_run, cut)
    f = wandb_run_file(cut)
    assert f is not None
    f.write_bytes(f.read_bytes()[: f.stat().st_size * 2 // 3])
    with pytest.warns(IngestWarning, match=r"truncated: the run file ends inside a record at byte \d+"):
        try:
            load_run(cut)
        except IngestError:
            pass  # too few rows left to be a run: the warning came first
