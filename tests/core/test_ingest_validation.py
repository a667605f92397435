"""Bad and partial input: never a silently wrong run. One test per case; errors name file, line, field."""

from __future__ import annotations

import json
import math
import re
import warnings
from pathlib import Path

import pytest

from rlvr_schedule.errors import IngestError, IngestWarning
from rlvr_schedule.ingest import RecordStream, load_run, read_csv, read_jsonl
from rlvr_schedule.records import StepRecord


def _jsonl(path: Path, rows: list[dict], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)
    return path


def _rows(n: int, **extra) -> list[dict]:
    return [{"step": i, "samples": 8 * i, "reward": 0.1 * i, **extra} for i in range(1, n + 1)]


def test_samples_derived_from_batch_cumulatively(tmp_path: Path) -> None:
    rows = [
        {"step": 1, "batch": 8, "reward": 0},
        {"step": 2, "batch": 8, "reward": 0},
        {"step": 3, "batch": 16, "reward": 0},
    ]
    run = read_jsonl(_jsonl(tmp_path / "b.jsonl", rows))
    assert run.array("samples").tolist() == [8, 16, 32]


def test_samples_derived_across_unlogged_steps_warns(tmp_path: Path) -> None:
    rows = [{"step": s, "batch": 8, "reward": 0} for s in (5, 10, 15)]  # logging every 5 steps
    with pytest.warns(IngestWarning, match="unlogged step"):
        run = read_jsonl(_jsonl(tmp_path / "b.jsonl", rows))
    assert run.array("samples").tolist() == [40, 80, 120]


def test_batch_derived_from_sample_differences(tmp_path: Path) -> None:
    rows = [
        {"step": 1, "samples": 8, "reward": 0},
        {"step": 2, "samples": 16, "reward": 0},
        {"step": 3, "samples": 48, "reward": 0},
    ]
    run = read_jsonl(_jsonl(tmp_path / "s.jsonl", rows))
    assert run.array("batch").tolist() == [8, 8, 32]


def test_batch_not_derivable_over_a_gap_is_an_error(tmp_path: Path) -> None:
    rows = [{"step": 1, "samples": 8, "reward": 0}, {"step": 3, "samples": 19, "reward": 0}]
    with pytest.raises(IngestError, match=r"s.jsonl:2, field 'samples'.*not a whole batch"):
        read_jsonl(_jsonl(tmp_path / "s.jsonl", rows))


def test_neither_samples_nor_batch_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match=r"n.jsonl:1, field 'samples'.*neither samples nor batch"):
        read_jsonl(_jsonl(tmp_path / "n.jsonl", [{"step": 1, "reward": 0.5}]))


def test_nan_value_warns_with_file_line_field(tmp_path: Path) -> None:
    p = tmp_path / "nan.jsonl"
    p.write_text(
        '{"step": 1, "samples": 8, "reward": 0.1}\n{"step": 2, "samples": 16, "reward": 0.2, '
        '"entropy": NaN}\n'
    )
    with pytest.warns(IngestWarning, match=re.escape(f"{p}:2: field 'entropy': non-finite value nan")):
        run = read_jsonl(p)
    assert math.isnan(run.records[1].entropy) and run.records[1].reward_mean == 0.2


def test_inf_value_warns_and_becomes_nan(tmp_path: Path) -> None:
    p = tmp_path / "inf.csv"
    p.write_text("step,samples,reward,kl\n1,8,0.1,0.0\n2,16,0.2,inf\n3,24,0.3,-inf\n")
    with pytest.warns(IngestWarning) as rec:
        run = read_csv(p)
    msgs = [str(w.message) for w in rec]
    assert any(f"{p}:3: field 'kl': non-finite value inf" in m for m in msgs)
    assert any("2 non-finite values" in m for m in msgs)  # the repeat is summarized, not repeated
    assert math.isnan(run.records[1].kl) and math.isnan(run.records[2].kl)


def test_nonfinite_samples_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text('{"step": 1, "samples": Infinity, "reward": 0.1}\n')
    with pytest.raises(IngestError, match=r"s.jsonl:1, field 'samples'.*whole number"):
        read_jsonl(p)


def test_missing_reward_is_an_error(tmp_path: Path) -> None:
    rows = [{"step": 1, "samples": 8, "entropy": 1.0}, {"step": 2, "samples": 16, "entropy": 0.9}]
    with pytest.raises(IngestError, match=r"field 'reward_mean'.*no reward metric"):
        read_jsonl(_jsonl(tmp_path / "r.jsonl", rows))


