"""The trainer on CUDA (marked ``cuda``: skipped without a CUDA device; CI is CPU-only).

``benchmarks/gpu/check.py`` runs these on a GPU (part ``trainer.cuda_tests``). With
``RLVR_CHECK_DEVICE=cpu`` they run on the CPU instead (how the check itself is tested without a
GPU); ``RLVR_CHECK_FIGURES=<file>`` appends each test's measured figures there as JSON lines.

- bf16 log-probs of the packed step equal an unpacked per-sequence reference (each rollout alone,
  no padding, full logits) under the same autocast within ``BF16_TOL`` (max abs, nats per token);
- a run killed with SIGKILL mid-update and resumed reproduces the decisions and the samples of an
  uninterrupted one, with ``torch.use_deterministic_algorithms(True)`` and the CUDA RNG state in
  the checkpoint.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

pytestmark = pytest.mark.cuda

#: |packed - unpacked| log-prob per completion token in bf16 autocast: max and mean over tokens.
#: bf16 keeps 8 bits of mantissa: logits of a few units carry errors of ~0.01-0.03 each, and the
#: packed and unpacked forwards round differently (other shapes, other kernels).
BF16_TOL = {"max": 0.15, "mean": 0.02}


@pytest.fixture
def device() -> str:
    want = os.environ.get("RLVR_CHECK_DEVICE")
    if want:
        return want
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    return "cuda"


def _figures(name: str, **vals) -> None:
    path = os.environ.get("RLVR_CHECK_FIGURES")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"test": name, **vals}) + "\n")


def _model(device: str):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=512,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    return Qwen2ForCausalLM(cfg).float().to(device).eval()


def test_bf16_packed_logprobs_equal_an_unpacked_reference(device):
    import random

    from rlvr_trainer.device import autocast
    from rlvr_trainer.grpo import completion_logprobs, pack_rollouts

    dev = torch.device(device)
    model = _model(device)
    rng = random.Random(0)
    prompts = [[rng.randrange(3, 512) for _ in range(rng.randint(4, 40))] for _ in range(12)]
    # long-tailed completion lengths, one of a single token
    comps = [[rng.randrange(3, 512) for _ in range(n)] for n in (1, 3, 7, 12, 20, 30, 45, 60, 80, 5, 9, 100)]
    packed = pack_rollouts(prompts, comps, pad_id=0, micro_batch=4, token_budget=4 * 64, seed=0).to(dev)
    got: dict[int, torch.Tensor] = {}
    with torch.no_grad(), autocast(dev, torch.bfloat16):
        for mb in packed.micro:
            lp, _ = completion_logprobs(model, mb)
            for k, i in enumerate(mb.rows):
                got[i] = lp[k, : len(comps[i])].float()
    diffs, fp32_diffs = [], []
    with torch.no_grad():
        for i, (p, c) in enumerate(zip(prompts, comps, strict=True)):
            ids = torch.tensor([p + c[:-1]], device=dev)
            tgt = torch.tensor(c, device=dev)
            with autocast(dev, torch.bfloat16):
                logits = model(input_ids=ids).logits[0, len(p) - 1 :].float()
            ref = torch.log_softmax(logits, -1).gather(-1, tgt[:, None]).squeeze(-1)
            exact = torch.log_softmax(model(input_ids=ids).logits[0, len(p) - 1 :].float(), -1)
            exact = exact.gather(-1, tgt[:, None]).squeeze(-1)
            diffs.append((got[i] - ref).abs())
            fp32_diffs.append((got[i] - exact).abs())
    d, e = torch.cat(diffs), torch.cat(fp32_diffs)
    fig = {"max": float(d.max()), "mean": float(d.mean()), "tokens": int(d.numel())}
    _figures(
        "bf16_packed_vs_unpacked",
        device=device,
        **fig,
        vs_fp32_max=float(e.max()),
        vs_fp32_mean=float(e.mean()),
    )
    assert fig["max"] <= BF16_TOL["max"] and fig["mean"] <= BF16_TOL["mean"], fig


_CHILD = textwrap.dedent(
    """
    import hashlib, json, os, signal, sys
    import torch
    torch.use_deterministic_algorithms(True)
    from rlvr_schedule.policy import StaticSchedule
    from rlvr_schedule.records import Stage
    from rlvr_trainer.config import TrainConfig
    from rlvr_trainer.train import Trainer

    out, device, model, kill_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    cfg = TrainConfig(model=model, rollout="hf", device=device, batch=16, base_batch=16, base_lr=3e-4,
                      max_samples=160, micro_batch=8, seed=2, checkpoint_every=2)
    sched = StaticSchedule([Stage(batch=16, lr=3e-4, until_samples=64), Stage(batch=32, lr=4.2e-4)])
    with Trainer(cfg, out, schedule=sched) as tr:
        eng = tr._engine()
        gen = eng.generate

        def spy(prompts, n, *, step, **kw):
            if step == kill_at:  # mid-update, after the checkpoint of step kill_at - 1 or earlier
                os.kill(os.getpid(), signal.SIGKILL)
            groups = gen(prompts, n, step=step, **kw)
            ids = [r.completion_ids for g in groups for r in g]
            with open(os.path.join(out, "samples.jsonl"), "a") as fh:
                fh.write(json.dumps({"step": step, "sha": hashlib.sha256(repr(ids).encode()).hexdigest()}) + "\\n")
            return groups

        eng.generate = spy
        tr.train(resume=True)
    """
)


def _run_child(out, device, model, kill_at) -> int:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), CUBLAS_WORKSPACE_CONFIG=":4096:8")
    cmd = [sys.executable, "-c", _CHILD, str(out), device, str(model), str(kill_at)]
    return subprocess.run(cmd, env=env, timeout=600, capture_output=True, text=True).returncode


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_sigkill_and_resume_reproduce_decisions_and_samples(device, tiny_model_dir, tmp_path):
    full, part = tmp_path / "full", tmp_path / "part"
    for d in (full, part):
        d.mkdir()
    assert _run_child(full, device, tiny_model_dir, -1) == 0
    assert _run_child(part, device, tiny_model_dir, 3) == -signal.SIGKILL  # killed in update 4
    assert len(_lines(part / "metrics.jsonl")) == 3  # checkpoint at step 2, one record past it
    assert _run_child(part, device, tiny_model_dir, -1) == 0
    if device.startswith("cuda"):
        ck = torch.load(part / "checkpoint.pt", weights_only=True)
        assert "rng_cuda" in ck["tensors"]
    d_full, d_part = _lines(full / "decisions.jsonl"), _lines(part / "decisions.jsonl")
    m_full, m_part = _lines(full / "metrics.jsonl"), _lines(part / "metrics.jsonl")
    s_full = {r["step"]: r["sha"] for r in _lines(full / "samples.jsonl")}
    s_part = {r["step"]: r["sha"] for r in _lines(part / "samples.jsonl")}  # the last sample of a step wins
    keys = ("reward_mean", "response_length", "entropy", "grad_norm", "batch", "samples", "lr")
    same_metrics = all(a[k] == b[k] for a, b in zip(m_full, m_part, strict=True) for k in keys)
    _figures(
        "sigkill_resume",
        device=device,
        updates=len(m_full),
        batches=[m["batch"] for m in m_full],
        decisions_equal=d_full == d_part,
        samples_equal=s_full == s_part,
        metrics_equal=same_metrics,
        switched=any(d["switched"] for d in d_full),
    )
    assert [m["batch"] for m in m_full] == [16, 16, 16, 16, 32, 32, 32]
    assert d_part == d_full and any(d["switched"] for d in d_full)
    assert s_part == s_full
    assert same_metrics
