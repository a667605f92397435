"""The reference trainer's GPU check parts (issue: the reference trainer on a GPU).

1. ``trainer.cuda_tests``: the device checks of ``benchmarks/fixtures/cuda_checks.py`` (bf16 packed
   log-probs vs an unpacked reference; SIGKILL + resume with deterministic algorithms);
2. ``trainer.tiny_run``: the tiny preset on CUDA, HF engine, a static two-stage schedule
   (batch 8 for 2,048 rollouts, then 64 for 2,048): the switch applied, and the wall time;
3. ``trainer.vs_trl``: the reference trainer against TRL ``GRPOTrainer``, both on HF generation,
   at Qwen2.5-0.5B's shape (random init, long-tailed lengths, the same prompts): per update
   generation s, rollouts/s, peak memory, and the training span timed like for like (from the
   rollouts in hand to the weights updated, CUDA events, part by part on both sides);
4. ``trainer.profile``: one packed update at the 0.5B shape under ``torch.profiler`` (top
   operators by CUDA time, the parts by CUDA events), and the parts with AdamW ``fused=True``
   and with micro-batches twice as large;
5. ``trainer.step_1p5b``: one update at the Qwen2.5-Math-1.5B shape and the preset's batch on
   synthetic completions of the preset's maximum length: peak memory against ``--dry-run``.

With ``--small`` every part runs CPU-sized shapes (to test the check, no targets).
"""

from __future__ import annotations

import gc
import json
import time
from typing import Any

from harness import Context, part, peak_memory, sync


@part("trainer.cuda_tests", seconds=70, small_seconds=300)  # H200: 60 s
def cuda_tests(ctx: Context) -> dict[str, Any]:
    """The trainer's device checks (``benchmarks/fixtures/cuda_checks.py``, asserted by
    tests/trainer/test_cuda.py): bf16 packed vs unpacked log-probs; SIGKILL + resume."""
    from benchmarks.fixtures.cuda_checks import BF16_TOL, EXPECTED_BATCHES, packed_vs_unpacked, sigkill_resume
    from rlvr_trainer.model import ensure_tiny_model

    t0 = time.perf_counter()
    bf16 = packed_vs_unpacked(ctx.device)
    resume = sigkill_resume(ctx.device, ensure_tiny_model(), ctx.workdir / "sigkill_resume")
    failed = [
        name
        for name, ok in (
            ("bf16 tolerance", bf16["max"] <= BF16_TOL["max"] and bf16["mean"] <= BF16_TOL["mean"]),
            ("kill and resume", resume["killed"] and resume["returncodes"][::2] == [0, 0]),
            ("batches", resume["batches"] == EXPECTED_BATCHES),
            (
                "equal decisions, samples, metrics",
                all(resume[k] for k in ("decisions_equal", "samples_equal", "metrics_equal")),
            ),
            ("CUDA RNG in the checkpoint", resume["rng_cuda_saved"] is not False),
        )
        if not ok
    ]
    out = {"figures": [bf16, resume], "seconds": round(time.perf_counter() - t0, 1), "failed": failed}
    if failed:
        raise RuntimeError(json.dumps(out)[:3000])
    return out


