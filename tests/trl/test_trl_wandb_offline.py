"""A real TRL GRPO run logging to W&B offline (``report_to="wandb"``, ``WANDB_MODE=offline``):
``fit``, ``report`` and ``watch`` read its run directory, with the records its console log gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from rlvr_schedule import cli
from rlvr_schedule.ingest import detect_format, load_run

pytest.importorskip("wandb")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SCRIPT = """
import sys
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from trl import GRPOConfig, GRPOTrainer
from trl_grpo_cpu import make_tiny_model, prompt_dataset, repeat_first_word

out = Path(sys.argv[1])
tok = make_tiny_model(out / "tiny-model")
args = GRPOConfig(
    output_dir=str(out / "run"), per_device_train_batch_size=4, num_generations=4,
    gradient_accumulation_steps=2, max_completion_length=6, max_steps=8, learning_rate=1e-3,
    lr_scheduler_type="cosine", warmup_steps=2, logging_steps=2, save_strategy="no",
    use_cpu=True, bf16=False, beta=0.0, report_to=["wandb"], run_name="tiny-grpo",
    disable_tqdm=False, log_level="info", seed=0,
)
GRPOTrainer(model=str(out / "tiny-model"), reward_funcs=repeat_first_word, args=args,
            train_dataset=prompt_dataset(32), processing_class=tok).train()
"""


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(W&B run directory, console log) of one tiny GRPO run."""
    out = tmp_path_factory.mktemp("trl-wandb")
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(out),
        "WANDB_SILENT": "true",
        "WANDB_DISABLE_GIT": "true",
        "WANDB_PROJECT": "rlvr-schedule-test",
    }
    log = out / "train.log"
    with open(log, "w", encoding="utf-8") as fh:
        subprocess.run(
            [sys.executable, "-c", SCRIPT, str(out), str(EXAMPLES)],
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            check=True,
            timeout=900,
            cwd=out,
        )
    (run_dir,) = [p for p in (out / "wandb").glob("offline-run-*") if p.is_dir()]
    return run_dir, log


def _quiet(fn, *a, **k):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


def test_the_run_directory_gives_the_records_of_the_console_log(offline_run: tuple[Path, Path]) -> None:
    run_dir, log = offline_run
    assert detect_format(run_dir) == "wandb" and detect_format(log) == "trl-console"
    wb, console = _quiet(load_run, run_dir), _quiet(load_run, log)
    assert [r.step for r in wb.records] == [r.step for r in console.records] == [2, 4, 6, 8]
    assert [r.samples for r in wb.records] == [r.samples for r in console.records] == [16, 32, 48, 64]
    assert wb.batch == console.batch == 8
    # W&B's console capture starts after the Trainer's header: the batch is the config's
    assert (
        "per_device_train_batch_size 4 x gradient_accumulation_steps 2 x 1 process" in wb.meta["batch_source"]
    )
    for a, b in zip(wb.records, console.records, strict=True):  # the console rounds to 4 digits
        assert a.reward_mean == pytest.approx(b.reward_mean, rel=1e-3, abs=1e-4)
        assert a.lr == pytest.approx(b.lr, rel=1e-3)
        assert a.entropy == pytest.approx(b.entropy, rel=1e-3, abs=1e-4)


def test_fit_report_and_watch_read_the_run_directory(
    offline_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, log = offline_run
    assert _quiet(cli.main, ["fit", str(run_dir), "--json"]) == 0
    wb = json.loads(capsys.readouterr().out)["runs"]
    assert _quiet(cli.main, ["fit", str(log), "--json"]) == 0
    console = json.loads(capsys.readouterr().out)["runs"]
    assert [r["batch"] for r in wb] == [r["batch"] for r in console] == [8]
    assert wb[0]["lr"] == pytest.approx(console[0]["lr"], rel=1e-3)  # the LR after warm-up, both ways
    assert _quiet(cli.main, ["report", str(run_dir), "--out", str(tmp_path / "rep")]) == 0
    assert any((tmp_path / "rep").iterdir())
    capsys.readouterr()
    assert (
        _quiet(cli.main, ["watch", str(run_dir), "--json", "--max-records", "4", "--interval", "0.01"]) == 0
    )
    last = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert last["at"] == "step 8" and last["samples"] == 64
