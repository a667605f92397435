"""Rollout + update throughput at a realistic shape: the reference trainer (vLLM CPU rollouts,
packed training step) vs TRL's GRPOTrainer (transformers generate) on the same model and prompts.

    python benchmarks/bench_trainer.py --write runs/bench_trainer.md  (the current figures: benchmarks/PERFORMANCE.md)
    python benchmarks/bench_trainer.py --trl-configs 1t 2t cb --repeats 2 --lengths long_tail fixed256
    python benchmarks/bench_trainer.py --overlap ...   # adds the overlap row (TrainConfig.overlap)

The model is Qwen2-shaped with ~16M parameters (hidden 512, 4 layers, 8 query / 2 KV heads,
FFN 1536, vocabulary 4096, untied, fp32), randomly initialised, built locally (nothing is
downloaded). Its completion lengths are set, not learnt: every embedding carries a constant
component that survives the final RMSNorm, and the EOS row of the output layer reads only that
component, so each sampled token ends the completion with a fixed probability (``long_tail``:
~1%, geometric lengths with mean ~100 capped at 384) or never (``fixed256``: every completion
is 256 tokens). Prompts are ~90 random word tokens, the same list for both trainers; the reward
is a hash of the completion text (0/1), so advantages are non-zero and every update is real.

Each trainer runs in its own process (vLLM pins its process to one thread; the overlap row's
engine runs in a child of its own, so training gets the second core): 1 warm-up update,
then ``--steps`` timed ones. Beside each row, two limits from the same process and rollouts:
pure vLLM generation of the same prompts (same seeds, no training, no weight push), and a plain
forward + backward + AdamW over the same tokens, one unpadded row at a time. Every row records
the 1-minute load average (this is a shared machine) and the completion tokens per update.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

#: per-update phases recorded by ``Trainer.train_step`` (``StepRecord.extra``), in loop order
PHASES = ("generate_s", "wait_s", "reward_s", "logprob_s", "backward_s", "push_s")
SHAPE = dict(
    hidden_size=512,
    num_hidden_layers=4,
    num_attention_heads=8,
    num_key_value_heads=2,
    intermediate_size=1536,
    vocab_size=4096,
    max_position_embeddings=512,
)
PROMPT_TOKENS = (85, 95)
LENGTHS = {"long_tail": {"eos_p": 0.01, "max_tokens": 384}, "fixed256": {"eos_p": 0.0, "max_tokens": 256}}


# --- the benchmark model and prompts -----------------------------------------------------------
_SYLLABLES = [a + b for a in "bcdfghjklmnprstvwz" for b in "aeiou"] + list("aeiou")


def _words(rng, n: int) -> str:
    return " ".join("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(n))


def build_tokenizer(path: Path):
    """A byte-level BPE with 4096 entries (what ``Qwen2Tokenizer``, which vLLM and TRL load for a
    Qwen2 config, expects), trained in ~1 s on generated syllable text."""
    import random

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(0)
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(
        [_words(rng, 50) for _ in range(4000)],
        trainers.BpeTrainer(
            vocab_size=SHAPE["vocab_size"],
            special_tokens=["<pad>", "</s>", "<unk>"],
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk,
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
        padding_side="left",
        model_max_length=SHAPE["max_position_embeddings"],
    )
    tok.save_pretrained(path)
    return tok


def build_model(path: Path, *, eos_p: float, seed: int = 0) -> Path:
    """Save the Qwen2-shaped model and its tokenizer to ``path`` (HF format)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    build_tokenizer(path)
    torch.manual_seed(seed)
    cfg = Qwen2Config(
        **SHAPE,
        tie_word_embeddings=False,
        eos_token_id=1,
        bos_token_id=1,
        pad_token_id=0,
        torch_dtype="float32",
        use_sliding_window=False,
    )
    model = Qwen2ForCausalLM(cfg).float().eval()
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 20.0  # a constant direction dominating the residual stream
        head = model.lm_head.weight
        head[:, 0] = 0.0
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(3, SHAPE["vocab_size"], (8, 128), generator=g)
        y = model.model(input_ids=ids).last_hidden_state.reshape(-1, SHAPE["hidden_size"])
        head[1] = 0.0
        rest = torch.logsumexp(y @ torch.cat([head[:1], head[2:]]).T, dim=-1)  # every logit but EOS
        if eos_p > 0:
            lo, hi = -10.0, 10.0  # bisect the EOS row's weight on the constant component
            for _ in range(60):
                a = (lo + hi) / 2
                p = torch.sigmoid(a * y[:, 0] - rest).mean()
                lo, hi = (a, hi) if p < eos_p else (lo, a)
            head[1, 0] = a
        else:
            head[1, 0] = -50.0 / float(y[:, 0].abs().mean())  # EOS never sampled
    model.generation_config.eos_token_id = 1
    model.generation_config.pad_token_id = 0
    model.save_pretrained(path, safe_serialization=True)
    return path