@part("trainer.tiny_run", seconds=55, small_seconds=300)  # H200: 44 s
def tiny_run(ctx: Context) -> dict[str, Any]:
    """Tiny preset on the device, HF engine, static two-stage schedule 8 -> 64 (2,048 rollouts each)."""
    import torch

    from rlvr_schedule.policy import StaticSchedule
    from rlvr_schedule.records import Stage
    from rlvr_schedule.theory.scaling import lr_for_batch
    from rlvr_trainer.config import preset
    from rlvr_trainer.train import Trainer

    b1, b2, per = (8, 16, 64) if ctx.small else (8, 64, 2048)
    cfg = preset("tiny", rollout="hf", device=ctx.device, batch=b1, max_samples=2 * per)
    lr = [lr_for_batch(b, cfg.base_batch, cfg.base_lr, rule=cfg.lr_rule) for b in (b1, b2)]
    sched = StaticSchedule([Stage(batch=b1, lr=lr[0], until_samples=per), Stage(batch=b2, lr=lr[1])])
    t0 = time.perf_counter()
    with Trainer(cfg, ctx.workdir / "tiny", schedule=sched) as tr:
        start_s = time.perf_counter() - t0
        eng = tr._engine()
        recs, stamps = [], []
        t1 = time.perf_counter()
        while tr.samples < cfg.max_samples:
            r = tr.train_step(eng)
            tr.driver.observe(r)
            recs.append(r)
            stamps.append(time.perf_counter())
        sync(ctx.device)
        wall = time.perf_counter() - t1
        weights_dtype = str(next(tr.model.parameters()).dtype)
        dev = str(next(tr.model.parameters()).device)
        compute = str(tr.compute_dtype)
    st1 = [i for i, r in enumerate(recs) if r.batch == b1]
    st2 = [i for i, r in enumerate(recs) if r.batch == b2]
    t_st1 = stamps[st1[-1]] - t1 if st1 else None
    t_st2 = stamps[st2[-1]] - stamps[st2[0] - 1] if st2 and st2[0] > 0 else None
    return {
        "device": dev,
        "weights_dtype": weights_dtype,
        "compute_dtype": compute,
        "batches": [b1, b2],
        "rollouts_per_stage": per,
        "updates": len(recs),
        "updates_per_stage": [len(st1), len(st2)],
        "switch_applied": bool(st2) and recs[st2[0]].samples == per + b2,
        "lr_per_stage": [recs[st1[0]].lr, recs[st2[0]].lr] if st1 and st2 else None,
        "loop_s": round(wall, 2),
        "stage_wall_s": [round(t_st1, 2) if t_st1 else None, round(t_st2, 2) if t_st2 else None],
        "start_s": round(start_s, 2),
        "s_per_update": [
            round(t_st1 / len(st1), 4) if t_st1 else None,
            round(t_st2 / len(st2), 4) if t_st2 else None,
        ],
        "reward_first_last": [recs[0].reward_mean, recs[-1].reward_mean],
        "sampler_logp_diff_max": max(r.extra["sampler_logp_diff_max"] for r in recs),
        "sampler_logp_diff_mean": sum(r.extra["sampler_logp_diff_mean"] for r in recs) / len(recs),
        "cuda": torch.cuda.is_available(),
    }


#: Qwen2.5-0.5B's body (hidden 896, 24 layers, 14 query / 2 KV heads, FFN 4864) over the CPU
#: benchmark's 4,096-entry tokenizer, random init (benchmarks/bench_trainer.py builds it).
SHAPE_05B = dict(
    hidden_size=896,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    intermediate_size=4864,
    vocab_size=4096,
    max_position_embeddings=512,
)


def _bench_model(ctx: Context) -> tuple[Any, Any, dict]:
    import bench_trainer as bt

    if not ctx.small:
        bt.SHAPE.update(SHAPE_05B)
    lengths = dict(bt.LENGTHS["long_tail"])
    if ctx.small:
        lengths["max_tokens"] = 48
    path = ctx.workdir / "model"
    bt.build_model(path, eos_p=lengths["eos_p"])
    return bt, path, lengths