def test_repeated_steps_warn_and_keep_the_later_records(tmp_path: Path) -> None:
    rows = _rows(5) + [{"step": s, "samples": 8 * s, "reward": 1.0} for s in (4, 5, 6)]  # resumed at 3
    with pytest.warns(IngestWarning, match=r"r.jsonl:6: field 'step': step 4 logged again.*dropping 2"):
        run = read_jsonl(_jsonl(tmp_path / "r.jsonl", rows))
    assert [r.step for r in run] == [1, 2, 3, 4, 5, 6]
    assert run.array("reward_mean").tolist() == pytest.approx([0.1, 0.2, 0.3, 1, 1, 1])


def test_non_monotone_steps_are_an_error_naming_the_line(tmp_path: Path) -> None:
    rows = [
        {"step": 1, "batch": 8, "reward": 0},
        {"step": 4, "batch": 8, "reward": 0},
        {"step": 3, "batch": 8, "reward": 0},
    ]
    with pytest.raises(IngestError, match=r"m.jsonl:3, field 'step'.*step 3 comes after step 4 at line 2"):
        read_jsonl(_jsonl(tmp_path / "m.jsonl", rows))


def test_non_monotone_samples_are_an_error_naming_the_line(tmp_path: Path) -> None:
    p = tmp_path / "m.csv"
    p.write_text("step,samples,reward\n1,8,0\n2,16,0\n3,12,0\n")
    with pytest.raises(IngestError, match=r"m.csv:4, field 'samples'.*samples 12 at step 3"):
        read_csv(p)


def test_truncated_last_jsonl_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    p = _jsonl(tmp_path / "t.jsonl", _rows(3), tail='{"step": 4, "samples": 3')
    with pytest.warns(IngestWarning, match=r"t.jsonl:4: truncated last line skipped"):
        run = read_jsonl(p)
    assert len(run) == 3


def test_bad_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "b.jsonl"
    rows = [json.dumps(r) for r in _rows(3)]
    p.write_text("\n".join([rows[0], '{"step": 2, oops}', rows[2]]) + "\n")
    with pytest.raises(IngestError, match=r"b.jsonl:2: not valid JSON"):
        read_jsonl(p)


def test_non_object_json_line_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "a.jsonl"
    p.write_text('{"step": 1, "samples": 8, "reward": 0}\n[1, 2]\n')
    with pytest.raises(IngestError, match=r"a.jsonl:2: expected a JSON object"):
        read_jsonl(p)


def test_unknown_columns_kept_in_extra_with_one_warning(tmp_path: Path) -> None:
    rows = _rows(3, **{"my/thing": 1.5, "other": 2})
    with pytest.warns(IngestWarning) as rec:
        run = read_jsonl(_jsonl(tmp_path / "u.jsonl", rows))
    unknown = [str(w.message) for w in rec if "unknown metrics" in str(w.message)]
    assert unknown == [f"{tmp_path / 'u.jsonl'}: unknown metrics kept in extra: my/thing, other"]
    assert run.records[2].extra == {"my/thing": 1.5, "other": 2.0}


def test_csv_missing_cells_are_not_logged(tmp_path: Path) -> None:
    p = tmp_path / "m.csv"
    p.write_text("step,samples,batch,reward,entropy\n1,8,,0.1,1.0\n2,,8,0.2,\n3,24\n")
    run = read_csv(p)
    assert run.array("samples").tolist() == [8, 16, 24]
    assert run.array("batch").tolist() == [8, 8, 8]
    assert math.isnan(run.records[1].entropy) and math.isnan(run.records[2].reward_mean)


def test_csv_row_with_too_many_cells_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "w.csv"
    p.write_text("step,samples,reward\n1,8,0.1\n2,16,0.2,99\n")
    with pytest.raises(IngestError, match=r"w.csv:3: 4 cells but the header names 3"):
        read_csv(p)


def test_csv_non_numeric_metric_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "x.csv"
    p.write_text("step,samples,reward\n1,8,0.1\n2,16,high\n")
    with pytest.raises(IngestError, match=r"x.csv:3, field 'reward'.*'high' is not a number"):
        read_csv(p)


def test_csv_duplicate_header_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "d.csv"
    p.write_text("step,samples,reward,reward\n1,8,0.1,0.2\n")
    with pytest.raises(IngestError, match=r"d.csv:1: duplicate column"):
        read_csv(p)


@pytest.mark.parametrize(
    "name,text,match",
    [
        ("e.jsonl", "", "no records"),
        ("e.jsonl", "\n\n", "no records"),
        ("e.csv", "", "empty file"),
        ("h.csv", "step,samples,reward\n", "no records"),
    ],
)
def test_empty_files_are_an_error(tmp_path: Path, name: str, text: str, match: str) -> None:
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(IngestError, match=re.escape(str(p)) + ".*" + match):
        load_run(p)