def prompts(n: int, model_dir: Path, seed: int = 1) -> list[str]:
    """``n`` texts of 85-95 tokens (the same list for both trainers)."""
    import random

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        target, words = rng.randint(*PROMPT_TOKENS), 40
        text = _words(rng, words)
        while len(tok(text, add_special_tokens=False)["input_ids"]) < target:
            text += " " + _words(rng, 1)
        out.append(text)
    return out


def hash_reward(text: str) -> float:
    """A deterministic 0/1 reward (the model is random: a verifier would score every rollout 0)."""
    return float(zlib.crc32(text.encode()) & 1)


# --- like for like: the same span and parts on both sides ------------------------------------------
#: the parts of the span "rollouts in hand -> weights updated", in loop order (``timing_s/<part>``
#: in the reference trainer's records; TRL's are taken by :class:`TrlParts`)
PARTS = ("reward", "pack", "transfer", "reference", "forward", "backward", "optimizer", "sync")


def parts_summary(per_update: list[dict[str, float]]) -> dict[str, float]:
    """Mean seconds per part over the timed updates, and ``other`` = span minus the parts."""
    keys = dict.fromkeys(k for d in per_update for k in d)
    out = {k: sum(d.get(k, 0.0) for d in per_update) / len(per_update) for k in keys}
    out["other"] = out.get("span", math.nan) - sum(out.get(k, 0.0) for k in PARTS)
    return out