@part("trainer.vs_trl", seconds=135, small_seconds=600)  # H200: > 110 s with 2 timed updates
def vs_trl(ctx: Context) -> dict[str, Any]:
    """Reference trainer vs TRL GRPOTrainer, both on HF generation, Qwen2.5-0.5B shape, long tail."""
    import torch

    bt, model_dir, lengths = _bench_model(ctx)
    # on an H200 one update with HF generation of up to 384 tokens takes ~10-14 s on either side
    batch, group, micro, steps = (16, 8, 8, 1) if ctx.small else (64, 8, 16, 2)
    max_tokens = lengths["max_tokens"]
    texts = bt.prompts((steps + 2) * batch // group, model_dir)
    out: dict[str, Any] = {"shape": dict(bt.SHAPE), "batch": batch, "group": group, "micro_batch": micro}
    out["timed_updates"], out["max_tokens"], out["eos_p"] = steps, max_tokens, lengths["eos_p"]
    ctx.report(**out)
    out["ours"] = _ours(ctx, bt, model_dir, texts, batch, group, micro, steps, max_tokens)
    ctx.report(ours=out["ours"])
    gc.collect()
    if ctx.cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    try:
        out["trl"] = _trl(ctx, bt, model_dir, texts, batch, group, micro, steps, max_tokens)
    except ImportError as exc:
        out["trl"] = {
            "error": f"TRL not importable here: {exc!r} (carry its wheels: benchmarks/gpu/README.md)"
        }
        return out
    o, t = out["ours"], out["trl"]
    # like for like: the span from the rollouts in hand to the weights updated, on both sides
    span_o, span_t = o["parts_s"].get("span"), t["parts_s"].get("span")
    out["training_ratio_ours_over_trl"] = round(span_o / span_t, 3) if span_o and span_t else None
    # the earlier, unequal spans (ours: packing to sync, host wall; TRL: update wall minus its
    # _generate_and_score_completions), kept for comparison with earlier runs
    out["wall_training_ratio_ours_over_trl"] = (
        round(o["train_s"] / t["train_s"], 3) if t.get("train_s") else None
    )
    out["loop_ratio_ours_over_trl"] = round(o["s_per_update"] / t["s_per_update"], 3)
    ratio = out["training_ratio_ours_over_trl"]
    out["target_training_le_1x"] = bool(ratio <= 1.0) if ratio is not None and not ctx.small else None
    out["goal_training_le_half"] = bool(ratio <= 0.5) if ratio is not None and not ctx.small else None
    return out


def _ours(ctx, bt, model_dir, texts, batch, group, micro, steps, max_tokens) -> dict[str, Any]:
    import rlvr_trainer.train as train_mod
    from rlvr_trainer.config import TrainConfig
    from rlvr_trainer.tasks import Problem
    from rlvr_trainer.train import Trainer

    class Task:
        def problem(self, i: int) -> Problem:
            return Problem(prompt=texts[i % len(texts)], answer="0")

    cfg = TrainConfig(
        model=str(model_dir),
        rollout="hf",
        device=ctx.device,
        batch=batch,
        base_batch=batch,
        group_size=group,
        base_lr=1e-5,
        max_tokens=max_tokens,
        max_model_len=bt.SHAPE["max_position_embeddings"],
        max_samples=10**9,
        micro_batch=micro,
        track_kl=False,
        warmup_samples=0,
    )
    train_mod.score = lambda comps, golds: [bt.hash_reward(c) for c in comps]
    with Trainer(cfg, ctx.workdir / "ours") as tr:
        tr.task = Task()
        eng = tr._engine()
        tr.train_step(eng)  # warm-up
        sync(ctx.device)
        peak_memory(ctx.device, reset=True)
        t0 = time.perf_counter()
        recs = [tr.train_step(eng) for _ in range(steps)]
        sync(ctx.device)
        wall = time.perf_counter() - t0
        peak = peak_memory(ctx.device)
    gen = sum(r.extra["generate_s"] for r in recs) / steps
    train = sum(r.extra["logprob_s"] + r.extra["backward_s"] for r in recs) / steps
    return {
        "s_per_update": round(wall / steps, 3),
        "generate_s": round(gen, 3),
        "train_s": round(train, 3),  # host wall, packing to the step's sync
        # like for like with TRL's: rollouts in hand -> weights updated, CUDA events per part
        "parts_s": {k: round(v, 4) for k, v in bt.parts_summary(bt.ours_parts(recs)).items()},
        "rollouts_per_s": round(batch * steps / wall, 2),
        "peak_gib": peak,
        "completion_tokens": sum(r.response_length for r in recs) / steps * batch,
        "micro_batches": sum(r.extra["micro_batches"] for r in recs) / steps,
        "sampler_logp_diff_max": max(r.extra["sampler_logp_diff_max"] for r in recs),
        "sampler_logp_diff_mean": sum(r.extra["sampler_logp_diff_mean"] for r in recs) / steps,
    }


def _trl(ctx, bt, model_dir, texts, batch, group, micro, steps, max_tokens) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    gen_times: list[float] = []
    stamps: list[float] = []
    lengths: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            if not stamps:
                sync(ctx.device)
                stamps.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kw):
            sync(ctx.device)
            stamps.append(time.perf_counter())
            if len(stamps) == 2:  # after the warm-up update: peak memory of the timed ones
                peak_memory(ctx.device, reset=True)
            upd = [round(b - a, 3) for a, b in zip(stamps[:-1], stamps[1:], strict=False)]
            ctx.report(trl_update_s=upd, trl_generate_s=[round(x, 3) for x in gen_times])

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs:
                lengths.append(float(logs["completions/mean_length"]))

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    args = GRPOConfig(
        output_dir=str(ctx.workdir / "trl"),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=batch // micro,
        num_generations=group,
        max_completion_length=max_tokens,
        max_steps=steps + 1,
        learning_rate=1e-5,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        use_cpu=not ctx.cuda,
        bf16=ctx.cuda,
        beta=0.0,
        report_to=[],
        disable_tqdm=True,
        seed=0,
        temperature=1.0,
        gradient_checkpointing=False,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tok,
        reward_funcs=lambda completions, **_: [bt.hash_reward(c) for c in completions],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": texts}),
        callbacks=[Clock()],
    )
    inner = trainer._generate_and_score_completions

    def timed(*a, **kw):  # TRL's generation + scoring (+ old log-probs when it takes them)
        sync(ctx.device)
        t = time.perf_counter()
        res = inner(*a, **kw)
        sync(ctx.device)
        gen_times.append(time.perf_counter() - t)
        return res

    trainer._generate_and_score_completions = timed
    parts = bt.TrlParts(ctx.device)  # wraps the wrapper: its span opens when _generate returns
    parts.install(trainer)
    trainer.train()
    peak = peak_memory(ctx.device)
    upd = [b - a for a, b in zip(stamps[:-1], stamps[1:], strict=False)][1:]  # timed updates
    gens = gen_times[-len(upd) :] if len(gen_times) >= len(upd) else gen_times
    wall = sum(upd)
    gen = sum(gens) / max(len(gens), 1)
    return {
        "s_per_update": round(wall / max(len(upd), 1), 3),
        "generate_s": round(gen, 3),
        "train_s": round(wall / max(len(upd), 1) - gen, 3),
        "rollouts_per_s": round(batch * len(upd) / wall, 2) if wall else None,
        "peak_gib": peak,
        "completion_tokens": batch * sum(lengths[1:]) / max(len(lengths[1:]), 1),
        "generate_calls": len(gen_times),
        "parts_s": {k: round(v, 4) for k, v in bt.parts_summary(parts.updates[1:]).items()},
    }


