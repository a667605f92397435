"""Atomic checkpoints, RNG streams and log truncation on resume; the character tokenizer."""

from __future__ import annotations

import json
import pathlib
import random
import re

import numpy as np
import pytest
import torch

from rlvr_trainer.checkpoint import (
    FORMAT,
    CheckpointError,
    convert_legacy_checkpoint,
    load_checkpoint,
    load_latest_checkpoint,
    previous_path,
    repair_torn_tail,
    save_checkpoint,
    set_rng_state,
    truncate_jsonl,
)
from rlvr_trainer.model import CHARS, build_tokenizer


def test_checkpoint_round_trip_restores_rng_streams(tmp_path):
    path = tmp_path / "ckpt" / "checkpoint.pt"
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    save_checkpoint(path, {"samples": 96, "schedule": {"kind": "static", "index": 1}})
    expected = (random.random(), float(np.random.rand()), float(torch.rand(())))
    assert not path.with_name(path.name + ".tmp").exists()
    state = load_checkpoint(path)
    assert state["samples"] == 96 and state["schedule"]["index"] == 1
    random.seed(7), np.random.seed(7), torch.manual_seed(7)
    set_rng_state(state["rng"])
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == expected


def test_a_failed_save_keeps_the_previous_checkpoint(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"samples": 8})

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):  # fails half-way through torch.save
        save_checkpoint(path, {"samples": 16, "model": {"w": torch.zeros(3), "bad": Unpicklable()}})
    with pytest.raises(TypeError):  # not plain data: refused before anything is written
        save_checkpoint(path, {"samples": 16, "bad": Unpicklable()})
    assert load_checkpoint(path)["samples"] == 8


class _Payload:
    """Unpickling this calls ``Path.touch`` on ``marker``: any code could run in its place."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def test_a_checkpoint_whose_pickle_would_run_code_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "checkpoint.pt"
    torch.save(
        {"format": FORMAT, "json": "{}", "tensors": {"model": {"w": torch.zeros(1)}, "x": _Payload(marker)}},
        evil,
    )
    with pytest.raises(CheckpointError, match="refused to load"):
        load_checkpoint(evil)
    assert not marker.exists()
    torch.load(evil, weights_only=False)  # the payload is real: a full unpickle runs it
    assert marker.exists()


def test_checkpoint_holds_only_tensors_and_plain_data(tmp_path):
    path = tmp_path / "checkpoint.pt"
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99))
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    sched = {
        "kind": "static",
        "stages": [{"batch": 16, "lr": 1e-4, "until_samples": None}],
        "last": float("nan"),
    }
    save_checkpoint(
        path,
        {
            "model": model.state_dict(),
            "optimizer": opt.state_dict(),
            "schedule": sched,
            "step": 3,
            "samples": 48,
        },
    )
    raw = torch.load(path, weights_only=True)  # what the loader does: no code, no custom classes
    assert set(raw) == {"format", "json", "tensors"} and set(raw["tensors"]) == {
        "model",
        "optimizer",
        "rng_torch",
    }
    state = load_checkpoint(path)
    assert state["step"] == 3 and state["schedule"]["stages"][0]["batch"] == 16
    assert np.isnan(state["schedule"]["last"])
    opt2 = torch.optim.AdamW(torch.nn.Linear(3, 2).parameters(), lr=1.0)
    opt2.load_state_dict(state["optimizer"])
    assert opt2.param_groups[0]["betas"] == (0.9, 0.99) and opt2.param_groups[0]["lr"] == 1e-3
    torch.testing.assert_close(
        opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"]
    )


def test_legacy_checkpoint_is_refused_then_converted(tmp_path):
    path = tmp_path / "checkpoint.pt"
    random.seed(3), np.random.seed(3), torch.manual_seed(3)
    rng = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    torch.save(
        {"format": 1, "rng": rng, "samples": 32, "model": {"w": torch.ones(2)}}, path
    )  # the old layout
    with pytest.raises(CheckpointError, match="convert_legacy_checkpoint"):
        load_checkpoint(path)
    convert_legacy_checkpoint(path)
    state = load_checkpoint(path)
    assert state["samples"] == 32 and torch.equal(state["model"]["w"], torch.ones(2))
    expected = (random.random(), float(np.random.rand()), float(torch.rand(())))
    set_rng_state(state["rng"])
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == expected


def test_truncate_jsonl_keeps_steps_up_to_the_checkpoint(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text(
        "".join(json.dumps({"step": i, "samples": 8 * i}) + "\n" for i in range(1, 6)) + '{"step": 6, "sam'
    )
    truncate_jsonl(p, 3)
    assert [json.loads(x)["step"] for x in p.read_text().splitlines()] == [1, 2, 3]


def test_a_save_keeps_the_checkpoint_before_it(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"samples": 8})
    assert not previous_path(path).exists()
    save_checkpoint(path, {"samples": 16})
    assert load_checkpoint(previous_path(path))["samples"] == 8 and load_checkpoint(path)["samples"] == 16


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda b: b"", "empty checkpoint (0 bytes"),
        (lambda b: b[: len(b) // 2], "damaged checkpoint: truncated or corrupt"),
        (lambda b: bytes(range(256)) * 16, "not a checkpoint"),
    ],
    ids=["zero_bytes", "cut_mid_file", "random_bytes"],
)
def test_a_damaged_checkpoint_is_named_and_the_one_before_it_is_used(tmp_path, caplog, damage, says):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"samples": 8, "step": 1})
    save_checkpoint(path, {"samples": 16, "step": 2})
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(
        CheckpointError, match=re.escape(f"{path.name}: {says}")
    ):  # one line, no traceback of torch's
        load_checkpoint(path)
    with caplog.at_level("WARNING"):
        state, used = load_latest_checkpoint(path)
    assert used == previous_path(path) and state["samples"] == 8
    assert says in caplog.text and "resuming from the checkpoint before it" in caplog.text
    previous_path(path).write_bytes(b"")
    with pytest.raises(CheckpointError, match="and the one before it: .*empty"):
        load_latest_checkpoint(path)


def test_a_torn_last_line_is_cut_with_its_bytes_counted(tmp_path, caplog):
    from rlvr_trainer.config import TrainConfig
    from rlvr_trainer.experiments.rundirs import finished

    p = tmp_path / "metrics.jsonl"
    whole = "".join(json.dumps({"step": i, "samples": 8 * i}) + "\n" for i in range(1, 4))
    torn = '{"step": 4, "sam'
    p.write_text(whole + torn)
    cfg = TrainConfig(max_samples=24)
    (tmp_path / "config.json").write_text(cfg.json())
    with caplog.at_level("WARNING"):
        assert finished(tmp_path, cfg)  # read after the repair: no JSONDecodeError
    assert p.read_text() == whole and f"{len(torn)} bytes dropped" in caplog.text
    p.write_text(whole + '{"step": 4, "samples": 3\n')  # torn, then a newline written (not JSON)
    assert repair_torn_tail(p) == len('{"step": 4, "samples": 3\n') and p.read_text() == whole
    assert repair_torn_tail(p) == 0


def test_character_tokenizer_round_trips_task_text():
    tok = build_tokenizer()
    text = "12+7=\\boxed{19}"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text) and tok.unk_token_id not in ids
    assert tok.decode(ids) == text
    assert len(tok) == 3 + len(set(CHARS))
    assert tok.decode(ids + [tok.eos_token_id], skip_special_tokens=True) == text