class TrlParts:
    """TRL ``GRPOTrainer``'s update timed over the reference trainer's span and parts
    (:class:`rlvr_trainer.timing.PartClock`: the monotonic clock on the CPU, CUDA events on a
    GPU). The span opens when ``_generate`` returns (the completions in hand) and closes at
    ``on_step_end`` (after clipping, the AdamW step, the LR scheduler and ``zero_grad``). Parts:
    ``reward`` (``_calculate_rewards``), ``pack`` (the rest of ``_generate_and_score_completions``:
    decoding, padding, masks, advantages), ``forward`` (``compute_loss``, TRL's host syncs for its
    metrics included), ``backward`` (``accelerator.backward``), ``optimizer`` (from the last
    backward to ``on_step_end``). TRL has no transfer (it generates on the device) and no
    separate sync."""

    def __init__(self, device: str = "cpu") -> None:
        from rlvr_trainer.timing import PartClock

        self._clock_cls, self.device = PartClock, device
        self.clock = PartClock(device)
        self.updates: list[dict[str, float]] = []
        self._span = self._opt = None

    def install(self, trainer) -> None:
        from transformers import TrainerCallback

        self._wrap(
            trainer, "_generate", "generate", after=lambda: setattr(self, "_span", self.clock.start("span"))
        )
        self._wrap(trainer, "_generate_and_score_completions", "generate_and_score")
        self._wrap(trainer, "_calculate_rewards", "reward")
        self._wrap(trainer, "compute_loss", "forward")
        self._wrap(
            trainer.accelerator,
            "backward",
            "backward",
            after=lambda: setattr(self, "_opt", self.clock.start("optimizer")),
        )
        parts = self

        class EndOfUpdate(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                parts._end_update()

        trainer.add_callback(EndOfUpdate())

    def _wrap(self, obj, method: str, name: str, after=None) -> None:
        inner = getattr(obj, method)

        def timed(*a, **kw):
            with self.clock.part(name):
                out = inner(*a, **kw)
            if after is not None:
                after()
            return out

        setattr(obj, method, timed)

    def _end_update(self) -> None:
        for token in (self._opt, self._span):
            if token is not None:
                self.clock.stop(token)
        sec = self.clock.seconds()
        sec["pack"] = sec.pop("generate_and_score", 0.0) - sec.get("generate", 0.0) - sec.get("reward", 0.0)
        self.updates.append(sec)
        self.clock, self._span, self._opt = self._clock_cls(self.device), None, None


def ours_parts(records) -> list[dict[str, float]]:
    """The reference trainer's parts per update, from its records (``timing_s/<part>``)."""
    return [
        {k.removeprefix("timing_s/"): v for k, v in r.extra.items() if k.startswith("timing_s/")}
        for r in records
    ]


# --- the training step alone: a synthetic batch at the benchmark's shape, timed and profiled --------
def synthetic_rollouts(vocab: int, *, batch: int, max_tokens: int, eos_p: float, seed: int = 0):
    """Prompt and completion ids at the benchmark's shape, without sampling them: prompts of 85-95
    tokens; completion lengths at the quantiles ``(i + 1/2) / batch`` of the length law (each
    token ends the completion with probability ``eos_p``, capped at ``max_tokens``; ``eos_p`` 0:
    all full), in a shuffled order: the expected shape rather than one draw of it."""
    import random

    rng = random.Random(seed)
    if eos_p > 0:
        q = [(i + 0.5) / batch for i in range(batch)]
        lengths = [min(max_tokens, max(1, math.ceil(math.log1p(-u) / math.log1p(-eos_p)))) for u in q]
    else:
        lengths = [max_tokens] * batch
    rng.shuffle(lengths)
    prompts = [[rng.randrange(3, vocab) for _ in range(rng.randint(*PROMPT_TOKENS))] for _ in range(batch)]
    comps = [[rng.randrange(3, vocab) for _ in range(n)] for n in lengths]
    return prompts, comps


def profile_step(
    model_dir: Path,
    *,
    batch: int,
    group: int,
    micro_batch: int,
    max_tokens: int,
    eos_p: float,
    device: str = "cpu",
    steps: int = 3,
    top: int = 20,
    profile: bool = True,
    fused: bool = False,
) -> dict:
    """The packed train step alone, as the trainer takes it (its config's loss, clip, budget):
    one warm-up update (AdamW's state), ``steps`` timed ones part by part (median), then one under
    ``torch.profiler``: the top operators by self time (CUDA time on a GPU, CPU time elsewhere)
    and the seconds inside each part's range. ``fused``: AdamW's fused kernel (a candidate on
    CUDA; the trainer uses the default)."""
    import statistics

    import torch
    from transformers import AutoModelForCausalLM

    from rlvr_trainer.config import TrainConfig
    from rlvr_trainer.device import resolve_compute_dtype
    from rlvr_trainer.grpo import group_advantages, pack_rollouts, packed_update
    from rlvr_trainer.timing import PartClock

    dev = torch.device(device)
    cfg = TrainConfig(
        model=str(model_dir),
        device=device,
        batch=batch,
        group_size=group,
        micro_batch=micro_batch,
        max_tokens=max_tokens,
        max_model_len=SHAPE["max_position_embeddings"],
    )
    cdt = resolve_compute_dtype(cfg.compute_dtype, cfg.dtype, dev)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(dev).train()
    opt = torch.optim.AdamW(
        model.parameters(),
        lr=1e-5,
        betas=cfg.adam_betas,
        weight_decay=cfg.weight_decay,
        **({"fused": True} if fused else {}),  # the trainer's default otherwise (foreach on CUDA)
    )
    prompts, comps = synthetic_rollouts(SHAPE["vocab_size"], batch=batch, max_tokens=max_tokens, eos_p=eos_p)
    adv = group_advantages(torch.randn(batch, generator=torch.Generator().manual_seed(0)), group)

    def update(k: int, clock: PartClock) -> int:
        with clock.part("span"):
            with clock.part("pack"):
                packed = pack_rollouts(
                    prompts, comps, pad_id=0, micro_batch=micro_batch, token_budget=cfg.token_budget(), seed=k
                )
            with clock.part("transfer"):
                packed, a = packed.to(dev), adv.to(dev, non_blocking=True)
            packed_update(
                model,
                opt,
                packed,
                a,
                loss_type=cfg.loss_type,
                max_len=max_tokens,
                clip_low=cfg.clip_low,
                clip_high=cfg.clip_high,
                max_grad_norm=cfg.max_grad_norm,
                compute_dtype=cdt,
                clock=clock,
            )
        return packed.positions

    positions = update(0, PartClock(dev))  # warm-up: AdamW's state, allocator, kernels
    timed, cpu = [], []
    for k in range(1, steps + 1):
        clock, c0 = PartClock(dev), time.process_time()
        update(k, clock)
        timed.append(clock.seconds())
        cpu.append(time.process_time() - c0)
    out: dict = {
        "device": device,
        "threads": torch.get_num_threads(),
        "adamw_fused": fused,
        "batch": batch,
        "micro_batch": micro_batch,
        "completion_tokens": sum(map(len, comps)),
        "positions": positions,
        "parts_median_s": {k: statistics.median(d[k] for d in timed) for k in timed[0]},
        "span_s": [round(d["span"], 3) for d in timed],
        # this process's CPU seconds per update: the work itself, whatever the machine's load
        "cpu_s": [round(c, 3) for c in cpu],
    }
    if not profile:
        return out
    acts = [torch.profiler.ProfilerActivity.CPU]
    if dev.type == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=acts) as prof:
        update(steps + 1, PartClock(dev))
    events = prof.key_averages()
    key = "self_device_time_total" if dev.type == "cuda" else "self_cpu_time_total"
    total = sum(getattr(e, key) for e in events if e.key not in PARTS and e.key != "span") or 1.0
    ops = sorted((e for e in events if getattr(e, key) > 0), key=lambda e: -getattr(e, key))
    out["profile_by"] = key
    out["profile_total_s"] = total / 1e6
    out["top_ops"] = [
        {
            "op": e.key,
            "calls": e.count,
            "self_s": round(getattr(e, key) / 1e6, 4),
            "share": round(getattr(e, key) / total, 4),
        }
        for e in ops
        if e.key not in PARTS and e.key != "span"
    ][:top]
    inclusive = "device_time_total" if dev.type == "cuda" else "cpu_time_total"
    out["ranges_s"] = {
        e.key: round(getattr(e, inclusive) / 1e6, 4) for e in events if e.key in (*PARTS, "span")
    }
    return out


