"""Readers: JSONL, CSV and real TensorBoard event files; canonical, TRL, verl and OpenRLHF names."""

from __future__ import annotations

import csv
import json
import math
import warnings
from pathlib import Path

import pytest

from rlvr_schedule.errors import IngestError, IngestWarning
from rlvr_schedule.ingest import (
    JsonlWriter,
    load_run,
    load_runs,
    read_csv,
    read_jsonl,
    read_tensorboard,
    write_jsonl,
)
from rlvr_schedule.records import StepRecord


def _records(n: int = 6, batch: int = 16) -> list[StepRecord]:
    return [
        StepRecord(
            step=i,
            samples=batch * i,
            batch=batch,
            lr=1e-6,
            reward_mean=0.1 * i,
            reward_std=0.2,
            entropy=1.0 - 0.05 * i,
            kl=0.01 * i,
            grad_norm=0.5,
            clip_frac=0.02,
            response_length=100.0 + i,
            frac_zero_std=0.3,
            grad_norm_micro=1.5,
            micro_batch=4,
            extra={"my/metric": float(i)},
        )
        for i in range(1, n + 1)
    ]


def _dicts(run) -> list[dict]:
    return [r.to_dict() for r in run]


def test_jsonl_round_trip_canonical(tmp_path: Path) -> None:
    recs = _records()
    path = write_jsonl(tmp_path / "run.jsonl", recs)
    with pytest.warns(IngestWarning, match="my/metric"):  # an unknown name is reported once
        run = read_jsonl(path)
    assert _dicts(run) == [r.to_dict() for r in recs]
    assert run.name == "run" and run.source == str(path)


def test_trl_style_jsonl(ingest_data: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every TRL key is known
        run = read_jsonl(ingest_data / "trl_log_history.jsonl")
    assert len(run) == 5
    assert run.array("samples").tolist() == [32, 64, 96, 128, 160]  # derived from batch
    assert run.array("reward_mean").tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])
    assert run.records[0].lr == 1e-6 and run.records[2].kl == pytest.approx(0.003)
    assert run.records[-1].extra["train_runtime"] == 1.5  # the end-of-training row merged into step 5