def test_fractional_step_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match=r"f.jsonl:1, field 'step'.*whole number"):
        read_jsonl(_jsonl(tmp_path / "f.jsonl", [{"step": 1.5, "samples": 8, "reward": 0}]))


def test_step_missing_in_some_rows_is_an_error(tmp_path: Path) -> None:
    rows = [{"step": 1, "samples": 8, "reward": 0}, {"samples": 16, "reward": 0}]
    with pytest.raises(IngestError, match=r"s.jsonl:2, field 'step'.*no step"):
        read_jsonl(_jsonl(tmp_path / "s.jsonl", rows))


def test_rows_without_any_step_are_numbered(tmp_path: Path) -> None:
    rows = [{"samples": 8, "reward": 0}, {"samples": 16, "reward": 0}]
    run = read_jsonl(_jsonl(tmp_path / "n.jsonl", rows))
    assert [r.step for r in run] == [1, 2]


def test_jsonl_sink_decision_lines_are_skipped(tmp_path: Path) -> None:
    rows = [
        {"kind": "record", "step": 1, "samples": 8, "batch": 8, "lr": 1e-6, "reward_mean": 0.1},
        {
            "kind": "decision",
            "step": 1,
            "samples": 8,
            "batch": 16,
            "lr": 1e-6,
            "stage": 1,
            "switched": True,
            "reason": "progress",
        },
        {"kind": "record", "step": 2, "samples": 24, "batch": 16, "lr": 1e-6, "reward_mean": 0.2},
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = read_jsonl(_jsonl(tmp_path / "sink.jsonl", rows))
    assert run.array("batch").tolist() == [8, 16]


def test_null_values_mean_not_logged(tmp_path: Path) -> None:
    rows = [{"step": 1, "samples": 8, "reward": 0.1, "entropy": None}]
    run = read_jsonl(_jsonl(tmp_path / "z.jsonl", rows))
    assert math.isnan(run.records[0].entropy)


# -- RecordStream (online) ---------------------------------------------------------------------


def test_record_stream_validates_order_of_dicts_and_records() -> None:
    stream = RecordStream(name="live")
    stream.append({"step": 1, "batch": 8, "reward": 0.1})
    stream.append(StepRecord(step=2, samples=16, batch=8, lr=1e-6, reward_mean=0.2))
    with pytest.raises(IngestError, match=r"field 'samples'.*samples 16 at step 3"):
        stream.append(StepRecord(step=3, samples=16, batch=8, lr=1e-6))
    with pytest.raises(IngestError, match=r"line 7, field 'step'.*never logged before"):
        stream.append({"step": 0, "samples": 20, "reward": 0}, line=7)
    run = stream.to_run()
    assert run.name == "live" and run.array("samples").tolist() == [8, 16]


def test_record_stream_empty_and_rewardless_runs_are_errors() -> None:
    with pytest.raises(IngestError, match="no records"):
        RecordStream().to_run()
    s = RecordStream(source="live.jsonl")
    s.append({"step": 1, "samples": 8, "entropy": 1.0})
    with pytest.raises(IngestError, match="no reward metric"):
        s.to_run()
    assert len(s.to_run(require_reward=False)) == 1


def test_rows_without_any_metric_are_skipped_with_one_warning(tmp_path: Path) -> None:
    rows = [
        {"step": 1, "batch": 8, "reward": 0.1},
        {"step": 2, "eval_loss": 0.5},
        {"step": 2, "batch": 8, "reward": 0.2},
        {"step": 3, "eval_loss": 0.4},
    ]
    with pytest.warns(IngestWarning, match=r"e.jsonl:2: 2 row\(s\) without any reward"):
        run = read_jsonl(_jsonl(tmp_path / "e.jsonl", rows))
    assert [r.step for r in run] == [1, 2]


def test_a_stray_record_is_skipped_not_read_as_a_resumed_run(tmp_path):
    """Steps 1..30, a stray step-1 record, then 31..40: the steps go on past those a resume would
    drop, so the stray is skipped (one warning) and the 30 records before it are kept."""
    import json

    from rlvr_schedule.ingest import read_jsonl

    rows = [{"step": i, "samples": 8 * i, "reward_mean": 0.01 * i} for i in range(1, 41)]
    p = tmp_path / "r.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows[:30] + rows[:1] + rows[30:]))
    with pytest.warns(IngestWarning, match=r"r.jsonl:31: a stray record: step 1 between steps 30 and 31"):
        run = read_jsonl(p)
    assert [r.step for r in run.records] == list(range(1, 41))
