"""Atomic checkpoints, RNG streams and log truncation on resume; the character tokenizer."""

from __future__ import annotations

import json
import random

import numpy as np
import torch

from rlvr_trainer.checkpoint import load_checkpoint, save_checkpoint, set_rng_state, truncate_jsonl
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

    try:
        save_checkpoint(path, {"samples": 16, "bad": Unpicklable()})
    except RuntimeError:
        pass
    assert load_checkpoint(path)["samples"] == 8


def test_truncate_jsonl_keeps_steps_up_to_the_checkpoint(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text("".join(json.dumps({"step": i, "samples": 8 * i}) + "\n" for i in range(1, 6)) + '{"step": 6, "sam')
    truncate_jsonl(p, 3)
    assert [json.loads(x)["step"] for x in p.read_text().splitlines()] == [1, 2, 3]


def test_character_tokenizer_round_trips_task_text():
    tok = build_tokenizer()
    text = "12+7=\\boxed{19}"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text) and tok.unk_token_id not in ids
    assert tok.decode(ids) == text
    assert len(tok) == 3 + len(set(CHARS))
    assert tok.decode(ids + [tok.eos_token_id], skip_special_tokens=True) == text
