"""``rlvr-trainer probe``: the big batch's gradient is the trainer's own, and the command writes its
reading."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from rlvr_trainer.cli import main
from rlvr_trainer.config import TrainConfig
from rlvr_trainer.experiments.probe import _batch_gradient
from rlvr_trainer.grpo import group_advantages
from rlvr_trainer.rollout import Rollout


@pytest.mark.parametrize("loss_type", ["token_mean", "grpo"])
def test_big_batch_gradient_is_the_weighted_sum_of_its_small_batches(tiny_model_dir, loss_type):
    """The probe builds each big batch's gradient from its small batches' (weighted by tokens under
    token_mean, equally under per-sequence losses); that must be the gradient of the big batch
    itself, or the two sizes would not measure the same loss."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    cfg = TrainConfig(model=str(tiny_model_dir), rollout="hf", group_size=4, loss_type=loss_type)
    trainer = SimpleNamespace(
        cfg=cfg, model=model, tokenizer=tok, device=torch.device("cpu"), compute_dtype=torch.float32
    )
    gen = torch.Generator().manual_seed(0)
    rollouts = []
    for i in range(16):  # completions of different lengths: token weights differ from 1/m
        prompt = tok(f"Q:{i % 7}+{i % 5}=A:")["input_ids"]
        n = 1 + int(torch.randint(0, 6, (1,), generator=gen))
        comp = torch.randint(3, len(tok), (n,), generator=gen).tolist()
        rollouts.append(Rollout(prompt, comp, "", True))
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0] * 2 + [0.0, 1.0, 1.0, 1.0] * 2)
    adv = group_advantages(rewards, 4)
    full, tokens = _batch_gradient(trainer, rollouts, adv)
    parts = [_batch_gradient(trainer, rollouts[k : k + 8], adv[k : k + 8]) for k in (0, 8)]
    if loss_type == "token_mean":
        w = [t / tokens for _, t in parts]
        assert w[0] != pytest.approx(0.5)
    else:
        w = [0.5, 0.5]
    combined = w[0] * parts[0][0] + w[1] * parts[1][0]
    assert float(full.norm()) > 0
    assert float((combined - full).norm() / full.norm()) < 1e-5  # fp32 sums in another order


def test_probe_command_writes_its_reading(tmp_path, capsys, tiny_model_dir):
    out = tmp_path / "probe"
    argv = ["probe", "--out", str(out), "--rollout", "hf", "--small", "8", "--big", "16"]
    assert main([*argv, "--units", "3", "--warmup", "1", "--model", str(tiny_model_dir)]) == 0
    res = json.loads((out / "probe.json").read_text())
    assert res["rollouts"] == 3 * 16 + 8
    ns = res["noise_scale"]
    assert ns["units"] == 3 and ns["b_small"] == 8 and ns["b_big"] == 16
    assert ns["sq_small"] > 0 and ns["g2_stable"] in (True, False)  # the Gram check ran
    assert 0.0 <= res["zero_variance_share"] <= 1.0
    text = capsys.readouterr().out
    assert "Noise scale B_simple" in text and "probe.json" in text
    assert (out / "probe.md").read_text().startswith("# Gradient noise scale")


def test_probe_refuses_a_big_batch_that_is_not_a_multiple(tmp_path, capsys):
    assert main(["probe", "--out", str(tmp_path), "--small", "16", "--big", "24", "--rollout", "hf"]) == 2
    assert "big" in capsys.readouterr().err


def test_probe_reads_a_checkpoint_s_weights(tmp_path, tiny_model_dir):
    """--checkpoint probes a run's later weights: same draws' seed, other weights, other norms."""
    run = tmp_path / "run"
    common = ["--rollout", "hf", "--model", str(tiny_model_dir)]
    # base LR 1e-2 without warm-up: two updates move the weights far enough to change every norm
    train = ["train", "--out", str(run), "--batch", "16", "--max-samples", "32", "--base-lr", "1e-2"]
    assert main([*train, "--set", "warmup_samples=0", "--no-progress", *common]) == 0
    ckpt = run / "s0" / "checkpoint.pt"
    assert ckpt.exists()
    probe = ["probe", "--small", "8", "--big", "16", "--units", "2", "--warmup", "1", *common]
    assert main([*probe, "--out", str(tmp_path / "start")]) == 0
    assert main([*probe, "--out", str(tmp_path / "later"), "--checkpoint", str(ckpt)]) == 0
    start = json.loads((tmp_path / "start" / "probe.json").read_text())
    later = json.loads((tmp_path / "later" / "probe.json").read_text())
    assert later["checkpoint"] == str(ckpt) and start["checkpoint"] is None
    assert later["noise_scale"]["sq_small"] != pytest.approx(start["noise_scale"]["sq_small"], rel=1e-3)
