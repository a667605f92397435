"""What a new user meets first on the core's side: the sweep -> plan path on a short sweep, the
example schedules from any directory, and B* from runs that never progressed."""

from __future__ import annotations

import pytest

from rlvr_schedule.planner import plan_schedule
from rlvr_schedule.policy.price import StepTimeFit
from rlvr_schedule.synthetic import make_sweep


def test_a_price_measured_as_0_is_not_identified():
    # step times proportional to the batch: no per-update cost, so the fit's intercept is <= 0
    b = [8, 8, 8, 16, 16, 16]
    t = [0.8, 0.8, 0.79, 1.61, 1.6, 1.6]
    fit = StepTimeFit().fit(b, t, "sweep")
    assert fit.unidentified_ is not None and "not above 0" in fit.unidentified_


def test_a_price_whose_interval_spans_0_is_not_identified():
    # a small intercept buried in noise: the point estimate is positive, its interval is not
    b = [8, 8, 8, 8, 16, 16, 16, 16]
    t = [1.0, 1.6, 0.7, 1.3, 2.2, 1.7, 2.6, 1.9]
    fit = StepTimeFit().fit(b, t, "sweep")
    assert fit.price_ > 0 and fit.price_interval_[0] == 0.0
    assert fit.unidentified_ is not None and "spans 0" in fit.unidentified_


def test_plan_on_a_two_batch_sweep_proposes_only_whole_groups_and_says_why_the_default_price():
    runs = make_sweep([8, 16], critical_batch=12, failure_samples=5000, seed=0)
    for r in runs:  # step times proportional to the batch, as a tiny CPU model logs them
        for rec in r.records:
            rec.extra["step_time"] = 0.1 * rec.batch
    plan = plan_schedule(runs)
    assert plan.price["source"] == "default"
    assert any("price not identified" in n and "not above 0" in n for n in plan.notes)
    assert all(st.batch >= 8 and st.batch % 8 == 0 for st in plan.stages), [st.batch for st in plan.stages]
    assert any("greatest common divisor" in n for n in plan.notes)


def test_the_example_schedules_ship_with_the_package_and_load_from_a_path_or_a_mapping(tmp_path, monkeypatch):
    from rlvr_schedule.examples import schedule_names, schedule_path
    from rlvr_schedule.policy import load_schedule, read_config

    monkeypatch.chdir(tmp_path)  # not the repository root
    assert {"two_clock.yaml", "static_three_stage.yaml", "two_clock_auto.yaml"} <= set(schedule_names())
    for name in schedule_names():
        if "host" in read_config(schedule_path(name)).values():
            continue  # filled in by an adapter at train start (tests/trl)
        from_file = load_schedule(schedule_path(name))
        from_dict = load_schedule(dict(read_config(schedule_path(name))))
        assert type(from_dict) is type(from_file)
        assert from_dict.current == from_file.current


def test_wandb_console_logs_are_named_by_their_run_id(tmp_path, capsys):
    """Three ``wandb/run-*/files/output.log``: three runs named by id, not three named ``files``."""
    import gzip
    from pathlib import Path

    from rlvr_schedule.cli import main
    from rlvr_schedule.ingest import load_run

    raw = Path(__file__).resolve().parents[1] / "data" / "real" / "runs" / "raw"
    logs = []
    for run_id, seed in (("a1b2c3d4", 42), ("e5f6g7h8", 43), ("i9j0k1l2", 44)):
        log = tmp_path / "wandb" / f"run-20261207_101500-{run_id}" / "files" / "output.log"
        log.parent.mkdir(parents=True)
        log.write_bytes(gzip.decompress((raw / f"trl_exp1a_rho0p10_seed{seed}.log.gz").read_bytes()))
        logs.append(log)
    assert [load_run(p).name for p in logs] == ["run-a1b2c3d4", "run-e5f6g7h8", "run-i9j0k1l2"]
    assert main(["fit", *map(str, logs), "--json"]) == 0
    assert "run-a1b2c3d4" in capsys.readouterr().out


