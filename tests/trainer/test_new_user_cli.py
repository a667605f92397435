"""The trainer's CLI as a new user meets it after the CPU install: the engine that will run, and
``--dry-run`` refusing what the user got wrong (exit 2 naming the field), before any weight loads."""

from __future__ import annotations

import json
import sys

import pytest

from rlvr_trainer import memory
from rlvr_trainer.cli import main


@pytest.fixture
def no_vllm(monkeypatch):
    """The CPU install without vLLM: ``import vllm`` fails, as it does there."""
    monkeypatch.setitem(sys.modules, "vllm", None)


def test_without_vllm_the_trainer_says_it_uses_hf_rollouts_and_dry_run_shows_that_engine(no_vllm, capsys):
    argv = ["sweep", "--batches", "8", "16", "--seeds", "0", "--max-samples", "256", "--dry-run"]
    assert main(argv) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["config"]["rollout"] == "hf"
    lines = [ln for ln in cap.err.splitlines() if "vLLM" in ln]
    assert len(lines) == 1 and "--rollout hf" in lines[0] and "pip install" in lines[0]


def test_vllm_asked_for_by_name_without_it_installed_is_exit_2_naming_the_install(no_vllm, capsys):
    assert main(["train", "--rollout", "vllm", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "--rollout" in err and "pip install" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv,names",
    [
        (["sweep", "--batches", "-8", "16"], ["--batches", "-8"]),
        (["sweep", "--batches", "8", "12"], ["--batches", "12", "group_size 8"]),
        (["sweep", "--batches", "8", "16", "--seeds", "-1"], ["--seeds"]),
    ],
)
def test_dry_run_refuses_bad_batches_and_seeds(argv, names, capsys):
    assert main([*argv, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert all(n in err for n in names), err


def test_dry_run_refuses_a_schedule_file_that_does_not_load(tmp_path, capsys):
    bad = tmp_path / "typo.yaml"
    bad.write_text("type: two_clock\ncritical_bach: 1024\n")
    assert main(["schedule", "--schedule", str(bad), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "typo.yaml" in err and "critical_bach" in err
    assert main(["schedule", "--schedule", str(tmp_path / "missing.yaml"), "--dry-run"]) == 2
    assert "missing.yaml" in capsys.readouterr().err


def test_the_trainer_refuses_a_planned_batch_below_its_group_size(tmp_path, capsys):
    """What ``plan`` wrote on a 2-batch sweep before it knew the group size: batch 1."""
    plan = tmp_path / "schedule.json"
    plan.write_text(
        json.dumps({"stages": [{"batch": 1, "lr": 1e-4, "until_samples": 64}, {"batch": 16, "lr": 1e-4}]})
    )
    for argv in (["--dry-run"], ["--max-samples", "64", "--no-progress", "--out", str(tmp_path / "o")]):
        assert main(["schedule", "--schedule", str(plan), *argv]) == 2
        err = capsys.readouterr().err
        assert "batch 1" in err and "group_size 8" in err and "stages[0].batch" in err


def test_dry_run_compares_the_estimate_with_the_machines_ram_and_refuses_beyond_its_error(
    monkeypatch, capsys
):
    gib = 2**30
    monkeypatch.setattr(memory, "machine_ram", lambda: 24 * gib, raising=False)
    argv = ["sweep", "--preset", "qwen2.5-math-1.5b", "--device", "cpu", "--rollout", "hf", "--dry-run"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "GiB" in err and "24.0 GiB" in err and "RAM" in err and "measured error" in err
    # the tiny model fits the same machine
    assert main(["train", "--device", "cpu", "--rollout", "hf", "--dry-run"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fits"] is True and out["device_memory_gib"] == 24.0
