"""``watch`` under an appender: a log rotated by rename, truncated in place (copy-truncate), restarted
from step 1, and deleted, while a writer appends. Each case is said once; rotation loses nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.fixtures.bad_inputs import jsonl, rows
from rlvr_schedule import cli


def _watch(log: Path, write) -> tuple[int, list[dict], str]:
    """Run ``watch --json`` on ``log`` while ``write(log)`` appends; (status, refreshes, stderr)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlvr_schedule.cli",
            "watch",
            str(log),
            "--interval",
            "0.05",
            "--until-idle",
            "2",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the watch has read the log once: it follows it from here
    write(log)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, [json.loads(x) for x in (first + out).splitlines() if x.strip()], err


def _append(log: Path, rs: list[dict], pause: float = 0.02) -> None:
    for i in range(0, len(rs), 5):
        with open(log, "a") as fh:
            fh.write(jsonl(rs[i : i + 5]))
        time.sleep(pause)


def _start(tmp: Path) -> Path:
    log = tmp / "metrics.jsonl"
    log.write_text(jsonl(rows(60)[:5]))
    return log


def test_rename_rotation_loses_nothing(tmp_path: Path) -> None:
    def write(log: Path) -> None:
        _append(log, rows(60)[5:30])
        log.rename(log.with_name("metrics.jsonl.1"))  # records just written may not have been read yet
        _append(log, rows(60)[30:])

    rc, refreshes, err = _watch(_start(tmp_path), write)
    assert rc == 0, err
    assert refreshes[-1]["records"] == 60 and refreshes[-1]["step"] == 60
    assert err.count("rotated (renamed away") == 1


def test_copy_truncate_recovers_from_the_copy_or_counts_its_loss(tmp_path: Path) -> None:
    def write(log: Path) -> None:
        _append(log, rows(60)[5:30])
        shutil.copy(log, log.with_name("metrics.jsonl.1"))  # logrotate's copytruncate
        with open(log, "r+") as fh:
            fh.truncate(0)
        _append(log, rows(60)[30:])

    rc, refreshes, err = _watch(_start(tmp_path), write)
    assert rc == 0, err
    assert err.count("truncated in place") == 1 and "byte(s)" in err
    assert refreshes[-1]["step"] == 60 and refreshes[-1]["records"] == 60


def test_a_restart_from_step_1_is_read_as_a_new_run(tmp_path: Path) -> None:
    def write(log: Path) -> None:
        _append(log, rows(60)[5:40])
        time.sleep(0.3)
        _append(log, [{**r, "reward_mean": 0.05} for r in rows(25)])  # the same file, from step 1

    rc, refreshes, err = _watch(_start(tmp_path), write)
    assert rc == 0, err
    assert err.count("restarted from step 1: read as a new run") == 1
    assert refreshes[-1]["step"] == 25 and refreshes[-1]["records"] == 25  # the new run's clocks


def test_deletion_is_reported_once_with_its_exit_status(tmp_path: Path) -> None:
    def write(log: Path) -> None:
        _append(log, rows(60)[5:20])
        time.sleep(0.3)
        log.unlink()

    rc, refreshes, err = _watch(_start(tmp_path), write)
    assert rc == cli.EXIT_DELETED == 4, err
    assert err.count("deleted") == 2  # the follower's warning and the exit line, once each
    assert refreshes[-1]["records"] == 20
