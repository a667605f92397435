"""Readers on committed logs that trainers wrote (tests/data/real/formats/*/ORIGIN.md says whose).

The numbers asserted are the ones the log files show (grep them): nothing here was converted.
"""

from __future__ import annotations

import gzip
import math
import shutil
import warnings
from pathlib import Path

import pytest

from rlvr_schedule.errors import IngestError
from rlvr_schedule.ingest import ReadOptions, detect_format, load_run, load_runs, training_lr

FORMATS_DIR = Path(__file__).resolve().parents[1] / "data" / "real" / "formats"
VERL = FORMATS_DIR / "verl_console"
QWEN = VERL / "Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log.gz"
GEMMA = VERL / "gemma-2-2b-it-ppo-bsz512_4-prompt1024-resp-512-0.640.log.gz"
TRL = FORMATS_DIR / "trl_local"


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


# -- verl console ------------------------------------------------------------------------------


def test_verl_console_qwen_baseline_reads_unconverted() -> None:
    assert detect_format(QWEN) == "verl-console"
    run = _quiet(load_run, QWEN)
    # step:0 .. step:434 in the log, 256 prompts x 1 response per update (the printed config)
    assert [r.step for r in run.records[:2]] == [0, 1] and run.records[-1].step == 434
    assert len(run) == 435 and run.constant_batch and run.batch == 256
    assert run.records[-1].samples == 435 * 256
    assert (
        "config in the log" in run.meta["batch_source"]
        and "train_batch_size 256 x rollout.n 1" in run.meta["batch_source"]
    )
    first, last = run.records[0], run.records[-1]
    assert first.reward_mean == pytest.approx(0.012)  # critic/score/mean:0.012
    assert first.entropy == pytest.approx(0.526)  # actor/entropy_loss:0.526 (old name)
    assert first.grad_norm == pytest.approx(8.138)  # actor/grad_norm:8.138
    assert last.kl == pytest.approx(0.203)  # critic/kl:0.203 at step 434
    assert first.lr == pytest.approx(1e-6)  # actor/lr(1e-4):0.010
    assert run.meta["setup"]["model"] == "Qwen/Qwen2.5-0.5B-Instruct"


def test_verl_console_gemma_config_garbled_by_ray_falls_back_to_command_line() -> None:
    run = _quiet(load_run, GEMMA)
    assert run.batch == 512 and "command line in the log" in run.meta["batch_source"]
    assert run.records[0].step == 0 and run.records[-1].step == 105
    # the 'step:0 - test_score/openai/gsm8k:0.521' line joins the step-0 training record
    assert run.records[0].extra["test_score/openai/gsm8k"] == pytest.approx(0.521)
    assert run.records[0].reward_mean == pytest.approx(0.416)


def test_verl_console_plain_text_with_ansi_and_ray_prefixes(tmp_path: Path) -> None:
    plain = tmp_path / "train.log"
    with gzip.open(QWEN, "rt", encoding="utf-8") as fh:
        text = fh.read()
    assert "\x1b[36m(main_task pid=" in text  # the colour codes and Ray prefix are really there
    plain.write_text(text, encoding="utf-8")
    run = _quiet(load_run, plain)
    assert len(run) == 435 and run.batch == 256


def test_verl_console_batch_option_wins_with_a_warning() -> None:
    with pytest.warns(UserWarning, match="--batch 128 differs"):
        run = load_runs([QWEN], options=ReadOptions(batch=128))[0]
    assert run.batch == 128 and run.meta["batch_source"] == "option --batch"


def test_verl_console_without_config_needs_batch(tmp_path: Path) -> None:
    with gzip.open(QWEN, "rt", encoding="utf-8") as fh:
        steps = [line for line in fh if "step:" in line and " - " in line]
    log = tmp_path / "steps_only.log"
    log.write_text("".join(steps[:20]), encoding="utf-8")
    with pytest.raises(IngestError, match=r"steps_only.log.*--batch N"):
        load_run(log)
    run = _quiet(load_run, log, options=ReadOptions(batch=256))
    assert len(run) == 20 and run.records[-1].samples == 20 * 256


