"""Config validation, presets and the CLI's --dry-run (no weights are loaded)."""

from __future__ import annotations

import json

import pytest

from rlvr_schedule.errors import ConfigError
from rlvr_trainer.cli import main
from rlvr_trainer.config import TrainConfig, preset


@pytest.mark.parametrize(
    "kw,field",
    [
        ({"batch": 30, "group_size": 8}, "batch"),
        ({"loss_type": "nope"}, "loss_type"),
        ({"group_size": 1, "batch": 8}, "group_size"),
        ({"rollout": "sglang"}, "rollout"),
        ({"micro_batch": 0}, "micro_batch"),
        ({"overlap": True, "rollout": "hf"}, "overlap"),
    ],
)
def test_invalid_config_names_the_field(kw, field):
    with pytest.raises(ConfigError, match=f"field '{field}'"):
        TrainConfig(**kw)


def test_config_round_trips_through_json():
    cfg = preset("qwen2.5-math-1.5b")
    again = TrainConfig.from_dict(json.loads(cfg.json()))
    assert again == cfg
    with pytest.raises(ConfigError, match="field 'bogus'"):
        TrainConfig.from_dict({"bogus": 1})


def test_dry_run_counts_qwen_math_parameters(capsys):
    # planned for a CUDA machine (bf16 compute) from this one
    assert main(["sweep", "--preset", "qwen2.5-math-1.5b", "--dry-run", "--device", "cuda"]) == 0
    out = json.loads(capsys.readouterr().out)
    # Qwen2.5-Math-1.5B: 1.54 B parameters (tied embeddings)
    assert out["parameters"] == pytest.approx(1.54e9, rel=0.025)
    assert out["sweep_batches"] == [64, 128, 256, 512, 1024]
    assert max(out["sweep_batches"]) / min(out["sweep_batches"]) == 16
    assert out["config"]["base_lr"] == 1e-6 and out["config"]["group_size"] == 8
    mem = out["memory_bytes"]
    assert mem["total"] == sum(v for k, v in mem.items() if k != "total")
    assert mem["adamw_state"] == 8 * out["parameters"]
    # the padded step held fp32 logits + log-softmax for 8 x 1536 positions x 151,936 (2 x 7.5 GB);
    # the packed step holds three fp32 chunks of 110 completion positions
    assert out["padded_step_logits_bytes"] == 2 * 8 * 1536 * 151936 * 4
    assert mem["logits_chunks"] == 3 * 110 * 151936 * 4 < 0.02 * out["padded_step_logits_bytes"]
    # fp32 master weights, bf16 compute: 35 x hidden + 4 x intermediate x 2 bytes per token and layer
    assert mem["activations_micro_batch"] == 8 * 1536 * 28 * (35 * 1536 + 4 * 8960 * 2)
    assert mem["policy_weights"] == 4 * out["parameters"] == 2 * mem["autocast_weight_copies"]


def test_dry_run_tiny_and_bad_override(capsys):
    assert main(["train", "--dry-run", "--batch", "16"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 1e5 < out["parameters"] < 1e6 and out["config"]["batch"] == 16
    assert main(["train", "--dry-run", "--set", "loss_type=bad"]) == 2
    assert "loss_type" in capsys.readouterr().err


def test_overlap_flag_reaches_the_config(capsys):
    assert main(["train", "--dry-run", "--overlap"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["overlap"] is True
    assert main(["train", "--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["overlap"] is False
    assert main(["train", "--dry-run", "--overlap", "--rollout", "hf"]) == 2
    assert "overlap" in capsys.readouterr().err