def test_no_critical_batch_from_runs_that_never_progressed(capsys):
    """The two-run Unsloth console: one run with zero rate, one that "reached" its target at 0
    rollouts; B* is not identified, with the reason."""
    from pathlib import Path

    from rlvr_schedule.cli import main
    from rlvr_schedule.clocks import fit_sweep
    from rlvr_schedule.ingest import load_runs

    log = Path(__file__).resolve().parents[1] / "data" / "real" / "formats" / "unsloth_console"
    fit = fit_sweep(load_runs(log))
    assert fit.critical_batch != fit.critical_batch  # NaN: not identified
    why = fit.unidentified()["critical_batch"]
    assert "reached the target at 0 rollouts" in why and "no progress" in why
    main(["fit", str(log)])
    out = capsys.readouterr().out
    assert "B*: not identified" in out and "(no interval)" not in out.splitlines()[0]


@pytest.mark.parametrize("lrs,warned", [((0.0, 1e-4, 1e-4, 5e-5, 0.0), False), ((1e-4, 0.0, 1e-4), True)])
def test_a_decay_to_zero_lr_is_not_warned_about(tmp_path, capsys, lrs, warned):
    """A warm-up from 0 and a decay to 0 are ordinary schedules; a 0 between positive LRs is not."""
    from rlvr_schedule import cli
    from rlvr_schedule.ingest import write_jsonl
    from rlvr_schedule.records import StepRecord

    n = 40
    per = [lrs[min(i * len(lrs) // n, len(lrs) - 1)] for i in range(n)]
    recs = [
        StepRecord(step=i + 1, samples=8 * (i + 1), batch=8, lr=lr, reward_mean=0.01 * i)
        for i, lr in enumerate(per)
    ]
    path = tmp_path / "run.jsonl"
    write_jsonl(path, recs)
    cli.main(["fit", str(path)])
    assert ("pass --base-lr" in capsys.readouterr().err) is warned


def test_a_switch_reason_is_one_plain_sentence_on_the_console_and_its_arithmetic_stays_in_the_json():
    from rlvr_schedule.driver import ScheduleDriver
    from rlvr_schedule.records import Decision

    why = (
        "failure clock: 0.89 of the rollouts left at the stage's start spent (>= 0.882; sweep's clock "
        "17917, lower bound 9141.1; 1029.1 rollouts left at batch 104): batch x 1.23077, LR x 1.23077^0"
    )
    d = Decision(step=40, samples=17_917, batch=128, lr=4e-4, stage=1, switched=True, reason=why)
    line = ScheduleDriver._switch_line(type("D", (), {"advisory": False})(), d)  # type: ignore[arg-type]
    assert line.endswith("failure clock: 89% of the rollouts left at the stage's start spent"), line
    assert "1.23077" not in line and "9141" not in line
    assert d.to_dict()["reason"] == why  # the JSON keeps the arithmetic


def test_the_report_states_b_star_and_the_failure_clock_as_fit_prints_them(tmp_path, capsys):
    """Counts of rollouts read the same in ``fit`` and in the report (whole numbers); a one-run
    report says B* is not identified, and why."""
    from rlvr_schedule.cli import main
    from rlvr_schedule.ingest import write_jsonl

    runs = make_sweep(
        [16, 32, 64, 128], critical_batch=64, failure_samples=20_000, seed=0, max_samples=30_000
    )
    paths = []
    for r in runs:
        paths.append(str(tmp_path / f"{r.name}.jsonl"))
        write_jsonl(paths[-1], r.records)
    assert main(["fit", *paths]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("critical batch B*"))
    bstar = line.split(": ", 1)[1].split(" (")[0]
    assert main(["report", *paths, "--out", str(tmp_path / "r")]) == 0
    md = (tmp_path / "r" / "index.md").read_text()
    row = next(ln for ln in md.splitlines() if ln.startswith("| critical batch B*"))
    assert row.split(" | ")[1] == bstar, (row, line)
    assert main(["report", paths[0], "--out", str(tmp_path / "one")]) == 0
    assert "B* is not identified" in (tmp_path / "one" / "index.md").read_text()