# --- one trainer per process -------------------------------------------------------------------
def run_ours(
    model_dir: Path,
    *,
    batch: int,
    group: int,
    steps: int,
    max_tokens: int,
    out: Path,
    micro_batch: int,
    overlap: bool = False,
) -> dict:
    import torch

    import rlvr_trainer.train as train_mod
    from rlvr_trainer.config import TrainConfig
    from rlvr_trainer.tasks import Problem
    from rlvr_trainer.train import Trainer

    texts = prompts((steps + 2) * batch // group, model_dir)

    class Task:
        def problem(self, i: int) -> Problem:
            return Problem(prompt=texts[i % len(texts)], answer="0")

    cfg = TrainConfig(
        model=str(model_dir),
        batch=batch,
        base_batch=batch,
        group_size=group,
        base_lr=1e-5,
        max_tokens=max_tokens,
        max_model_len=SHAPE["max_position_embeddings"],
        max_samples=10**9,
        micro_batch=micro_batch,
        track_kl=False,
        warmup_samples=0,
        overlap=overlap,
    )
    tr = Trainer(cfg, out / "ours")
    tr.task = Task()
    train_mod.score = lambda comps, golds: [hash_reward(c) for c in comps]
    seen: list[tuple[list, list]] = []
    pack = train_mod.pack_rollouts

    def spy(p, c, **kw):
        seen.append((p, c))
        return pack(p, c, **kw)

    train_mod.pack_rollouts = spy
    load0 = os.getloadavg()[0]
    try:
        t0 = time.perf_counter()
        engine = tr._engine()
        start_s = time.perf_counter() - t0
        tr.train_step(engine)  # warm-up
        t0, c0 = time.perf_counter(), time.process_time()
        recs = [tr.train_step(engine) for _ in range(steps)]
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        timed = seen[1:]
        if tr.prefetch is not None and tr.prefetch.groups is None:
            engine.result()  # overlap: the next batch, already requested
        # limit 1: pure generation of the same prompts with the same seeds (no training, no push)
        g0 = time.perf_counter()
        gen_tokens = 0
        for s in range(1, steps + 1):
            ps = [tr.task.problem(s * batch // group + i).prompt for i in range(batch // group)]
            gen_tokens += sum(
                len(r.completion_ids) for grp in engine.generate(ps, group, step=s) for r in grp
            )
        gen_s = (time.perf_counter() - g0) / steps
        # limit 2: plain unpadded forward + backward + AdamW over the same tokens
        plain_s = plain_step_seconds(tr.model, timed, lr=1e-5)
    finally:
        tr.close()
    # serial: waiting for generation is generating; overlap: the time the trainer blocked on it
    phases = {k: sum(r.extra.get(k, r.extra["generate_s"]) for r in recs) / steps for k in PHASES}
    parts = parts_summary(ours_parts(recs))
    tokens = sum(sum(map(len, c)) for _, c in timed) / steps
    ratio = [r.extra["is_ratio_max"] for r in recs if "is_ratio_max" in r.extra]
    return {
        "name": (
            "rlvr_trainer (overlap: vLLM in a 2nd process, 1 step off-policy)"
            if overlap
            else "rlvr_trainer (vLLM CPU in-process, packed step)"
        ),
        "overlap": overlap,
        "is_ratio_max": max(ratio) if ratio else math.nan,
        # CPU seconds per update (this process + the engine process): over the wall time, the
        # cores the loop actually got on the shared machine
        "cores_used": (cpu + sum(r.extra.get("generate_cpu_s", 0.0) for r in recs)) / wall,
        "threads": torch.get_num_threads(),
        "s_per_update": wall / steps,
        "rollouts_per_s": batch * steps / wall,
        "start_s": start_s,
        "completion_tokens": tokens,
        "gen_limit_s": gen_s,
        "gen_limit_tokens": gen_tokens / steps,
        "plain_step_s": plain_s,
        "load_start": load0,
        "load_end": os.getloadavg()[0],
        "micro_batches": sum(r.extra["micro_batches"] for r in recs) / steps,
        "padded_positions": sum(r.extra["padded_positions"] for r in recs) / steps,
        **phases,
        "parts": parts,
    }


def plain_step_seconds(model, batches: list[tuple[list, list]], *, lr: float) -> float:
    """Mean seconds of a plain update: each row alone (no padding), full logits, one AdamW step."""
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    times = []
    for prompts_, comps in batches:
        n_tok = sum(map(len, comps))
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for p, c in zip(prompts_, comps, strict=True):
            ids = torch.tensor([list(p) + list(c)[:-1]])
            logits = model(input_ids=ids).logits[0, len(p) - 1 :]
            loss = (
                torch.nn.functional.cross_entropy(logits.float(), torch.tensor(list(c)), reduction="sum")
                / n_tok
            )
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    return sum(times) / len(times)


def run_trl(
    model_dir: Path,
    *,
    batch: int,
    group: int,
    steps: int,
    max_tokens: int,
    out: Path,
    micro_batch: int,
    threads: int,
    continuous: bool,
) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(threads)
    texts = prompts((steps + 2) * batch // group, model_dir)
    data = Dataset.from_dict({"prompt": texts})

    def reward(completions, **_):
        return [hash_reward(c) for c in completions]

    times: list[float] = []
    cpus: list[float] = []
    lengths: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter())
            cpus.append(time.process_time())

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs:
                lengths.append(float(logs["completions/mean_length"]))

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    ga = batch // micro_batch
    args = GRPOConfig(
        output_dir=str(out / "trl"),
        per_device_train_batch_size=micro_batch,
        gradient_accumulation_steps=ga,
        num_generations=group,
        max_completion_length=max_tokens,
        max_steps=steps + 1,
        learning_rate=1e-5,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        beta=0.0,
        report_to=[],
        disable_tqdm=True,
        seed=0,
        temperature=1.0,
        gradient_checkpointing=False,
        use_transformers_continuous_batching=continuous,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tok,
        reward_funcs=reward,
        args=args,
        train_dataset=data,
        callbacks=[Clock()],
    )
    parts = TrlParts("cpu")
    parts.install(trainer)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    trainer.train()
    wall = times[-1] - times[0]
    name = f"TRL GRPOTrainer ({'continuous batching' if continuous else 'HF generate'}, {threads} thread" + (
        "s)" if threads > 1 else ")"
    )
    return {
        "name": name,
        "threads": threads,
        "s_per_update": wall / steps,
        "rollouts_per_s": batch * steps / wall,
        "start_s": times[0] - t0,
        "cores_used": (cpus[-1] - cpus[0]) / wall,
        "completion_tokens": batch * sum(lengths[1:]) / max(len(lengths[1:]), 1),
        "parts": parts_summary(parts.updates[1:]),  # the timed updates (after the warm-up)
        "load_start": load0,
        "load_end": os.getloadavg()[0],
    }


_PROBE = (
    "import sys, time, torch\n"
    "torch.set_num_threads(1)\n"
    "a, n, t = torch.randn(384, 384), 0, time.perf_counter()\n"
    "while time.perf_counter() - t < float(sys.argv[1]):\n"
    "    a @ a\n"
    "    n += 1\n"
    "print(n)\n"
)


def core_probe(seconds: float = 4.0) -> dict:
    """How many cores two concurrent 1-thread processes get now: their summed matmul count over
    one process's alone (2.0 on two free cores; 1.0 when other jobs hold one)."""

    def launch(k: int) -> list[int]:
        procs = [
            subprocess.Popen([sys.executable, "-c", _PROBE, str(seconds)], stdout=subprocess.PIPE, text=True)
            for _ in range(k)
        ]
        return [int(p.communicate()[0]) for p in procs]

    load = os.getloadavg()[0]
    alone = launch(1)[0]
    pair = sum(launch(2))
    return {
        "which": "probe",
        "cores": pair / max(alone, 1),
        "load_start": load,
        "load_end": os.getloadavg()[0],
    }


# --- driver ------------------------------------------------------------------------------------
def child(a: argparse.Namespace) -> None:
    from rlvr_trainer.rollout import set_cpu_env

    set_cpu_env()
    lengths = LENGTHS[a.lengths]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        model_dir = build_model(out / "model", eos_p=lengths["eos_p"])
        kw = dict(
            batch=a.batch,
            group=a.group,
            steps=a.steps,
            max_tokens=lengths["max_tokens"],
            out=out,
            micro_batch=a.micro_batch,
        )
        if a.which in ("ours", "overlap"):
            row = run_ours(model_dir, overlap=a.which == "overlap", **kw)
        else:
            threads, cb = {"1t": (1, False), "2t": (2, False), "cb": (1, True)}[a.which]
            row = run_trl(model_dir, threads=threads, continuous=cb, **kw)
    row.update(lengths=a.lengths, which=a.which)
    Path(a.json).write_text(json.dumps(row))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3, help="timed updates (after 1 warm-up)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--lengths", nargs="+", default=["long_tail"], choices=list(LENGTHS))
    ap.add_argument(
        "--trl-configs",
        nargs="*",
        default=["1t"],
        choices=["1t", "2t", "cb"],
        help="1t: 1 thread; 2t: 2 threads; cb: use_transformers_continuous_batching (1 thread)",
    )
    ap.add_argument("--repeats", type=int, default=1, help="repeats, in alternating order")
    ap.add_argument(
        "--start-repeat", type=int, default=0, help="number the repeats from here (odd: reversed order first)"
    )
    ap.add_argument("--overlap", action="store_true", help="also run the trainer in overlap mode")
    ap.add_argument("--probe", action="store_true", help="first measure how many cores two processes get")
    ap.add_argument("--jsonl", type=Path, help="append each finished row to this file as it comes")
    ap.add_argument("--write", type=Path, help="append a markdown section with the results to this file")
    ap.add_argument(
        "--child", choices=["ours", "overlap", "1t", "2t", "cb"], dest="which", help=argparse.SUPPRESS
    )
    ap.add_argument("--child-lengths", dest="child_lengths", help=argparse.SUPPRESS)
    ap.add_argument(
        "--profile",
        action="store_true",
        help="only the train step: time it part by part on a synthetic batch at this shape and profile one "
        "update with torch.profiler (1 thread; --steps timed updates)",
    )
    ap.add_argument("--json", help=argparse.SUPPRESS)
    ap.add_argument(
        "--render", type=Path, nargs="+", help="only print (and --write) the table of saved --jsonl rows"
    )
    a = ap.parse_args()
    if a.render:
        rows = [json.loads(line) for p in a.render for line in p.read_text().splitlines() if line.strip()]
        text = markdown(rows, a)
        print(text)
        if a.write:
            with open(a.write, "a") as fh:
                fh.write("\n" + text)
        return
    if a.which:
        a.lengths = a.child_lengths
        child(a)
        return
    if a.profile:
        text = profile_markdown([profile_row(a, lengths) for lengths in a.lengths], a)
        print(text)
        if a.write:
            with open(a.write, "a") as fh:
                fh.write("\n" + text)
        return

    rows = []
    if a.probe:
        rows.append({**core_probe(), "lengths": "-", "repeat": 0})
        print(f"core probe: {rows[-1]['cores']:.2f} cores", flush=True)
        if a.jsonl:
            with open(a.jsonl, "a") as fh:
                fh.write(json.dumps(rows[-1]) + "\n")
    for lengths in a.lengths:
        order = ["ours", *(["overlap"] if a.overlap else []), *a.trl_configs]
        for rep in range(a.start_repeat, a.start_repeat + a.repeats):
            for which in order if rep % 2 == 0 else order[::-1]:
                with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
                    path = fh.name
                threads = "2" if which == "2t" else "1"
                env = {**os.environ, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
                cmd = [
                    sys.executable,
                    __file__,
                    "--child",
                    which,
                    "--child-lengths",
                    lengths,
                    "--json",
                    path,
                    "--steps",
                    str(a.steps),
                    "--batch",
                    str(a.batch),
                    "--group",
                    str(a.group),
                    "--micro-batch",
                    str(a.micro_batch),
                ]
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, env=env, stderr=subprocess.PIPE, text=True)
                if proc.returncode != 0:  # keep the other rows; say what failed
                    err = (proc.stderr.strip().splitlines() or ["?"])[-1]
                    print(f"{lengths} {which} failed: {err}", flush=True)
                    rows.append({"lengths": lengths, "which": which, "failed": err[:200], "repeat": rep})
                    if a.jsonl:
                        with open(a.jsonl, "a") as fh:
                            fh.write(json.dumps(rows[-1]) + "\n")
                    continue
                row = json.loads(Path(path).read_text())
                os.unlink(path)
                row["repeat"] = rep
                if a.jsonl:
                    with open(a.jsonl, "a") as fh:
                        fh.write(json.dumps(row) + "\n")
                print(
                    f"{lengths} {which} rep {rep}: {row['s_per_update']:.2f} s/update "
                    f"({time.perf_counter() - t0:.0f} s with start-up)",
                    flush=True,
                )
                rows.append(row)
    text = markdown(rows, a)
    print(text)
    if a.write:
        with open(a.write, "a") as fh:
            fh.write("\n" + text)


def profile_row(a: argparse.Namespace, lengths: str) -> dict:
    """:func:`profile_step` at the benchmark's shape for one length law, on 1 thread (as the
    trainer's process runs beside its vLLM engine)."""
    import torch

    torch.set_num_threads(1)
    law = LENGTHS[lengths]
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model(Path(tmp) / "model", eos_p=law["eos_p"])
        load0 = os.getloadavg()[0]
        row = profile_step(
            model_dir,
            batch=a.batch,
            group=a.group,
            micro_batch=a.micro_batch,
            max_tokens=law["max_tokens"],
            eos_p=law["eos_p"],
            steps=a.steps,
        )
    row.update(lengths=lengths, load_start=load0, load_end=os.getloadavg()[0])
    if a.jsonl:
        with open(a.jsonl, "a") as fh:
            fh.write(json.dumps(row) + "\n")
    return row


def profile_markdown(rows: list[dict], a: argparse.Namespace) -> str:
    """The train step's parts (median of the timed updates) and the profile's top operators."""
    lines = [
        f"### {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: the train step alone, Qwen2-shaped 16M "
        f"model, batch {a.batch}, micro-batch {a.micro_batch}, 1 warm-up + {a.steps} timed updates + 1 profiled",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, 1 torch thread.",
        "",
    ]
    for r in rows:
        p = r["parts_median_s"]
        lines += [
            f"{r['lengths']}: {r['completion_tokens']} completion tokens in {r['positions']} padded positions; "
            f"span per timed update {r['span_s']} s (CPU seconds {r['cpu_s']}); "
            f"load {r['load_start']:.1f} / {r['load_end']:.1f}.",
            "",
            "| " + " | ".join(p) + " |",
            "|" + "---|" * len(p),
            "| " + " | ".join(f"{v:.3f}" for v in p.values()) + " |",
            "",
            f"Top operators by self {'CUDA' if r['device'].startswith('cuda') else 'CPU'} time "
            f"(one update under torch.profiler, {r['profile_total_s']:.2f} s in operators):",
            "",
            "| operator | calls | self s | share |",
            "|---|---|---|---|",
            *(
                f"| `{o['op']}` | {o['calls']} | {o['self_s']:.3f} | {100 * o['share']:.1f}% |"
                for o in r["top_ops"]
            ),
            "",
            "Inside each part's range (profiled update, s): "
            + ", ".join(f"{k} {v:.3f}" for k, v in r["ranges_s"].items()),
            "",
        ]
    return "\n".join(lines) + "\n"


def parts_table(rows: list[dict]) -> list[str]:
    """The like-for-like table: each row's span (rollouts in hand -> weights updated) and its parts,
    and per length law the span of the reference trainer over each TRL row's (means over repeats)."""
    rows = [r for r in rows if "parts" in r]
    if not rows:
        return []
    cols = ("span", *PARTS, "other")
    out = [
        "Like for like, rollouts in hand -> weights updated (seconds per update, means of the timed "
        "updates, the monotonic clock on the CPU, CUDA events on a GPU; other = span minus the parts):",
        "",
        "| lengths | rep | trainer | " + " | ".join(cols) + " |",
        "|---|---|---|" + "---|" * len(cols),
    ]
    for r in rows:
        p = r["parts"]
        cells = [f"{p[k]:.3f}" if k in p and not math.isnan(p[k]) else "-" for k in cols]
        out.append(f"| {r['lengths']} | {r.get('repeat', 0) + 1} | {r['name']} | " + " | ".join(cells) + " |")
    out.append("")

    def span(lengths: str, which: str) -> float | None:
        v = [r["parts"]["span"] for r in rows if r["lengths"] == lengths and r["which"] == which]
        return sum(v) / len(v) if v else None

    for lengths in dict.fromkeys(r["lengths"] for r in rows):
        o = span(lengths, "ours")
        for which in dict.fromkeys(r["which"] for r in rows if r["lengths"] == lengths):
            t = span(lengths, which)
            if which in ("ours", "overlap") or o is None or not t:
                continue
            out.append(
                f"- {lengths}: training span rlvr_trainer / TRL {which}: {o / t:.2f}x (lower is faster)."
            )
    return out


def spread(rows: list[dict], lengths: str) -> list[str]:
    """Per trainer: seconds per update, min and median over the repeats, and the CPU seconds per
    update (s/update x cores used: the work, which the machine's load moves far less); then
    TRL's over the reference trainer's by each of the three."""
    import statistics

    def stats(which: str) -> tuple[float, float, float] | None:
        rs = [r for r in rows if r["lengths"] == lengths and r["which"] == which]
        if not rs:
            return None
        wall = [r["s_per_update"] for r in rs]
        cpu = [r["s_per_update"] * r["cores_used"] for r in rs if "cores_used" in r]
        return min(wall), statistics.median(wall), statistics.median(cpu) if cpu else math.nan

    out = []
    ours = stats("ours")
    for which in dict.fromkeys(r["which"] for r in rows if r["lengths"] == lengths):
        st = stats(which)
        n = sum(r["lengths"] == lengths and r["which"] == which for r in rows)
        out.append(
            f"- {lengths}, {which} ({n} repeats): s/update min {st[0]:.2f}, median {st[1]:.2f}; "
            f"CPU s/update median {st[2]:.2f}."
        )
        if ours is not None and which not in ("ours", "overlap"):
            out.append(
                f"- {lengths}: TRL {which} / rlvr_trainer s/update: {st[1] / ours[1]:.2f}x (medians), "
                f"{st[0] / ours[0]:.2f}x (mins), {st[2] / ours[2]:.2f}x (CPU seconds, medians)."
            )
    return out


def markdown(rows: list[dict], a: argparse.Namespace) -> str:
    lines = [
        (
            f"### {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: Qwen2-shaped 16M model, batch {a.batch} "
            f"({a.batch // a.group} prompts x {a.group}), micro-batch {a.micro_batch}, 1 warm-up + {a.steps} "
            "timed updates per row"
        ),
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, shared with other "
        "jobs (the load column is the 1-minute load average at the row's start / end).",
        "",
        (
            "| lengths | rep | trainer | s/update | rollouts/s | completion tokens/update | generate | waited | "
            "reward | logprobs | train step | weight push | limit: vLLM gen only | limit: plain step | "
            "loop / limits | cores used | load |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def s(r: dict, k: str) -> str:
        return f"{r[k]:.2f}" if k in r and not math.isnan(r[k]) else "-"

    for r in rows:
        if r.get("which") == "probe":
            continue
        rep = r.get("repeat", 0) + 1
        if "failed" in r:
            lines.append(f"| {r['lengths']} | {rep} | {r['which']}: failed ({r['failed']}) |" + " - |" * 14)
            continue
        ratio = "-"
        if "gen_limit_s" in r:
            # serial: the limits add up; overlap: the slower of the two is the floor
            lim = (max if r.get("overlap") else sum)((r["gen_limit_s"], r["plain_step_s"]))
            ratio = f"{r['s_per_update'] / lim:.2f}" + (" (of max)" if r.get("overlap") else " (of sum)")
        extra = (
            f" | {s(r, 'gen_limit_s')} ({r['gen_limit_tokens']:.0f} tok) | {s(r, 'plain_step_s')}"
            if "gen_limit_s" in r
            else " | - | -"
        )
        lines.append(
            f"| {r['lengths']} | {rep} | {r['name']} | {r['s_per_update']:.2f} | {r['rollouts_per_s']:.2f} | "
            f"{r['completion_tokens']:.0f} | "
            + " | ".join(s(r, k) for k in PHASES)
            + extra
            + f" | {ratio} | {s(r, 'cores_used')} | {r['load_start']:.1f} / {r['load_end']:.1f} |"
        )
    lines += ["", *parts_table(rows)]
    lines.append("")
    for r in rows:
        if r.get("which") == "probe":
            lines.append(
                f"- core probe: two concurrent 1-thread matmul loops did {r['cores']:.2f}x the work of one "
                f"alone (load {r['load_start']:.1f} / {r['load_end']:.1f})."
            )
    ok = [r for r in rows if "failed" not in r and r.get("which") != "probe"]

    def mean(which: str, lengths: str, key: str = "rollouts_per_s") -> float | None:
        v = [r[key] for r in ok if r["lengths"] == lengths and r["which"] == which]
        return sum(v) / len(v) if v else None

    for lengths in dict.fromkeys(r["lengths"] for r in rows):
        for mine in ("ours", "overlap"):
            o = mean(mine, lengths)
            if o is None:
                continue
            for which in dict.fromkeys(r["which"] for r in ok if r["lengths"] == lengths):
                t = mean(which, lengths)
                if which in ("ours", "overlap") or t is None:
                    continue
                lines.append(
                    f"- {lengths}: rlvr_trainer {mine} / TRL {which}: {o / t:.2f}x (means over repeats)."
                )
        lines += spread(ok, lengths)
        o, v = mean("overlap", lengths), mean("ours", lengths)
        if o is not None and v is not None:
            lines.append(
                f"- {lengths}: overlap / serial rlvr_trainer: {o / v:.2f}x rollouts/s (means over repeats)."
            )
        ov = [r for r in ok if r["lengths"] == lengths and r.get("overlap")]
        if ov:
            worst = max(r.get("is_ratio_max", math.nan) for r in ov)
            lines.append(
                f"- {lengths}: overlap mode's largest importance ratio pi_theta / pi_behaviour: {worst:.3f}."
            )
    lines += [
        "",
        (
            "Phases are per-update means in seconds: generate = vLLM sampling (overlap: in the engine process, "
            "while the trainer trains); waited = time the trainer blocked on generation (serial: all of it); "
            "reward = scoring; logprobs = packing + reference forward (none here: beta = 0, KL tracking off); "
            "train step = packed forward, backward, clip and AdamW; weight push = reload into vLLM + "
            "prefix-cache reset (overlap: the copy into shared memory; the engine reloads in its process). "
            "loop / limits = s/update over (pure generation + plain step) for the serial loop, over their max "
            "for the overlap loop. cores used = CPU seconds of the loop's processes over its wall time "
            "(below 2 in the overlap row: the machine's other jobs held the second core). TRL's loop is not split."
        ),
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
