"""Every raised alarm names both ends: where its condition began (``onset_step``/``onset_rollouts``,
the failure clock's reading) and where it was raised (``raised_step``/``raised_rollouts``, what a host
acts on), in ``fit --json``, ``watch --json`` and the ``--on-alarm`` payload; the console says each
thing once."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks.fixtures.real_runs import raw_path
from rlvr_schedule import cli

COLLAPSED = "trl_exp1a_rho0p30_seed43"  # collapse point step 85 (tests/data/real/runs/SPLIT.json)
ENDS = ("onset_step", "onset_rollouts", "raised_step", "raised_rollouts", "checkpoint")


def test_fit_json_names_the_onset_and_the_raise(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["fit", str(raw_path(COLLAPSED)), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["runs"][0]
    a = row["failure_alarm"]
    assert a["onset_step"] == a["step"] and a["onset_rollouts"] == row["failure_samples"]
    assert a["raised_step"] >= a["onset_step"] and a["raised_rollouts"] >= a["onset_rollouts"]


def test_watch_json_and_the_hook_payload_name_both_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "payloads.jsonl"
    hook = f"{sys.executable} -c \"import sys; open({str(out)!r}, 'a').write(sys.stdin.read() + '\\n')\""
    assert (
        cli.main(
            [
                "watch",
                str(raw_path(COLLAPSED)),
                "--until-idle",
                "0.2",
                "--interval",
                "0.05",
                "--json",
                "--on-alarm",
                hook,
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    status = [json.loads(x) for x in captured.out.splitlines() if x.startswith("{")]
    raised = [a for st in status for a in st["raised"]]
    assert raised and all(all(k in a for k in ENDS) for a in raised)
    fail = status[-1]["failure_raised"]
    assert fail is not None and fail["kind"] == "failure" and fail["onset_step"] <= fail["raised_step"]
    payloads = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(p["name"], p["raised_step"]) for p in payloads] == [
        (a["name"], a["raised_step"]) for a in raised
    ]
    assert all(all(k in p for k in ENDS) for p in payloads)
    # the console: each thing once
    assert "warning: warning" not in captured.err and "failure at -" not in captured.out
    line = cli._watch_line("end", status[-1])
    assert "failure raised at step" in line and "failure forecast" not in line


def test_a_host_logging_every_k_updates_gets_a_set_up_warning_once() -> None:
    from benchmarks.fixtures.real_runs import load_real
    from rlvr_schedule.driver import ScheduleDriver
    from rlvr_schedule.policy.static import StaticSchedule

    driver = ScheduleDriver(
        StaticSchedule([{"batch": 8, "lr": 1e-6}]), advisory=True, announce=lambda s: None
    )
    for rec in load_real(COLLAPSED).records[:6]:  # a TRL console log: a record every 5 updates
        driver.observe(rec)
    notes = [n for n in driver.setup_warnings if "every 5 updates" in n]
    assert len(notes) == 1 and "logging_steps=1" in notes[0]