def test_verl_console_lr_printed_as_zero_comes_from_the_config(tmp_path: Path) -> None:
    """Newer verl prints 'actor/lr:0.000': the LR is the config's, through its warm-up."""
    log = tmp_path / "new.log"
    log.write_text(
        "(TaskRunner pid=7) {'actor_rollout_ref': {'actor': {'optim': {'lr': 1e-06}},\n"
        "(TaskRunner pid=7)                        'rollout': {'n': 5}},\n"
        "(TaskRunner pid=7)  'data': {'train_batch_size': 1024}}\n"
        "(WorkerDict pid=8) Total steps: 105, num_warmup_steps: 4\n"
        "(TaskRunner pid=7) step:0 - val-core/openai/gsm8k/reward/mean@1:0.229\n"
        + "".join(
            f"(TaskRunner pid=7) step:{s} - actor/lr:0.000 - critic/score/mean:0.{s}\n" for s in range(1, 7)
        ),
        encoding="utf-8",
    )
    run = _quiet(load_run, log)
    assert run.batch == 5120 and [r.step for r in run.records] == [1, 2, 3, 4, 5, 6]
    assert [r.lr for r in run.records] == pytest.approx([0.25e-6, 0.5e-6, 0.75e-6, 1e-6, 1e-6, 1e-6])
    assert "warm-up over 4 steps" in run.meta["lr_source"]
    assert training_lr(run).lr == pytest.approx(1e-6)


# -- TRL / transformers (written here by TRL's own loggers) ------------------------------------


def test_trl_console_header_tqdm_and_string_values() -> None:
    log = TRL / "train.log"
    assert detect_format(log) == "trl-console"
    run = _quiet(load_run, log)
    # logging_steps=2: the dicts follow the bars at 2/24, 4/24, ... 24/24
    assert [r.step for r in run.records] == list(range(2, 25, 2))
    assert run.batch == 8 and "Total train batch size 8" in run.meta["batch_source"]
    assert "num_iterations" in run.meta["batch_source"]  # says what it cannot know
    assert run.records[0].lr == pytest.approx(0.0001667)  # 'learning_rate': '0.0001667' (a string)
    assert run.records[-1].samples == 24 * 8


def test_trainer_state_needs_batch_and_matches_the_console() -> None:
    state = TRL / "trainer_state.json"
    assert detect_format(state) == "trainer-state"
    with pytest.raises(IngestError, match="--batch"):
        _quiet(load_run, state)
    run = _quiet(load_run, state, options=ReadOptions(batch=8))
    console = _quiet(load_run, TRL / "train.log")
    assert [r.step for r in run.records] == [r.step for r in console.records]
    for a, b in zip(run.records, console.records, strict=True):  # the console rounds to 4 significant digits
        assert a.reward_mean == pytest.approx(b.reward_mean, rel=1e-3, abs=1e-4)
        assert a.lr == pytest.approx(b.lr, rel=1e-3)
    assert run.meta["batch_source"] == "option --batch"
    # the end-of-training summary entry (train_runtime) is not an update
    assert "train_runtime" in run.records[-1].extra and len(run) == 12


def test_hf_tensorboard_train_tags() -> None:
    tb = TRL / "tb"
    pytest.importorskip("tensorboard")
    assert detect_format(tb) == "tensorboard"
    run = _quiet(load_run, tb, options=ReadOptions(batch=8))
    console = _quiet(load_run, TRL / "train.log")
    assert [r.step for r in run.records] == [r.step for r in console.records]
    assert run.records[3].lr == pytest.approx(console.records[3].lr, rel=1e-3)
    assert run.meta["lr_source"] == "logged (train/learning_rate)"


def test_trl_lr_after_warm_up_and_decay() -> None:
    run = _quiet(load_run, TRL / "train.log")
    info = training_lr(run)
    # 6-step warm-up to 1e-3, then cosine: logged 1.667e-4, 5e-4, 8.333e-4, 9.924e-4 (step 8), ...
    assert info.first_lr == pytest.approx(1.667e-4)
    assert info.lr == pytest.approx(9.924e-4) and info.warms_up and info.decays
    assert info.lr / 1e-3 == pytest.approx(1, abs=0.01)