def test_verl_style_csv(ingest_data: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = read_csv(ingest_data / "verl_metrics.csv")
    assert [r.step for r in run] == [1, 2, 3, 4, 5]
    assert run.array("batch").tolist() == [64] * 5  # derived from sample differences
    r = run.records[1]
    assert (r.reward_mean, r.entropy, r.kl, r.grad_norm, r.clip_frac, r.response_length, r.lr) == (
        0.3,
        1.0,
        0.004,
        0.82,
        0.02,
        154.0,
        2e-6,
    )
    assert r.extra["actor/ppo_kl"] == 0.001


def test_openrlhf_style_jsonl(ingest_data: Path) -> None:
    run = load_run(ingest_data / "openrlhf_logs.jsonl")
    assert run.array("samples").tolist() == [64, 128, 192, 256, 320]  # from rollout/num_samples
    assert run.records[0].kl == 0.001 and run.records[0].extra["ppo_kl"] == 0.0001


def _write_csv(path: Path, rows: list[dict]) -> Path:
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    return path


def test_csv_round_trip_canonical(tmp_path: Path) -> None:
    recs = _records()
    path = _write_csv(tmp_path / "run.csv", [r.to_dict() for r in recs])
    with pytest.warns(IngestWarning, match="my/metric"):
        run = read_csv(path)
    assert _dicts(run) == [r.to_dict() for r in recs]


def test_csv_round_trip_trl_names(tmp_path: Path) -> None:
    rows = [
        {
            "step": i,
            "batch": 8,
            "reward": 0.1 * i,
            "learning_rate": 1e-5,
            "entropy": 2.0,
            "completions/mean_length": 50.0,
        }
        for i in range(1, 4)
    ]
    run = read_csv(_write_csv(tmp_path / "trl.csv", rows))
    assert run.array("samples").tolist() == [8, 16, 24]
    assert run.array("response_length").tolist() == [50.0] * 3 and run.lr == 1e-5


def test_tsv_is_tab_separated(tmp_path: Path) -> None:
    p = tmp_path / "run.tsv"
    p.write_text("step\tsamples\treward\n1\t4\t0.5\n2\t8\t0.6\n")
    assert load_run(p).array("reward_mean").tolist() == [0.5, 0.6]


# -- TensorBoard: real event files -------------------------------------------------------------


def _summary_writer():
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter


def _write_tb(logdir: Path, rows: list[dict], *, filename_suffix: str = "") -> None:
    writer = _summary_writer()(log_dir=str(logdir), filename_suffix=filename_suffix)
    for row in rows:
        step = row["step"]
        for k, v in row.items():
            if k != "step":
                writer.add_scalar(k, v, step)
    writer.close()


def test_tensorboard_canonical_sink_names(tmp_path: Path) -> None:
    recs = _records(5, batch=32)
    rows = [
        {"step": r.step, **{f"rlvr/{k}": v for k, v in r.to_dict().items() if k not in ("step", "my/metric")}}
        for r in recs
    ]
    _write_tb(tmp_path / "tb", rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = read_tensorboard(tmp_path / "tb")
    got = _dicts(run)
    want = [{k: v for k, v in r.to_dict().items() if k != "my/metric"} for r in recs]
    assert [d.keys() for d in got] == [d.keys() for d in want]
    for g, w in zip(got, want, strict=True):
        assert g == pytest.approx(w, rel=1e-6)  # float32 scalars
    assert run.name == "tb"


def test_tensorboard_trl_names_train_prefix(tmp_path: Path) -> None:
    rows = [
        {
            "step": i,
            "train/reward": 0.1 * i,
            "train/learning_rate": 1e-6,
            "train/kl": 0.01,
            "train/entropy": 1.0,
            "train/batch": 16.0,
            "train/epoch": 0.1 * i,
        }
        for i in range(1, 5)
    ]
    _write_tb(tmp_path / "runs" / "trl", rows)
    run = load_run(tmp_path / "runs")  # a directory holding one run directory
    assert run.array("samples").tolist() == [16, 32, 48, 64]
    assert run.array("reward_mean").tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert run.records[0].extra["train/epoch"] == pytest.approx(0.1)


def test_tensorboard_verl_names_event_file_path(tmp_path: Path) -> None:
    rows = [
        {
            "step": i,
            "critic/score/mean": 0.5,
            "actor/kl_loss": 0.02,
            "actor/ppo_kl": 0.001,
            "training/global_step": float(i),
            "samples": 64.0 * i,
        }
        for i in range(1, 4)
    ]
    _write_tb(tmp_path / "verl", rows)
    (event_file,) = (tmp_path / "verl").iterdir()
    run = load_run(event_file)
    assert run.array("batch").tolist() == [64, 64, 64]
    assert run.records[0].kl == pytest.approx(0.02)
    assert run.records[0].extra["actor/ppo_kl"] == pytest.approx(0.001)


def test_tensorboard_own_writer_tensor_scalars(tmp_path: Path) -> None:
    """tensorboard's own writer logs TF2-style scalar tensors (metadata on the first value only)."""
    from tensorboard.summary import Writer

    w = Writer(str(tmp_path / "tf2"))
    for i in range(1, 4):
        w.add_scalar("reward", 0.25 * i, i)
        w.add_scalar("samples", 32.0 * i, i)
        w.add_scalar("learning_rate", 1e-6, i)
    w.close()
    run = read_tensorboard(tmp_path / "tf2")
    assert run.array("samples").tolist() == [32, 64, 96]
    assert run.array("reward_mean").tolist() == [0.25, 0.5, 0.75]
    assert run.lr == pytest.approx(1e-6)


def test_tensorboard_resumed_run_later_file_wins(tmp_path: Path) -> None:
    logdir = tmp_path / "tb"
    first = [{"step": i, "reward": 0.1 * i, "batch": 8.0} for i in range(1, 7)]
    resumed = [{"step": i, "reward": 1.0, "batch": 8.0} for i in range(4, 9)]  # from a step-3 checkpoint
    _write_tb(logdir, first, filename_suffix=".a")
    _write_tb(logdir, resumed, filename_suffix=".b")
    assert len(list(logdir.iterdir())) == 2
    with pytest.warns(IngestWarning, match="logged again"):
        run = read_tensorboard(logdir)
    assert [r.step for r in run] == list(range(1, 9))
    assert run.array("reward_mean").tolist() == pytest.approx([0.1, 0.2, 0.3, 1, 1, 1, 1, 1])


def test_tensorboard_dir_without_events_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(IngestError, match="no TensorBoard event files"):
        read_tensorboard(tmp_path / "empty")


# -- dispatch ----------------------------------------------------------------------------------


def test_load_runs_expands_a_sweep_directory(tmp_path: Path) -> None:
    for b in (16, 32):
        write_jsonl(tmp_path / "sweep" / f"b{b}.jsonl", _records(3, batch=b))
    _write_tb(tmp_path / "sweep" / "tb64", [{"step": i, "reward": 0.5, "batch": 64.0} for i in (1, 2)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        runs = load_runs(tmp_path / "sweep")
        assert sorted(r.name for r in runs) == ["b16", "b32", "tb64"]
        assert {r.name: r.batch for r in runs} == {"b16": 16, "b32": 32, "tb64": 64}
        with pytest.raises(IngestError, match="3 runs"):
            load_run(tmp_path / "sweep")
        runs = load_runs([tmp_path / "sweep" / "b16.jsonl", str(tmp_path / "sweep" / "b32.jsonl")])
    assert [r.name for r in runs] == ["b16", "b32"]


def test_load_run_sniffs_jsonl_without_suffix(tmp_path: Path) -> None:
    p = tmp_path / "log.txt"
    p.write_text(json.dumps({"step": 1, "samples": 4, "reward": 1.0}) + "\n")
    assert load_run(p, name="x").name == "x"


def test_load_run_unknown_format_and_missing_path(tmp_path: Path) -> None:
    p = tmp_path / "log.bin"
    p.write_bytes(b"\x00\x01garbage")
    with pytest.raises(IngestError, match="unknown log format"):
        load_run(p)
    with pytest.raises(IngestError, match="no such file"):
        load_run(tmp_path / "missing.jsonl")


def test_load_run_passes_user_aliases(tmp_path: Path) -> None:
    p = tmp_path / "custom.jsonl"
    p.write_text("".join(json.dumps({"it": i, "rollouts": 4 * i, "acc": 0.1 * i}) + "\n" for i in (1, 2)))
    run = load_run(p, aliases={"it": "step", "rollouts": "samples", "acc": "reward_mean"})
    assert run.array("reward_mean").tolist() == pytest.approx([0.1, 0.2])


# -- writer ------------------------------------------------------------------------------------


def test_jsonl_writer_appends_flushed_lines(tmp_path: Path) -> None:
    p = tmp_path / "live.jsonl"
    recs = _records(4)
    with JsonlWriter(p) as w:
        w.write(recs[0])
        assert p.read_text().count("\n") == 1  # on disk before close
    with JsonlWriter(p, fsync=True) as w:  # reopening appends
        for r in recs[1:]:
            w.write(r)
    lines = p.read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [1, 2, 3, 4]


def test_jsonl_writer_cuts_a_truncated_last_line_before_appending(tmp_path: Path) -> None:
    p = tmp_path / "crashed.jsonl"
    recs = _records(3)
    write_jsonl(p, recs[:2])
    with open(p, "a") as fh:
        fh.write('{"step": 3, "sam')  # killed mid-write
    with pytest.warns(IngestWarning, match=r"crashed.jsonl:3: cut a truncated last line"):
        w = JsonlWriter(p)
    w.write(recs[2])
    w.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)  # the unknown extra name
        run = read_jsonl(p)
    assert [r.step for r in run] == [1, 2, 3]


def test_writer_leaves_out_nonfinite_values(tmp_path: Path) -> None:
    r = StepRecord(step=1, samples=4, batch=4, lr=math.nan, reward_mean=1.0, extra={"x": math.inf})
    p = write_jsonl(tmp_path / "r.jsonl", [r])
    assert json.loads(p.read_text()) == {"step": 1, "samples": 4, "batch": 4, "reward_mean": 1.0}


@pytest.mark.parametrize("names", ["canonical", "trl", "verl"])
def test_synthetic_framework_logs_read_back(tmp_path: Path, names: str) -> None:
    from rlvr_schedule.synthetic import make_sweep, write_run_log

    runs = make_sweep([16, 64], critical_batch=128, failure_samples=5000, seed=1, steps=20, names=names)
    for run in runs:
        write_run_log(tmp_path / f"{run.name}.jsonl", run, names)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # framework names are all known
        loaded = load_runs(tmp_path)
    assert [r.name for r in loaded] == sorted(r.name for r in runs)
    for got, want in zip(loaded, sorted(runs, key=lambda r: r.name), strict=True):
        drop = {"num_tokens"}  # TRL's token counter lands in extra
        g = [{k: v for k, v in d.items() if k not in drop} for d in _dicts(got)]
        w = [{k: v for k, v in d.items() if k not in drop} for d in _dicts(want)]
        assert g == w
        assert [r.step for r in got] == [r.step for r in want]


def test_trainer_state_json_log_history(tmp_path: Path, ingest_data: Path) -> None:
    rows = [json.loads(line) for line in (ingest_data / "trl_log_history.jsonl").read_text().splitlines()]
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps({"global_step": 5, "log_history": rows}, indent=2))
    run = load_run(p)
    assert run.array("samples").tolist() == [32, 64, 96, 128, 160]
    rows[2]["step"] = 9
    p.write_text(json.dumps(rows, indent=2))  # a bare list works too; errors name the entry
    with pytest.raises(IngestError, match=r"state.json \(\[3\]\), field 'step': step 4 comes after step 9"):
        load_run(p)


def test_logs_of_the_plugin_sinks_read_back(tmp_path: Path) -> None:
    """The JSONL and TensorBoard sinks write records and decisions into one log; readers keep records."""
    from rlvr_schedule.plugins.sinks import JsonlSink, TensorBoardSink
    from rlvr_schedule.records import Decision

    recs = [
        StepRecord(step=i, samples=16 * i, batch=16, lr=1e-6, reward_mean=0.1 * i, entropy=1.0)
        for i in range(1, 5)
    ]
    sinks = [JsonlSink(tmp_path / "sink.jsonl"), TensorBoardSink(tmp_path / "tb")]
    for r in recs:
        d = Decision(
            step=r.step,
            samples=r.samples,
            batch=32 if r.step == 4 else 16,
            lr=1e-6,
            stage=0,
            switched=r.step == 4,
            reason="test",
        )
        for s in sinks:
            s.rlvr_schedule_on_record(r)
            s.rlvr_schedule_on_decision(d, r)
    for s in sinks:
        s.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from_jsonl = load_run(tmp_path / "sink.jsonl")
        from_tb = load_run(tmp_path / "tb")
    want = [r.to_dict() for r in recs]
    assert _dicts(from_jsonl) == want
    for got, w in zip(_dicts(from_tb), want, strict=True):
        assert {k: v for k, v in got.items() if not k.startswith("rlvr/decision")} == pytest.approx(w)
        assert "rlvr/decision/batch" in got


def test_generic_log_file_names_take_the_run_directory_name(tmp_path):
    from rlvr_schedule.ingest import load_run, load_runs, write_jsonl
    from rlvr_schedule.records import StepRecord

    for b in (8, 16):
        d = tmp_path / "sweep" / f"batch{b}"
        d.mkdir(parents=True)
        write_jsonl(d / "metrics.jsonl", [StepRecord(step=1, samples=b, batch=b, lr=1e-3, reward_mean=0.1)])
    assert load_run(tmp_path / "sweep" / "batch8" / "metrics.jsonl").name == "batch8"
    assert [r.name for r in load_runs(tmp_path / "sweep")] == ["batch16", "batch8"]
    paths = sorted((tmp_path / "sweep").glob("*/metrics.jsonl"))
    assert [r.name for r in load_runs(paths)] == ["batch16", "batch8"]
