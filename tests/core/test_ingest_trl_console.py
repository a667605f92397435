"""TRL / transformers / Unsloth console logs as users' terminals leave them.

Each test writes a small log in the shape the real ones have (header or banner, tqdm bars with
``\\r``, metric dicts, the summary dict) and changes one thing.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_schedule.errors import IngestError, IngestWarning
from rlvr_schedule.ingest import ReadOptions, load_run

HEADER = (
    "***** Running training *****\n"
    "  Num examples = 64\n"
    "  Num Epochs = 1\n"
    "{spe}"
    "  Total train batch size (w. parallel, distributed & accumulation) = {batch}\n"
    "  Total optimization steps = {steps}\n"
)
UNSLOTH = (
    "==((====))==  Unsloth - 2x faster free finetuning | Num GPUs used = 1\n"
    "   \\\\   /|    Num examples = 7,473 | Num Epochs = 1 | Total steps = {steps}\n"
    "O^O/ \\_/ \\    Batch size per device = 2 | Gradient accumulation steps = 4\n"
    "\\        /    Data Parallel GPUs = 1 | Total batch size (2 x 4 x 1) = {batch}\n"
)


def _bar(s: int, m: int) -> str:
    return f" {100 * s // m:3d}%|#         | {s}/{m} [00:0{s % 10}<00:10,  1.00it/s]"


def _dict(k: int, **extra: object) -> str:
    d = {"loss": 0.01 * k, "grad_norm": 0.1 + 0.01 * k, "learning_rate": 1e-6, "reward": 0.1 * k, **extra}
    return repr(d)


SUMMARY = "{'train_runtime': 12.5, 'train_samples_per_second': 3.1, 'train_loss': 0.01, 'epoch': 0.5}"


def _log(
    tmp_path: Path,
    body: str,
    *,
    steps: int = 12,
    batch: int = 8,
    spe: int | None = None,
    unsloth: bool = False,
) -> Path:
    head = (UNSLOTH if unsloth else HEADER).format(
        steps=steps, batch=batch, spe=f"  Num update steps per epoch = {spe}\n" if spe else ""
    )
    p = tmp_path / "train.log"
    p.write_text("Loading weights: 100%|##########| 4/4 [00:00<00:00]\n" + head + body, encoding="utf-8")
    return p


def _read(path: Path, **kw: object):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_run(path, **kw)  # type: ignore[arg-type]


def _steady(steps: int = 12, interval: int = 2) -> str:
    """Unbuffered: each dict right after the bar of its step, bars redrawn with \\r."""
    out = []
    for s in range(1, steps + 1):
        out.append(_bar(s, steps) + ("\r" if s % interval else "\n"))
        if s % interval == 0:
            out.append(_dict(s // interval) + "\n")
    return "".join(out) + SUMMARY + "\n" + _bar(steps, steps) + "\n"


def test_steady_log_steps_from_the_dict_count_and_the_interval_is_reported(tmp_path: Path) -> None:
    run = _read(_log(tmp_path, _steady()))
    assert [r.step for r in run.records] == [2, 4, 6, 8, 10, 12]
    assert run.meta["logging_interval"] == 2 and "Total optimization steps 12" in run.meta["step_rule"]
    assert [r.samples for r in run.records] == [16, 32, 48, 64, 80, 96]


def test_dicts_buffered_after_one_progress_line_keep_their_steps(tmp_path: Path) -> None:
    """stdout buffered, stderr not: all dicts printed after the bar reached the end."""
    bars = "".join(_bar(s, 12) + "\r" for s in range(1, 13)) + "\n"
    dicts = "".join(_dict(k) + "\n" for k in range(1, 7))
    run = _read(_log(tmp_path, bars + dicts + SUMMARY + "\n"))
    assert [r.step for r in run.records] == [2, 4, 6, 8, 10, 12] and run.meta["dropped"] == 0


def test_step_from_the_dicts_own_step_field(tmp_path: Path) -> None:
    body = "".join(_dict(k, step=3 * k) + "\n" for k in range(1, 5))
    run = _read(_log(tmp_path, body))
    assert [r.step for r in run.records] == [3, 6, 9, 12] and run.meta["step_rule"] == "the dicts' own step"


def test_step_from_epoch_and_the_headers_steps_per_epoch(tmp_path: Path) -> None:
    """No bar, no summary (a killed run): the epoch printed finely enough pins each step."""
    body = "".join(_dict(k, epoch=f"{3 * k / 64:.4g}") + "\n" for k in range(1, 5))  # '0.04688', ...
    run = _read(_log(tmp_path, body, steps=64, spe=64))
    assert [r.step for r in run.records] == [3, 6, 9, 12]
    assert "Num update steps per epoch 64" in run.meta["step_rule"]
    # rounded to 2 decimals (older transformers), the epoch cannot tell steps apart: not used
    coarse = "".join(_dict(k, epoch=round(3 * k / 500, 2)) + "\n" for k in range(1, 5))
    run = _read(_log(tmp_path, coarse, steps=500, spe=500))
    assert "epoch" not in run.meta["step_rule"]


def test_unsloth_banner_gives_the_batch_and_total_steps(tmp_path: Path) -> None:
    run = _read(_log(tmp_path, _steady(), batch=8, unsloth=True))
    assert run.batch == 8 and "Total batch size (2 x 4 x 1) = 8" in run.meta["batch_source"]
    assert [r.step for r in run.records] == [2, 4, 6, 8, 10, 12]


def test_nan_and_inf_in_dicts_are_read_as_non_finite(tmp_path: Path) -> None:
    body = _steady()
    line = _dict(2)
    bad = line.replace(repr(0.1 + 0.02), "nan").replace(repr(0.02), "-inf", 1)
    assert "nan" in bad and "-inf" in bad
    body = body.replace(line, bad)
    with pytest.warns(IngestWarning, match="non-finite"):
        run = load_run(_log(tmp_path, body))
    assert len(run.records) == 6 and run.records[1].grad_norm != run.records[1].grad_norm  # NaN


def test_ansi_cursor_codes_between_lines(tmp_path: Path) -> None:
    body = _steady().replace("{'loss'", "\x1b[A\x1b[2K\x1b[1G{'loss'")
    run = _read(_log(tmp_path, body))
    assert [r.step for r in run.records] == [2, 4, 6, 8, 10, 12]


def test_last_line_cut_by_a_kill_is_dropped_and_reported(tmp_path: Path) -> None:
    body = "".join(_bar(s, 12) + "\n" + (_dict(s // 2) + "\n" if s % 2 == 0 else "") for s in range(1, 7))
    body += _dict(4)[:40]  # killed while printing
    with pytest.warns(IngestWarning, match="1 record dropped"):
        run = load_run(_log(tmp_path, body))
    assert [r.step for r in run.records] == [2, 4, 6] and run.meta["dropped"] == 1


def test_string_valued_numbers(tmp_path: Path) -> None:
    body = "".join(
        "{'loss': '0.01', 'learning_rate': '1e-06', 'reward': '%s', 'epoch': '0.1'}\n" % (0.125 * k)
        for k in range(1, 4)
    )
    run = _read(_log(tmp_path, body + SUMMARY + "\n", steps=3))
    assert [r.reward_mean for r in run.records] == [0.125, 0.25, 0.375] and run.records[0].lr == 1e-06


def test_eval_dicts_and_the_summary_are_skipped(tmp_path: Path) -> None:
    body = _steady().replace(SUMMARY, "{'eval_loss': 0.3, 'eval_reward': 0.5, 'epoch': 0.5}\n" + SUMMARY)
    run = _read(_log(tmp_path, body))
    assert len(run.records) == 6 and all("train_runtime" not in r.extra for r in run.records)


def test_a_second_run_in_the_file_keeps_the_last_with_a_warning_naming_the_lines(tmp_path: Path) -> None:
    first = _log(tmp_path, _steady()).read_text()
    second = HEADER.format(steps=6, batch=4, spe="") + _steady(steps=6, interval=3).replace(
        "'reward': 0.", "'reward': 0.5"
    )
    p = tmp_path / "two.log"
    p.write_text(first + second)
    with pytest.warns(IngestWarning, match=r"2 training runs .* 6 metrics dict\(s\) of lines 9-"):
        run = load_run(p)
    assert run.batch == 4 and [r.step for r in run.records] == [3, 6] and run.meta["runs_dropped"] == 1


def test_a_resumed_run_continues_from_its_checkpoint_step(tmp_path: Path) -> None:
    """Killed after step 8 (dicts up to 8), resumed from checkpoint 6: steps 8 is logged again."""
    part1 = "".join(_bar(s, 12) + "\n" + (_dict(s // 2) + "\n" if s % 2 == 0 else "") for s in range(1, 9))
    resumed = (
        HEADER.format(steps=12, batch=8, spe="")
        + "  Continuing training from checkpoint, will skip to saved global_step\n"
        + "  Continuing training from global step 6\n"
        + "".join(_bar(s, 12) + "\n" + (_dict(s // 2) + "\n" if s % 2 == 0 else "") for s in range(7, 13))
        + SUMMARY
        + "\n"
    )
    p = _log(tmp_path, part1)
    p.write_text(p.read_text() + resumed)
    with pytest.warns(IngestWarning, match="logged again"):
        run = load_run(p)
    assert [r.step for r in run.records] == [2, 4, 6, 8, 10, 12] and run.meta["dropped"] == 1


def test_dicts_printed_once_per_rank_count_once(tmp_path: Path) -> None:
    body = "".join(
        _bar(s, 12)
        + "\n"
        + ("".join(f"[rank{r}]: " + _dict(s // 2) + "\n" for r in range(2)) if s % 2 == 0 else "")
        for s in range(1, 13)
    )
    with pytest.warns(IngestWarning, match="2 times in a row"):
        run = load_run(_log(tmp_path, body + SUMMARY + "\n"))
    assert [r.step for r in run.records] == [2, 4, 6, 8, 10, 12] and run.meta["ranks"] == 2


def test_an_unreadable_dict_inside_the_log_fails_naming_file_and_line(tmp_path: Path) -> None:
    body = _steady().replace("{'loss': 0.03", "{'loss': 0.03 0.04", 1)
    p = _log(tmp_path, body)
    with pytest.raises(IngestError, match=r"train\.log:\d+.*cannot read this metrics dict"):
        _read(p)


@st.composite
def _interleavings(draw: st.DrawFn) -> tuple[int, int, list[int], list[str], list[str]]:
    interval = draw(st.integers(1, 4))
    n = draw(st.integers(2, 8))
    steps = interval * n  # max_steps a multiple of logging_steps (else the interval can be ambiguous)
    # when each dict gets printed: at its step, or buffered until a later bar (stdout lagging stderr)
    lag = [draw(st.integers(0, steps - interval * k)) for k in range(1, n + 1)]
    seps = [draw(st.sampled_from(["\r", "\n", "\r\n", ""])) for _ in range(steps)]
    joins = [draw(st.sampled_from(["\n", "\r", "\r" + " " * 40 + "\r"])) for _ in range(n)]
    return interval, steps, lag, seps, joins


@settings(max_examples=60, deadline=None)
@given(_interleavings())
def test_records_do_not_depend_on_how_the_bars_interleave(tmp_path_factory, case) -> None:  # type: ignore[no-untyped-def]
    """The same run's dicts, with tqdm bars redrawn on one line (\\r), on new lines, or missing,
    and the dicts printed at their step or buffered several bars later: identical records."""
    interval, steps, lag, seps, joins = case
    n = len(lag)
    due: dict[int, list[int]] = {}
    for k in range(1, n + 1):
        at = max(interval * k + lag[k - 1], max((s for s, ks in due.items() for _ in ks), default=0))
        due.setdefault(min(at, steps), []).append(k)
    out = []
    for s in range(1, steps + 1):
        if seps[s - 1]:
            out.append(_bar(s, steps) + seps[s - 1])
        for k in due.get(s, []):
            # after a bar redrawn with \r: on a new line, or on the bar's own line after \r
            out.append((joins[k - 1] if out and not out[-1].endswith("\n") else "") + _dict(k) + "\n")
    body = "".join(out) + ("\n" if out and not out[-1].endswith("\n") else "") + SUMMARY + "\n"
    tmp = tmp_path_factory.mktemp("prop")
    run = _read(_log(tmp, body, steps=steps))
    assert [r.step for r in run.records] == [interval * k for k in range(1, n + 1)]
    assert [r.reward_mean for r in run.records] == pytest.approx([0.1 * k for k in range(1, n + 1)])
    assert run.records[-1].samples == interval * n * 8


def test_a_summary_dict_with_trls_merged_metric_means_is_not_a_record(tmp_path: Path) -> None:
    """TRL's GRPOTrainer.log merges its metric means into the end-of-training summary."""
    body = _steady().replace(SUMMARY, SUMMARY[:-1] + ", 'reward': 0.9, 'loss': 0.0}")
    run = _read(_log(tmp_path, body))
    assert [r.step for r in run.records] == [2, 4, 6, 8, 10, 12] and run.records[
        -1
    ].reward_mean == pytest.approx(0.6)


