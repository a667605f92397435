"""Several runs in one console file: one rule (a new banner that is not a resume, a step that goes
back, a changed config) in both console formats; ``fit`` reports each run."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from rlvr_schedule import cli
from rlvr_schedule.errors import IngestWarning
from rlvr_schedule.ingest import load_run, load_runs

FORMATS = Path(__file__).resolve().parents[1] / "data" / "real" / "formats"
UNSLOTH = FORMATS / "unsloth_console" / "train_grpo.log.gz"


def _runs(path: Path, match: str) -> list:
    with pytest.warns(IngestWarning, match=match):
        return load_runs([path])


# -- verl --------------------------------------------------------------------------------------


def _verl_config(batch: int, n: int = 4, lr: str = "1e-06") -> str:
    return (
        f"(TaskRunner pid=7) {{'actor_rollout_ref': {{'actor': {{'optim': {{'lr': {lr}}}}},\n"
        f"(TaskRunner pid=7)                        'rollout': {{'n': {n}}}}},\n"
        f"(TaskRunner pid=7)  'data': {{'train_batch_size': {batch}}}}}\n"
    )


def _verl_steps(steps: range, reward0: float = 0.0) -> str:
    return "".join(
        f"(TaskRunner pid=7) step:{s} - actor/lr:np.float64(1e-06) - "
        f"critic/score/mean:np.float64({reward0 + s / 100:.3f}) - actor/entropy:0.5\n"
        for s in steps
    )


def test_verl_a_new_start_with_the_same_config_is_a_second_run(tmp_path: Path) -> None:
    p = tmp_path / "verl.log"
    p.write_text(_verl_config(16) + _verl_steps(range(1, 6)) + _verl_config(16) + _verl_steps(range(1, 4)))
    first, second = _runs(p, r"holds 2 training runs: lines 4-8; lines 12-14 \(the step goes back")
    assert [r.step for r in first.records] == [1, 2, 3, 4, 5] and [r.step for r in second.records] == [
        1,
        2,
        3,
    ]
    assert first.name == "verl#1" and second.name == "verl#2" and first.batch == second.batch == 64
    with pytest.warns(IngestWarning, match=r"2 training runs .* 5 step line\(s\) of lines 4-8 dropped"):
        last = load_run(p)  # one run asked for: the last, said so
    assert [r.step for r in last.records] == [1, 2, 3]


def test_verl_a_step_that_goes_back_without_a_banner_is_a_second_run(tmp_path: Path) -> None:
    p = tmp_path / "verl.log"
    p.write_text(_verl_config(16) + _verl_steps(range(1, 6)) + _verl_steps(range(2, 5), reward0=0.5))
    runs = _runs(p, r"lines 9-11 \(the step goes back \(2 after 5\), step:2 at line 9\)")
    assert [len(r) for r in runs] == [5, 3] and runs[1].records[0].reward_mean == pytest.approx(0.52)


def test_verl_a_changed_config_is_a_second_run_and_a_resume_is_not(tmp_path: Path) -> None:
    p = tmp_path / "verl.log"
    resumed = _verl_config(16) + _verl_steps(range(6, 9))  # printed again, steps go on: one run
    changed = _verl_config(32, lr="2e-06") + _verl_steps(range(9, 12))  # steps go on, config does not
    p.write_text(_verl_config(16) + _verl_steps(range(1, 6)) + resumed + changed)
    first, second = _runs(p, r"a changed config at line 15 \(train_batch_size 16 -> 32, lr 1e-06 -> 2e-06\)")
    assert [r.step for r in first.records] == list(range(1, 9)) and first.batch == 64
    assert [r.step for r in second.records] == [9, 10, 11] and second.batch == 128
    assert second.records[0].lr == pytest.approx(1e-6)  # the printed LR wins over the config's


def test_verl_a_changed_command_line_is_a_second_run(tmp_path: Path) -> None:
    p = tmp_path / "verl.log"
    cmd = "python3 -m verl.trainer.main_ppo data.train_batch_size={} actor_rollout_ref.rollout.n=4\n"
    p.write_text(cmd.format(16) + _verl_steps(range(1, 4)) + cmd.format(8) + _verl_steps(range(4, 7)))
    runs = _runs(p, r"a changed command line before line 6 \(train_batch_size 16 -> 8\)")
    assert [r.batch for r in runs] == [64, 32]


# -- TRL / transformers / Unsloth --------------------------------------------------------------

HEADER = (
    "***** Running training *****\n"
    "  Total train batch size (w. parallel, distributed & accumulation) = {batch}\n"
    "  Total optimization steps = {steps}\n"
)


def _trl_dicts(steps: range, reward0: float = 0.0) -> str:
    return "".join(
        f"{{'loss': 0.01, 'reward': np.float64({reward0 + s / 100}), 'learning_rate': 1e-06, "
        f"'step': {s}, 'epoch': {s / 10}}}\n"
        for s in steps
    )


def test_trl_a_step_that_goes_back_without_a_header_is_a_second_run(tmp_path: Path) -> None:
    p = tmp_path / "trl.log"
    p.write_text(HEADER.format(batch=8, steps=5) + _trl_dicts(range(1, 6)) + _trl_dicts(range(1, 4), 0.5))
    first, second = _runs(
        p, r"holds 2 training runs: lines 4-8; lines 9-11 \(the step goes back \(1 after 5\)"
    )
    assert [r.step for r in first.records] == [1, 2, 3, 4, 5] and [r.step for r in second.records] == [
        1,
        2,
        3,
    ]
    assert second.batch == 8 and second.records[0].reward_mean == pytest.approx(0.51)


def test_trl_a_header_with_a_changed_batch_is_a_second_run_even_when_it_resumes(tmp_path: Path) -> None:
    p = tmp_path / "trl.log"
    p.write_text(
        HEADER.format(batch=8, steps=6)
        + _trl_dicts(range(1, 4))
        + HEADER.format(batch=16, steps=6)
        + "  Continuing training from global step 3\n"
        + _trl_dicts(range(4, 7))
    )
    first, second = _runs(p, r"a changed config at line 7 \(batch 8 -> 16\)")
    assert (first.batch, second.batch) == (8, 16) and [r.step for r in second.records] == [4, 5, 6]


def test_fit_on_the_real_unsloth_file_reports_its_two_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """johnson7788/RLDecisionAgent's train_grpo.log: two GRPO runs after two Unsloth banners
    (batch 32, lines 163-412; batch 4, lines 517-627): two rows, not one of 27."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main(["fit", str(UNSLOTH), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["batch"]) for r in out["runs"]] == [("train_grpo#1", 32), ("train_grpo#2", 4)]
    runs = _runs(UNSLOTH, r"holds 2 training runs: lines 163-412; lines 517-626 \(a changed config")
    assert [len(r) for r in runs] == [20, 27]
    assert runs[0].records[0].grad_norm != runs[0].records[0].grad_norm  # 'grad_norm': nan at line 163


def test_verl_a_resume_that_logs_steps_again_stays_one_run(tmp_path: Path) -> None:
    """Killed after step 7, resumed from the checkpoint of step 5: config printed again, steps 6..9."""
    p = tmp_path / "verl.log"
    p.write_text(
        _verl_config(16) + _verl_steps(range(1, 8)) + _verl_config(16) + _verl_steps(range(6, 10), 0.5)
    )
    with pytest.warns(IngestWarning, match="step 6 logged again"):
        (run,) = load_runs([p])
    assert [r.step for r in run.records] == list(range(1, 10))
    assert run.records[5].reward_mean == pytest.approx(0.56)  # the resumed run's step 6
