"""One path from a sweep to a schedule, as a user runs it: ``rlvr-trainer sweep``'s output directory
through ``rlvr-schedule fit``, ``rlvr-schedule plan --out F`` and ``rlvr-trainer schedule --schedule
F``. The sweep's report and ``fit`` print one B* for the same runs, the plan starts where its config
says, and the trainer runs the plan file from its first stage. (Nothing here waits for the tiny model
to learn: where its short sweep identifies no B*, the plan takes B* from a two_clock file.)"""

from __future__ import annotations

import json

import pytest

from rlvr_schedule.cli import main as schedule_main
from rlvr_schedule.policy import BatchConstraints, PolicyConfig
from rlvr_schedule.policy.rules import operating_batch
from rlvr_trainer.cli import main as trainer_main


@pytest.mark.slow
def test_a_trainer_sweep_goes_through_fit_and_plan_to_the_trainers_schedule(tiny_model_dir, tmp_path, capsys):
    common = ["--max-samples", "48", "--rollout", "hf", "--model", str(tiny_model_dir), "--no-progress"]
    sweep = tmp_path / "sweep"
    assert trainer_main(["sweep", "--out", str(sweep), "--batches", "8", "16", *common]) == 0
    reported = json.loads((sweep / "report" / "summary.json").read_text())["fit"]
    capsys.readouterr()

    assert schedule_main(["fit", str(sweep), "--json"]) == 0  # the directory as the trainer wrote it
    fitted = json.loads(capsys.readouterr().out)
    assert sorted(r["name"] for r in fitted["runs"]) == ["sweep/b16-s0", "sweep/b8-s0"]
    assert fitted["critical_batch"] == reported["critical_batch"]  # one B*, also when none (null)

    plan_file = tmp_path / "plan.json"
    argv = ["plan", str(sweep), "--group-size", "8", "--out", str(plan_file), "--json"]
    if fitted["critical_batch"] is None:  # the short sweep identified none: state one
        two_clock = tmp_path / "two_clock.yaml"
        two_clock.write_text("type: two_clock\ncritical_batch: 40\nconstraints: {group_size: 8}\n")
        argv += ["--schedule", str(two_clock)]
    assert schedule_main(argv) == 0
    planned = json.loads(capsys.readouterr().out)
    bstar = fitted["critical_batch"] or 40.0
    assert planned["critical_batch"] == pytest.approx(bstar)
    first = planned["stages"][0]
    # the start: the batch cheapest at the plan's price (the sweep's step times, else the default) on
    # the grid of 8; a price measured as 0 (the tiny model's step times barely grow with the batch)
    # starts at the smallest runnable batch
    rho = planned["price"]["rollouts_per_update"]
    assert first["batch"] == operating_batch(PolicyConfig(), bstar, BatchConstraints(group_size=8), price=rho)

    out = tmp_path / "sched"
    assert trainer_main(["schedule", "--out", str(out), "--schedule", str(plan_file), *common]) == 0
    records = [json.loads(x) for x in (out / "schedule" / "s0" / "metrics.jsonl").read_text().splitlines()]
    assert records[0]["batch"] == first["batch"]
    assert {r["batch"] for r in records} <= {s["batch"] for s in planned["stages"]}