SET_ASIDE = Path(__file__).resolve().parents[1] / "data" / "real" / "formats" / "trl_dapo_markdown"


@pytest.mark.parametrize(
    ("run", "n", "steps"),
    [
        ("20251022_120223", 4, [11, 22, 33, 44]),
        ("20251022_120531", 49, None),
        ("20251022_181457", 4, [10, 20, 30, 40]),
    ],
)
def test_the_set_aside_source_reads_with_the_batch_its_script_sets(
    run: str, n: int, steps: list[int] | None
) -> None:
    """JuncyLu/trl_DAPO terminal logs in Markdown: no header (log level warning), so --batch 2
    (dapo.sh: 1 x 2 accumulation, 2 generations); interval from the dict count against the bar."""
    p = SET_ASIDE / f"{run}_run_terminal.md.gz"
    with pytest.raises(IngestError, match="--batch"):
        _read(p)
    got = _read(p, options=ReadOptions(batch=2))
    assert len(got.records) == n and got.batch == 2
    if steps is not None:
        assert [r.step for r in got.records] == steps


def test_the_set_aside_run_that_never_logged_says_so() -> None:
    p = SET_ASIDE / "20251022_120051_run_terminal.md.gz"
    with pytest.raises(IngestError, match="unknown log format"):  # nothing in it looks like a log
        _read(p, options=ReadOptions(batch=2))
    with pytest.raises(IngestError, match="no metrics dict lines"):
        _read(p, options=ReadOptions(batch=2, format="trl-console"))


def test_a_metrics_dict_starting_with_another_key_is_read_and_config_dicts_are_not(tmp_path: Path) -> None:
    body = _steady().replace("{'loss'", "{'completion_length': 100.0, 'loss'")
    body = "{'bos_token_id': None, 'eos_token_id': 2}\n" + body
    run = _read(_log(tmp_path, body))
    assert [r.step for r in run.records] == [2, 4, 6, 8, 10, 12] and run.records[0].response_length == 100.0
