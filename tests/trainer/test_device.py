"""The device-agnostic trainer on the CPU: device resolution and its errors, the precision rule,
the engines' environment split, the memory check, and the batched HF sampler (one ``generate``
per update, seeded per update: a resumed run samples the same)."""

from __future__ import annotations

import json

import pytest
import torch

from rlvr_schedule.errors import ConfigError
from rlvr_trainer.cli import dry_run, main
from rlvr_trainer.config import TrainConfig, preset
from rlvr_trainer.device import ENV_ALL, ENV_CPU, resolve_compute_dtype, resolve_device, set_engine_env


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_device_resolution(no_cuda):
    assert resolve_device("auto").type == "cpu" and resolve_device("cpu").type == "cpu"
    for name in ("cuda", "cuda:1"):
        with pytest.raises(ConfigError, match="no CUDA device") as e:
            resolve_device(name)
        assert e.value.field == "device"
    with pytest.raises(ConfigError, match="device"):
        TrainConfig(device="gpu")
    cpu = torch.device("cpu")
    assert resolve_compute_dtype("auto", "float32", cpu) == torch.float32  # the CPU stays fp32
    assert resolve_compute_dtype("auto", "float32", torch.device("cuda")) == torch.bfloat16


def test_cli_cuda_without_cuda_is_exit_2_without_traceback(no_cuda, capsys):
    assert main(["train", "--device", "cuda", "--max-samples", "8"]) == 2
    err = capsys.readouterr().err
    assert "device" in err and "no CUDA device" in err and "Traceback" not in err


def test_trainer_refuses_cuda_without_cuda(no_cuda, tmp_path):
    from rlvr_trainer.train import Trainer

    with pytest.raises(ConfigError, match="no CUDA device"):
        Trainer(TrainConfig(device="cuda", rollout="hf"), tmp_path)
    assert not (tmp_path / "config.json").exists()  # refused before anything was written


def test_adamw_step_at_lr_1e6_survives_in_fp32_and_rounds_away_in_bf16():
    """Why the GPU presets keep fp32 master weights: an Adam step (~lr in size) on weights of
    order 1e-2 is below bf16's spacing there (2**-14 ~ 6e-5 for 1e-2 <= |w| < 2e-2)."""
    torch.manual_seed(0)
    w0 = 0.01 + 0.005 * torch.rand(4096)
    changed = {}
    for dtype in (torch.float32, torch.bfloat16):
        w = torch.nn.Parameter(w0.to(dtype).clone())
        opt = torch.optim.AdamW([w], lr=1e-6, weight_decay=0.0)
        before = w.detach().clone()
        w.grad = torch.randn_like(w)
        opt.step()
        changed[dtype] = float((w.detach() != before).float().mean())
    assert changed[torch.float32] == 1.0
    assert changed[torch.bfloat16] == 0.0


def test_engine_env_split(monkeypatch):
    for k in {**ENV_ALL, **ENV_CPU}:
        monkeypatch.delenv(k, raising=False)
    set_engine_env(torch.device("cuda"))
    import os

    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert os.environ["TOKENIZERS_PARALLELISM"] == "false" and "VLLM_LOGGING_LEVEL" in os.environ
    assert "OMP_NUM_THREADS" not in os.environ and "VLLM_CPU_KVCACHE_SPACE" not in os.environ
    set_engine_env("cpu")
    assert os.environ["OMP_NUM_THREADS"] == "1" and os.environ["VLLM_CPU_KVCACHE_SPACE"] == "1"


def test_dry_run_memory_terms_and_refusal(capsys):
    gib = 2**30
    cfg = preset("qwen2.5-math-1.5b", device="cuda", rollout="vllm")
    plain = dry_run(cfg, device_memory=140 * gib)
    ckpt = dry_run(cfg.replace(gradient_checkpointing=True), device_memory=140 * gib)
    n, mem = plain["parameters"], plain["memory_bytes"]
    assert mem["policy_weights"] == 4 * n and mem["rollout_engine_weights"] == 2 * n  # master + bf16 copy
    assert mem["vllm_kv_cache"] == int(0.3 * 140 * gib) - 2 * n  # the engine's share beyond its weights
    assert ckpt["memory_bytes"]["activations_micro_batch"] < mem["activations_micro_batch"] / 5
    assert plain["activations_other_checkpointing_gib"] == ckpt["memory_gib"]["activations_micro_batch"]
    assert plain["fits"] is True
    # a device too small: refused, naming the knob
    with pytest.raises(ConfigError, match="gradient_checkpointing=true"):
        dry_run(cfg, device_memory=40 * gib, check=True)
    argv = ["train", "--preset", "qwen2.5-math-1.5b", "--device", "cuda", "--dry-run"]
    assert main([*argv, "--device-memory-gib", "40"]) == 2
    assert "gradient_checkpointing" in capsys.readouterr().err
    assert main([*argv, "--device-memory-gib", "80", "--set", "gradient_checkpointing=true"]) == 0
    assert json.loads(capsys.readouterr().out)["fits"] is True


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_hf_sampling_is_one_batched_generate_per_update(tiny_model_dir, tmp_path, monkeypatch):
    from rlvr_trainer.train import Trainer

    cfg = TrainConfig(
        model=str(tiny_model_dir), rollout="hf", device="cpu", batch=16, base_batch=16, max_samples=32
    )
    calls = []
    with Trainer(cfg, tmp_path) as tr:
        gen = tr.model.generate

        def spy(*a, **kw):
            calls.append(a[0].shape if a else kw["input_ids"].shape)
            return gen(*a, **kw)

        monkeypatch.setattr(tr.model, "generate", spy)
        recs = tr.train()
    assert [tuple(c)[0] for c in calls] == [16, 16]  # every rollout of an update in one call
    for r in recs:
        # the sampler is the policy itself in fp32: its log-probs match the trainer's closely
        assert 0 <= r.extra["sampler_logp_diff_mean"] <= r.extra["sampler_logp_diff_max"] < 1e-3


@pytest.mark.slow
def test_hf_resume_is_exact(tiny_model_dir, tmp_path):
    from rlvr_trainer.train import Trainer

    cfg = TrainConfig(
        model=str(tiny_model_dir),
        rollout="hf",
        device="cpu",
        batch=16,
        base_batch=16,
        base_lr=3e-4,
        max_samples=80,
        micro_batch=8,
        seed=3,
        tis_cap=2.0,
    )
    with Trainer(cfg, tmp_path / "full") as full:
        full.train()
    with Trainer(cfg, tmp_path / "part") as part:
        part.train(max_steps=2)
    with Trainer(cfg, tmp_path / "part") as resumed:
        resumed.train(resume=True)
    m_full, m_part = _rows(tmp_path / "full" / "metrics.jsonl"), _rows(tmp_path / "part" / "metrics.jsonl")
    assert [m["samples"] for m in m_part] == [m["samples"] for m in m_full] == [16, 32, 48, 64, 80]
    for key in ("reward_mean", "response_length", "entropy", "grad_norm"):
        assert [m[key] for m in m_part] == pytest.approx([m[key] for m in m_full], rel=1e-5), key
    assert all(0 < m["tis_weight_mean"] <= 2.0 for m in m_full)


def test_overlap_stays_on_the_cpu(monkeypatch, tmp_path):
    from rlvr_trainer.train import Trainer

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # refused before any CUDA call
    with pytest.raises(ConfigError, match="overlap"):
        Trainer(TrainConfig(device="cuda", overlap=True), tmp_path)