def test_gz_of_any_format(tmp_path: Path) -> None:
    gz = tmp_path / "trainer_state.json.gz"
    with open(TRL / "trainer_state.json", "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert detect_format(gz) == "trainer-state"
    run = _quiet(load_run, gz, options=ReadOptions(batch=8))
    assert len(run) == 12 and ".json" not in run.name  # generic stem: named by its folder


def test_format_option_skips_detection(tmp_path: Path) -> None:
    odd = tmp_path / "run.dat"
    shutil.copy(TRL / "train.log", odd)
    run = _quiet(load_run, odd, options=ReadOptions(format="trl-console"))
    assert len(run) == 12
    with pytest.raises(IngestError, match="unknown format 'nope'"):
        load_run(odd, options=ReadOptions(format="nope"))


def test_same_file_twice_is_refused() -> None:
    with pytest.raises(IngestError, match="given twice"):
        _quiet(load_runs, [QWEN, str(QWEN)])


def test_nan_free_numbers() -> None:
    run = _quiet(load_run, QWEN)
    assert all(math.isfinite(r.reward_mean) for r in run.records)


# -- verl console, newer Ray TaskRunner format -------------------------------------------------

TASKRUNNER = FORMATS_DIR / "verl_console_taskrunner" / "qwen2-7b-fsdp2.excerpt.log"


def test_verl_taskrunner_excerpt_batch_from_command_line_and_lr_lost_to_rounding() -> None:
    assert detect_format(TASKRUNNER) == "verl-console"
    run = _quiet(load_run, TASKRUNNER)
    # step:0 is validation only; step:3 was cut from the excerpt
    assert [r.step for r in run.records] == [1, 2, 4, 5, 6]
    assert run.batch == 1024 * 5 and "train_batch_size 1024 x rollout.n 5" in run.meta["batch_source"]
    assert [r.samples for r in run.records] == [5120, 10240, 20480, 25600, 30720]
    assert [r.reward_mean for r in run.records] == pytest.approx([0.257, 0.252, 0.742, 0.849, 0.918])
    # actor/lr:0.000 in every line; the command line's 1e-6 (no warm-up: num_warmup_steps 0)
    assert all(r.lr == pytest.approx(1e-6) for r in run.records)
    assert "actor/lr as 0.000" in run.meta["lr_source"]
    # the validation metrics printed inside the step:5 line stay with that record
    assert run.records[3].extra["val-core/openai/gsm8k/reward/mean@1"] == pytest.approx(0.856)
    assert run.meta["setup"]["model"] == "huggingface.co/Qwen/Qwen2-7B-Instruct"  # $MODEL_PATH expanded
    assert run.meta["setup"]["algorithm"] == "grpo"


# -- verl's own file logger and TensorBoard backend --------------------------------------------

VERL_FILE = FORMATS_DIR / "verl_file_logger"


@pytest.mark.parametrize("path", ["metrics.jsonl", "tb"])
def test_verl_file_logger_and_tensorboard(path: str) -> None:
    if path == "tb":
        pytest.importorskip("tensorboard")
    p = VERL_FILE / path
    with pytest.raises(IngestError, match="--batch"):
        _quiet(load_run, p)
    run = _quiet(load_run, p, options=ReadOptions(batch=5120))
    console = _quiet(load_run, TASKRUNNER)
    assert [r.step for r in run.records] == [r.step for r in console.records] == [1, 2, 4, 5, 6]
    assert [r.samples for r in run.records] == [r.samples for r in console.records]
    assert [r.reward_mean for r in run.records] == pytest.approx(
        [r.reward_mean for r in console.records], rel=1e-6
    )
    assert [r.entropy for r in run.records] == pytest.approx([0.334, 0.329, 0.317, 0.326, 0.313], rel=1e-6)
    if path == "metrics.jsonl":
        assert run.meta["format"] == "verl-jsonl"


# -- W&B CSV exports (layouts written here from the committed logs) ------------------------------

WANDB = FORMATS_DIR / "wandb_csv"


def test_wandb_history_export_with_pandas_index_column() -> None:
    p = WANDB / "history_trl.csv"
    assert detect_format(p) == "csv"
    run = _quiet(load_run, p, options=ReadOptions(batch=8))
    state = _quiet(load_run, TRL / "trainer_state.json", options=ReadOptions(batch=8))
    # train/global_step (not W&B's own _step, which counts log calls) is the optimizer step
    assert [r.step for r in run.records] == [r.step for r in state.records] == list(range(2, 25, 2))
    assert [r.reward_mean for r in run.records] == pytest.approx([r.reward_mean for r in state.records])
    assert "_step" in run.records[0].extra and "" not in run.records[0].extra


def test_wandb_chart_export_holds_one_run_per_prefix() -> None:
    p = WANDB / "chart_reward.csv"
    assert detect_format(p) == "wandb-chart"
    runs = _quiet(load_runs, [p], options=ReadOptions(batch=8))
    assert [r.name for r in runs] == ["trl-tiny-grpo", "qwen2_7b_function_rm_re"]
    trl, verl = runs
    assert [r.step for r in trl.records] == list(range(2, 25, 2))
    assert [r.step for r in verl.records] == [1, 2, 4, 5, 6]
    assert [r.reward_mean for r in verl.records] == pytest.approx([0.257, 0.252, 0.742, 0.849, 0.918])
    assert all("__MIN" not in k for r in trl.records for k in r.extra)
    with pytest.raises(IngestError, match="2 runs"):
        _quiet(load_run, p, options=ReadOptions(batch=8))


# -- TRL-style dict lines pasted in public issues -----------------------------------------------

PUBLIC = FORMATS_DIR / "trl_console_public"


def test_trl_issue_paste_needs_batch_and_takes_the_logging_interval() -> None:
    p = PUBLIC / "trl_issue_3452.log"
    assert detect_format(p) == "trl-console"
    with pytest.raises(IngestError, match="--batch"):
        _quiet(load_run, p)
    with pytest.warns(UserWarning, match="--logging-steps"):
        run = load_run(p, options=ReadOptions(batch=16))
    assert [r.step for r in run.records] == [1, 2, 3, 4]
    run = _quiet(load_run, p, options=ReadOptions(batch=16, logging_steps=10))
    assert [r.step for r in run.records] == [10, 20, 30, 40] and run.records[-1].samples == 40 * 16
    assert [r.reward_mean for r in run.records] == pytest.approx(
        [1.7171093285083772, 1.8844376266002656, 1.6797272205352782, 1.968537563085556]
    )
    info = training_lr(run)  # 6.92e-6 falling: no warm-up in the paste, decaying
    assert info.lr == pytest.approx(6.916666666666667e-06) and not info.warms_up


def test_ms_swift_json_dict_with_its_step_counter() -> None:
    run = _quiet(load_run, PUBLIC / "ms_swift_issue_5890.log", options=ReadOptions(batch=64))
    (rec,) = run.records
    assert rec.step == 2 and rec.samples == 2 * 64  # "global_step/max_steps": "2/4389"
    assert rec.reward_mean == pytest.approx(0.65625) and rec.frac_zero_std == pytest.approx(0.625)


def test_openrlhf_tensorboard_written_by_its_logger() -> None:
    pytest.importorskip("tensorboard")
    run = _quiet(load_run, FORMATS_DIR / "openrlhf_tb" / "run")
    # train/rollout/num_samples is the batch; train/actor_lr the LR; train/rollout/reward_mean the reward
    assert [r.step for r in run.records] == [1, 2, 3, 4, 5] and run.batch == 64
    assert run.meta["batch_source"] == "logged (train/rollout/num_samples)"
    assert run.records[1].reward_mean == pytest.approx(0.2) and run.lr == pytest.approx(3e-6)


def test_detection_keeps_record_jsonl_named_log_as_jsonl(tmp_path: Path) -> None:
    p = tmp_path / "train.log"
    p.write_text("".join(f'{{"reward": 0.{i}, "step": {i}, "batch": 8}}\n' for i in range(1, 5)))
    assert detect_format(p) == "jsonl"
    assert detect_format(PUBLIC / "ms_swift_issue_5890.log") == "trl-console"


def test_trl_console_step_from_epoch_when_the_bar_lags(tmp_path: Path) -> None:
    """Steps faster than tqdm's redraw: the bar shows 3/24 when step 4 logs; the epoch does not lag."""
    text = (TRL / "train.log").read_text(encoding="utf-8")
    lagged = text.replace(" 17%|█▋        | 4/24 [", " 17%|█▋        | 3/24 [")
    assert lagged != text
    p = tmp_path / "train.log"
    p.write_text(lagged, encoding="utf-8")
    run = _quiet(load_run, p)
    assert [r.step for r in run.records] == list(range(2, 25, 2))
    from rlvr_schedule.ingest.console import _epoch_step

    assert _epoch_step("0.0625", 32) == 2 and _epoch_step(0.31, 500) is None  # 2 decimals x 500 steps


# -- numpy and torch reprs as transformers prints them, and the same run's W&B file -------------

NUMPY_TORCH = FORMATS_DIR / "trl_numpy_torch"


def test_console_with_numpy_and_torch_reprs_reads_as_its_wandb_run() -> None:
    log = NUMPY_TORCH / "train.log"
    text = log.read_text(encoding="utf-8")
    for printed in ("np.float32(0.010416667)", "np.int64(141)", "tensor(3.4527)", "dtype=torch.bfloat16)"):
        assert printed in text  # really printed so, by transformers' console printer
    run = _quiet(load_run, log)
    assert [r.step for r in run.records] == [2, 4, 6, 8] and run.batch == 8
    assert run.records[0].reward_mean == pytest.approx(0.010416667)  # 'reward': np.float32(0.010416667)
    assert run.records[0].entropy == pytest.approx(3.4527)  # 'entropy': tensor(3.4527)
    assert run.records[1].grad_norm == pytest.approx(1.2656)  # tensor(1.2656, dtype=torch.bfloat16)
    assert run.records[0].extra["num_tokens"] == 141  # np.int64(141)
    pytest.importorskip("wandb")
    (run_dir,) = (NUMPY_TORCH / "wandb").glob("offline-run-*")
    assert detect_format(run_dir) == "wandb"
    wb = _quiet(load_run, run_dir)
    assert [(r.step, r.samples) for r in wb.records] == [(r.step, r.samples) for r in run.records]
    assert [r.reward_mean for r in wb.records] == pytest.approx(
        [r.reward_mean for r in run.records], rel=1e-6
    )
    assert [r.entropy for r in wb.records] == pytest.approx([r.entropy for r in run.records], rel=1e-4)
    assert [r.grad_norm for r in wb.records] == pytest.approx([r.grad_norm for r in run.records], rel=1e-3)


# -- every committed real log, as published ---------------------------------------------------

# (runs/raw/ is read with the options of runs/RUNS.json by test_ingest_real_reference.py)
#: logs that cannot be read as they are, and why (their ORIGIN.md says the same)
UNREADABLE = {"20251022_120051_run_terminal.md.gz": "unknown log format"}  # the run never logged
LOGS = sorted(
    [
        p
        for p in FORMATS_DIR.rglob("*")
        if p.is_file()
        and not p.name.endswith((".md", ".py"))
        and "tfevents" not in p.name
        and p.suffix != ".wandb"
    ]
    + [p.parent for p in FORMATS_DIR.rglob("*tfevents*")]
    + [p.parent for p in FORMATS_DIR.rglob("*.wandb")]
)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: str(p.relative_to(FORMATS_DIR)))
def test_every_committed_real_log_reads_with_no_hand_edits(path: Path) -> None:
    """Each log reads as published; where it does not print the batch, --batch is all it needs."""
    if path.name.startswith("offline-run-"):
        pytest.importorskip("wandb")
    if any(f.name.startswith("events.") for f in path.glob("*")):
        pytest.importorskip("tensorboard")
    if path.name in UNREADABLE:
        with pytest.raises(IngestError, match=UNREADABLE[path.name]):
            _quiet(load_runs, [path])
        return
    try:
        runs = _quiet(load_runs, [path])
    except IngestError as exc:
        assert "--batch" in str(exc) or "samples" in str(exc)  # silent on the batch, nothing else
        runs = _quiet(load_runs, [path], options=ReadOptions(batch=8))
    assert runs and all(len(r) >= 1 and any(math.isfinite(x.reward_mean) for x in r.records) for r in runs)
