"""The collapse watch: alarms raised once, acted on by the driver (checkpoint, hook, console) and by
``rlvr-schedule watch`` (--on-alarm, --exit-on-failure, a missing path)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.fixtures.real_runs import load_real, raw_path
from rlvr_schedule import cli
from rlvr_schedule.clocks.failure.alarms import DIAGNOSTIC_WARNINGS, CollapseWatch
from rlvr_schedule.driver import ScheduleDriver
from rlvr_schedule.plugins import PluginHost, hookimpl
from rlvr_schedule.policy import StaticSchedule
from rlvr_schedule.records import Stage

#: a real TRL run that collapsed (reward below half its best from step 105 on, labelled in
#: tests/data/real/runs): responses surge at step 80 (a diagnostic: it fires on most healthy trainer
#: runs), the reward's fall is a failure at step 120 (reward_fall), the reward crash's at step 140
COLLAPSED = "trl_exp1a_rho0p10_seed43"
FAILURE_STEP = 120


def test_the_watch_raises_each_kind_once_and_keeps_diagnostics_apart() -> None:
    run = load_real(COLLAPSED)
    w = CollapseWatch().fit(run.records)
    keys = [(a.kind, a.name) for a in w.alarms_]
    assert len(keys) == len(set(keys))  # once per detector and kind
    assert ("failure", "reward_crash") in keys
    first = w.alarms_[0]
    assert (first.kind, first.name, first.step) == ("failure", "reward_fall", 120)  # the first raised
    assert any(a.name == "reward_crash" and a.step == 120 for a in w.diagnostics_)  # its warning: shown
    assert not {a.name for a in w.alarms_ if a.kind == "warning"} & DIAGNOSTIC_WARNINGS
    assert any(a.name == "response_length" and a.step < 105 for a in w.diagnostics_)  # shown, not raised
    everything = CollapseWatch(raised=["response_length"]).fit(run.records)
    assert everything.alarms_[0].name == "response_length" and everything.alarms_[0].step == 80


def test_each_raised_warning_kind_fires_on_at_most_a_tenth_of_the_healthy_calibration_runs() -> None:
    """The rule that split raised kinds from diagnostics (docs/RESULTS.md section 5), on the real runs'
    calibration half; the failures stay at none on healthy runs."""
    from benchmarks.fixtures.real_runs import SPLIT

    healthy = [n for n in SPLIT["calibration"] if SPLIT["labels"][n]["label"] == "healthy"]
    fired: dict[str, int] = {}
    for name in healthy:
        w = CollapseWatch().fit(load_real(name).records)
        assert not [a for a in w.alarms_ if a.kind == "failure"], name
        for kind in {a.name for a in w.alarms_}:
            fired[kind] = fired.get(kind, 0) + 1
    assert len(healthy) == 31
    assert all(n <= 0.1 * len(healthy) for n in fired.values()), fired


def test_the_watch_state_round_trips_so_a_resumed_run_does_not_raise_again() -> None:
    recs = load_real(COLLAPSED).records
    a = CollapseWatch()
    a.fit(recs[:20])
    b = CollapseWatch()
    b.load_state_dict(json.loads(json.dumps(a.state_dict())))
    rest_a = [x.to_dict() for r in recs[20:] for x in a.update(r)]
    rest_b = [x.to_dict() for r in recs[20:] for x in b.update(r)]
    assert rest_a == rest_b and rest_a


def test_the_failure_clock_at_its_lower_bound_is_an_alarm() -> None:
    class Clock:
        used_ = 0.0

    clock = Clock()
    recs = load_real(COLLAPSED).records[:6]
    w = CollapseWatch(detectors=[], clock=clock)
    assert w.update(recs[0]) == []
    clock.used_ = 1.0
    (alarm,) = w.update(recs[1])
    assert alarm.name == "failure_clock" and alarm.kind == "warning"
    assert w.update(recs[2]) == []  # once


class _Alarms:
    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def rlvr_schedule_on_alarm(self, alarm, record) -> None:  # type: ignore[no-untyped-def]
        self.seen.append(f"{alarm.kind}:{alarm.name}@{record.step}")


def _drive(advisory: bool, **kw):  # type: ignore[no-untyped-def]
    host = PluginHost(load_entrypoints=False, strict=True)
    plugin = _Alarms()
    host.register(plugin)
    saved: list[tuple[list[str], int]] = []

    def save(alarms, record):  # type: ignore[no-untyped-def]
        saved.append(([a.name for a in alarms], record.step))
        return f"alarm-checkpoint-{record.step}"

    sched = StaticSchedule([Stage(batch=512, lr=1e-6)])
    driver = ScheduleDriver(
        sched, None if advisory else (lambda b, lr: True), host, advisory=advisory, save=save, **kw
    )
    for rec in load_real(COLLAPSED).records:
        driver.observe(rec)
    return driver, plugin, saved


def test_advisory_mode_checkpoints_at_each_alarm_and_calls_the_hook(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="rlvr_schedule.console"):
        driver, plugin, saved = _drive(advisory=True)
    assert saved and saved[0][1] == 120 == FAILURE_STEP  # the first checkpoint: at the raised failure
    assert [c["step"] for c in driver.alarm_checkpoints] == [s for _, s in saved]
    assert driver.alarm_checkpoints[0]["path"] == f"alarm-checkpoint-{saved[0][1]}"
    assert driver.alarm_checkpoints[0]["samples"] > 0  # which rollouts it holds
    assert len(plugin.seen) == len(driver.watch.alarms_) and "failure:reward_crash@140" in plugin.seen
    lines = [r.getMessage() for r in caplog.records if r.name == "rlvr_schedule.console"]
    assert any("failure at step 140" in line for line in lines)
    assert any("checkpoint at the alarm" in line for line in lines)
    state = json.loads(json.dumps(driver.state_dict()))
    again = ScheduleDriver(StaticSchedule([Stage(batch=512, lr=1e-6)]), advisory=True)
    again.load_state_dict(state)
    assert again.alarm_checkpoints == driver.alarm_checkpoints


def test_applied_mode_checkpoints_only_when_asked() -> None:
    assert _drive(advisory=False)[2] == []
    assert _drive(advisory=False, checkpoint_on_alarm=True)[2]
    assert _drive(advisory=True, checkpoint_on_alarm=False)[2] == []


def test_a_raising_save_is_a_fault_not_a_crash() -> None:
    def save(alarms, record):  # type: ignore[no-untyped-def]
        raise OSError("disk full")

    driver = ScheduleDriver(StaticSchedule([Stage(batch=512, lr=1e-6)]), advisory=True, save=save)
    for rec in load_real(COLLAPSED).records:
        driver.observe(rec)
    assert any(where == "save" for _, where, _ in driver.faults)
    assert driver.alarm_checkpoints == []


def test_a_switch_is_one_console_line_with_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    sched = StaticSchedule([Stage(batch=8, lr=1e-6, until_samples=200), Stage(batch=16, lr=1.4e-6)])
    driver = ScheduleDriver(sched, lambda b, lr: True, watch=False)
    with caplog.at_level(logging.INFO, logger="rlvr_schedule.console"):
        for rec in load_real(COLLAPSED).records[:12]:
            driver.observe(rec)
    lines = [r.getMessage() for r in caplog.records if r.name == "rlvr_schedule.console"]
    assert len(lines) == 1 and "now 16 rollouts/update" in lines[0] and "step 25" in lines[0]


# -- rlvr-schedule watch --------------------------------------------------------------------------


def test_watch_on_a_missing_path_is_an_error_with_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.jsonl"
    assert cli.main(["watch", str(missing)]) == 2
    assert "no such file" in capsys.readouterr().err
    assert cli.main(["watch", str(missing), "--until-idle", "0.1"]) == 2
    assert f"{missing}: no such file" in capsys.readouterr().err


def test_watch_runs_the_alarm_command_once_per_alarm_and_exits_on_failure(tmp_path: Path) -> None:
    out = tmp_path / "alarms.jsonl"
    cmd = f"{sys.executable} -c \"import sys; open({str(out)!r}, 'a').write(sys.stdin.read() + chr(10))\""
    args = ["watch", str(raw_path(COLLAPSED)), "--interval", "0.01", "--until-idle", "0.2", "--on-alarm", cmd]
    proc = subprocess.run(
        [sys.executable, "-m", "rlvr_schedule.cli", *args, "--exit-on-failure"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == cli.EXIT_FAILURE, proc.stderr
    alarms = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    assert alarms[-1]["kind"] == "failure" and alarms[-1]["name"] == "reward_fall"
    assert alarms[-1]["step"] == FAILURE_STEP and alarms[-1]["log"] == str(raw_path(COLLAPSED))
    assert len({(a["kind"], a["name"]) for a in alarms}) == len(alarms)
    assert alarms[0]["step"] <= FAILURE_STEP  # nothing raised after the failure before it
    out.unlink()
    proc = subprocess.run(
        [sys.executable, "-m", "rlvr_schedule.cli", *args], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr  # without --exit-on-failure: reads to the end
    assert len(out.read_text().splitlines()) > len(alarms)  # the later warning too


#: docs/RESULTS.md section 5a: per real collapse, the collapse step (labelled), the step of the
#: checkpoint the watch takes (its first raised alarm) and the step its failure is raised
REAL_CHECKPOINTS = {
    "trl_exp1a_rho0p10_seed43": (105, 120, 120),
    "trl_exp1a_rho0p30_seed43": (85, 95, 100),
    "trl_exp1a_rho1p00_seed42": (135, 50, 150),
    "trl_exp2_adabalance_seed42": (75, 85, 85),
    "trl_exp1a_rho0p30_seed42": (20, 30, 35),
    "trl_exp1a_rho0p50_seed43": (40, 50, 50),
    "trl_exp1a_rho1p00_seed43": (30, 35, 45),
    "trl_exp2_adabalance_seed43": (35, 35, 55),
}


@pytest.mark.parametrize("name", sorted(REAL_CHECKPOINTS))
def test_the_checkpoint_the_watch_takes_on_each_real_collapse(name: str) -> None:
    from benchmarks.fixtures.real_runs import SPLIT

    collapse, checkpoint, failure = REAL_CHECKPOINTS[name]
    label = SPLIT["labels"][name]
    assert label["label"] == "collapsed" and label["collapse_step"] == collapse
    w = CollapseWatch().fit(load_real(name).records)
    assert w.alarms_[0].step == checkpoint  # the first raised alarm: where the checkpoint is taken
    assert min(a.step for a in w.alarms_ if a.kind == "failure") == failure