@part("trainer.profile", seconds=150, small_seconds=600)
def profile(ctx: Context) -> dict[str, Any]:
    """One packed update at the Qwen2.5-0.5B shape under torch.profiler: its parts (CUDA events),
    the top operators by CUDA time; then the parts with AdamW fused and with larger micro-batches."""
    bt, model_dir, lengths = _bench_model(ctx)
    batch, group, micro = (16, 8, 8) if ctx.small else (64, 8, 16)
    kw = dict(
        batch=batch, group=group, max_tokens=lengths["max_tokens"], eos_p=lengths["eos_p"], device=ctx.device
    )
    out: dict[str, Any] = {"shape": dict(bt.SHAPE), **{k: v for k, v in kw.items() if k != "device"}}
    out["as_trained"] = bt.profile_step(model_dir, micro_batch=micro, steps=3, top=25, **kw)
    ctx.report(**out)
    # candidates the profile may name: AdamW's fused CUDA kernel; micro-batches too small for the device
    out["adamw_fused"] = bt.profile_step(
        model_dir, micro_batch=micro, steps=3, fused=ctx.cuda, profile=False, **kw
    )
    ctx.report(adamw_fused=out["adamw_fused"])
    out["micro_batch_x2"] = bt.profile_step(model_dir, micro_batch=2 * micro, steps=3, profile=False, **kw)
    return out


@part("trainer.step_1p5b", seconds=40, small_seconds=300)  # H200: 36 s
def step_1p5b(ctx: Context) -> dict[str, Any]:
    """One update at the Qwen2.5-Math-1.5B shape, the preset's batch, max-length completions:
    torch.cuda.max_memory_allocated against the --dry-run estimate (target within 20%)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rlvr_trainer.cli import dry_run
    from rlvr_trainer.config import QWEN25_MATH_15B, preset
    from rlvr_trainer.grpo import group_advantages, pack_rollouts, packed_update

    arch = {k: v for k, v in QWEN25_MATH_15B.items() if k not in ("architectures", "torch_dtype")}
    cfg = preset("qwen2.5-math-1.5b", device=ctx.device, rollout="hf")
    if ctx.small:  # a small Qwen2 and a small batch: exercises the same code on the CPU
        arch.update(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4)
        arch.update(num_key_value_heads=2, vocab_size=1000)
        cfg = cfg.replace(batch=16, micro_batch=4, max_tokens=48, max_model_len=64)
    dev = torch.device(ctx.device)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    with dev:
        model = Qwen2ForCausalLM(Qwen2Config(**arch)).float()
    model.train()
    init_s = time.perf_counter() - t0
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.base_lr, betas=cfg.adam_betas)
    n_prompt, n_comp = cfg.max_model_len - cfg.max_tokens, cfg.max_tokens
    g = torch.Generator().manual_seed(0)
    vocab = arch["vocab_size"]
    prompts = [torch.randint(3, vocab, (n_prompt,), generator=g).tolist() for _ in range(cfg.batch)]
    comps = [torch.randint(3, vocab, (n_comp,), generator=g).tolist() for _ in range(cfg.batch)]
    adv = group_advantages(torch.randn(cfg.batch, generator=g), cfg.group_size, scale=False).to(dev)
    est = {}
    for ckpt in (False, True):
        c = cfg.replace(gradient_checkpointing=ckpt)
        est[ckpt] = dry_run(c)["memory_bytes"]
    results = {}
    for ckpt in (False, True):
        if ckpt:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.config.use_cache = False
        times, peaks = [], []
        for step in range(2 if not ckpt else 1):  # the first builds AdamW's state
            packed = pack_rollouts(
                prompts,
                comps,
                pad_id=0,
                micro_batch=cfg.micro_batch,
                token_budget=cfg.token_budget(),
                seed=f"0/{step}",
            ).to(dev)
            peak_memory(ctx.device, reset=True)
            sync(ctx.device)
            t = time.perf_counter()
            packed_update(
                model,
                opt,
                packed,
                adv,
                loss_type=cfg.loss_type,
                max_len=cfg.max_tokens,
                clip_low=cfg.clip_low,
                clip_high=cfg.clip_high,
                compute_dtype=torch.bfloat16 if ctx.cuda else None,
            )
            sync(ctx.device)
            times.append(time.perf_counter() - t)
            peaks.append(peak_memory(ctx.device))
        e = est[ckpt]["total"] / 2**30
        peak = peaks[-1]
        results["checkpointing" if ckpt else "preset"] = {
            "gradient_checkpointing": ckpt,
            "step_s": [round(x, 2) for x in times],
            "peak_gib": peak,
            "estimate_gib": round(e, 2),
            "estimate_items_gib": {k: round(v / 2**30, 2) for k, v in est[ckpt].items()},
            "peak_over_estimate": round(peak / e, 3) if peak else None,
            "within_20pct": (abs(peak / e - 1) <= 0.2) if peak else None,
        }
    n = sum(p.numel() for p in model.parameters())
    return {
        "parameters": n,
        "batch": cfg.batch,
        "micro_batch": cfg.micro_batch,
        "positions_per_micro_batch": cfg.token_budget(),
        "prompt_tokens": n_prompt,
        "completion_tokens": n_comp,
        "init_s": round(init_s, 2),
        **results,
    }
