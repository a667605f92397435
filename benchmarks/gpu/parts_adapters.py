"""The TRL adapter's GPU check parts: ``RlvrScheduleCallback`` in a real TRL ``GRPOTrainer``
on CUDA in bf16, as a GPU user runs it. Three parts, 175 s together:

1. ``adapters.trl_static_resume`` (55 s): a static three-stage schedule on the TRL example's tiny
   model (16 completions per micro-step, steps_per_generation 2: a grid of 32). The uninterrupted
   run applies both switches (accumulation and LR measured at the optimizer); a second run is
   SIGKILLed after its checkpoint at update 5 (one stage in effect, one pending) and resumed in a
   new process: per update, the completions and the LR equal the uninterrupted run's.
2. ``adapters.trl_auto`` (50 s): ``examples/schedules/two_clock_auto.yaml`` as written but for
   ``estimate_samples`` (3,200: 50 updates at the fallback 64; the estimate also waits for 100
   records), on the same host and the example's task (as the run that logged 20 "not runnable"
   errors). No callback error, no "not runnable" log line, every decision logged (JSONL) and on the
   grid, the estimate formed; the stage in effect at the end is the accumulation the trainer ran.
3. ``adapters.trl_overhead`` (70 s): the callback's cost at the shape that measured 1.7% (a 0.4B
   Qwen2 body in bf16, 32 rollouts x 8 completion tokens, 16 per micro-step, accumulation 2), in
   one trainer: after 2 warm-up updates, 5 alternating pairs of 2-update blocks with the callback
   active and bypassed (same schedule, same LR). Reported: the median paired difference of the
   blocks' mean update time and its spread (min, max), the callback's own time per update (host
   clock and CUDA events around its events), the old per-tensor norm against the fused one on the
   same gradients; target: at most 1% of an update.

With ``--small`` (CPU): the tiny model everywhere, fewer updates, no targets.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness import Context, part, peak_memory, sync

PER_DEVICE, S = (
    16,
    2,
)  # 16 completions per micro-step, steps_per_generation 2: runnable batches are multiples of 32
GROUP = 8
THREE_STAGES = {
    "stages": [
        {"batch": 32, "lr": 1e-3, "until_samples": 96},
        {"batch": 64, "lr": 7e-4, "until_samples": 224},
        {"batch": 128, "lr": 5e-4},
    ]
}
STATIC_STEPS, KILL_AFTER = 9, 5  # checkpoint-5: stage 64 in effect, 128 pending (needs an aligned boundary)


def _paths(project: Path) -> None:
    for sub in ("examples", "adapters", "src"):
        p = str(project / sub)
        if p not in sys.path:
            sys.path.insert(0, p)


def _tiny_model(ctx_project: Path, path: Path) -> Any:
    _paths(ctx_project)
    from trl_grpo_cpu import make_tiny_model

    if (path / "tokenizer.json").exists():
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast.from_pretrained(path)
    return make_tiny_model(path)


def _big_model(ctx_project: Path, path: Path) -> Any:
    """The example's tokenizer with a 0.4B Qwen2 body (hidden 896, 24 layers: Qwen2.5-0.5B's shape)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = _tiny_model(ctx_project, path)
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).save_pretrained(path)
    return tok


def _args(device: str, out: Path, **kw: Any) -> Any:
    from trl import GRPOConfig

    cuda = device.startswith("cuda")
    base = dict(
        output_dir=str(out),
        per_device_train_batch_size=PER_DEVICE,
        num_generations=GROUP,
        gradient_accumulation_steps=S,
        steps_per_generation=S,
        max_completion_length=8,
        learning_rate=1e-3,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        bf16=cuda,
        use_cpu=not cuda,
        beta=0.0,
        report_to=[],
        disable_tqdm=True,
        log_level="warning",
        seed=0,
        dataloader_num_workers=0,
    )
    base.update(kw)
    return GRPOConfig(**base)


class _Counted:
    """The example's reward (optionally plus zero-mean noise) counting the completions it scores."""

    def __init__(self, noise: float = 0.0) -> None:
        import random

        from trl_grpo_cpu import repeat_first_word

        self.signal, self.noise, self.rng, self.scored = repeat_first_word, noise, random.Random(0), 0
        self.__name__ = "repeat_first_word"

    def __call__(self, prompts: list[Any], completions: list[Any], **kw: Any) -> list[float]:
        self.scored += len(completions)
        return [r + self.noise * self.rng.gauss(0.0, 1.0) for r in self.signal(prompts, completions)]


def _measure_callback(
    reward: _Counted, device: str, rows: list[dict[str, Any]], out: Path | None = None
) -> Any:
    """A TrainerCallback: per update the completions scored, the LR ``optimizer.step`` used, the
    accumulation count, the wall time (synced); rows appended to ``out`` (JSONL) when given."""
    from transformers import TrainerCallback

    class Measure(TrainerCallback):
        def __init__(self) -> None:
            self.lr = float("nan")
            self.ga = 0
            self.t = time.perf_counter()

        def on_train_begin(self, args, state, control, optimizer=None, **kwargs):
            inner = getattr(optimizer, "optimizer", optimizer)
            inner.register_step_pre_hook(
                lambda opt, *a, **k: setattr(self, "lr", float(opt.param_groups[0]["lr"]))
            )
            sync(device)
            self.t = time.perf_counter()

        def on_step_begin(self, args, state, control, **kwargs):
            self.ga = int(args.gradient_accumulation_steps)

        def on_step_end(self, args, state, control, **kwargs):
            sync(device)
            now = time.perf_counter()
            row = {
                "step": int(state.global_step),
                "completions": reward.scored,
                "lr": self.lr,
                "ga": self.ga,
                "s": now - self.t,
            }
            reward.scored, self.t = 0, now
            rows.append(row)
            if out is not None:
                with out.open("a") as f:
                    f.write(json.dumps(row) + "\n")

    return Measure()


# --- 1. static schedule: the switch applied, and a kill/resume that reproduces it -------------------------
def static_run(project: Path, device: str, work: Path, *, kill_after: int | None, resume: bool) -> list[dict]:
    """One run of the static schedule (a checkpoint per update); SIGKILLs itself once checkpoint
    ``kill_after`` is on disk. Returns the rows measured (also in ``work/measured.jsonl``)."""
    _paths(project)
    from transformers import TrainerCallback
    from trl import GRPOTrainer
    from trl_grpo_cpu import prompt_dataset

    from rlvr_schedule_adapters.trl import RlvrScheduleCallback, find_callback, last_complete_checkpoint

    tok = _tiny_model(project, work / "model")
    reward = _Counted()
    rows: list[dict[str, Any]] = []

    class Kill(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if kill_after is not None and state.global_step >= kill_after:
                os.kill(os.getpid(), signal.SIGKILL)

    ckpt = None
    if resume:
        ckpt = last_complete_checkpoint(work / "run").path
        ckpt = None if ckpt is None else str(ckpt)
    cb = RlvrScheduleCallback(THREE_STAGES, name="gpu-static")
    trainer = GRPOTrainer(
        model=str(work / "model"),
        reward_funcs=reward,
        args=_args(
            device,
            work / "run",
            max_steps=STATIC_STEPS,
            save_strategy="steps",
            save_steps=1,
            restore_callback_states_from_checkpoint=True,
        ),
        train_dataset=prompt_dataset(512),
        processing_class=tok,
        callbacks=[cb, _measure_callback(reward, device, rows, work / "measured.jsonl"), Kill()],
    )
    trainer.train(resume_from_checkpoint=ckpt)
    errors = find_callback(trainer).errors
    if errors:
        raise RuntimeError(f"callback errors: {errors}")
    return rows


def _per_step(path: Path) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        out[int(row["step"])] = row
    return out


@part("adapters.trl_static_resume", seconds=55, small_seconds=300)
def trl_static_resume(ctx: Context) -> dict[str, Any]:
    """TRL GRPOTrainer, static 3-stage schedule on the device: switches applied; SIGKILL + resume reproduces them."""
    import torch

    _paths(ctx.project)
    plain = ctx.workdir / "plain"
    plain.mkdir()
    t0 = time.perf_counter()
    rows = static_run(ctx.project, ctx.device, plain, kill_after=None, resume=False)
    plain_s = time.perf_counter() - t0
    got = [r["completions"] for r in rows]
    stage_lr = {st["batch"]: st["lr"] for st in THREE_STAGES["stages"]}
    # each stage's batch ran, in order, each update at its stage's LR and accumulation
    applied = (
        [b for i, b in enumerate(got) if i == 0 or b != got[i - 1]] == [32, 64, 128]
        and all(abs(r["lr"] - stage_lr[r["completions"]]) <= 1e-12 for r in rows)
        and all(r["ga"] == r["completions"] // PER_DEVICE for r in rows)
    )
    # the killed run and its resume, each in a process of its own
    killed = ctx.workdir / "killed"
    killed.mkdir()
    (killed / "model").symlink_to(plain / "model", target_is_directory=True)
    # the project's sources first, then what the parent had (the offline wheels' --target dir)
    own = [str(ctx.project / s) for s in ("src", "adapters", "examples")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*own, *filter(None, [os.environ.get("PYTHONPATH")])]))
    child = [sys.executable, str(Path(__file__).resolve()), "static", ctx.device, str(killed)]
    first = subprocess.run([*child, "--kill-after", str(KILL_AFTER)], env=env, capture_output=True, text=True)
    second = subprocess.run([*child, "--resume"], env=env, capture_output=True, text=True)
    resumed = _per_step(killed / "measured.jsonl")
    same = [
        resumed.get(r["step"], {}).get("completions") == r["completions"]
        and abs(resumed.get(r["step"], {}).get("lr", float("nan")) - r["lr"]) <= 1e-9 * max(r["lr"], 1.0)
        for r in rows
    ]
    out = {
        "device": ctx.device,
        "dtype": "bfloat16" if ctx.cuda else "float32",
        "completions": got,
        "lr": [r["lr"] for r in rows],
        "ga": [r["ga"] for r in rows],
        "switch_applied": applied,
        "s_per_update": round(plain_s / max(len(rows), 1), 4),
        "killed_rc": first.returncode,
        "killed_at_checkpoint": KILL_AFTER,
        "resume_rc": second.returncode,
        "resumed_completions": [resumed.get(r["step"], {}).get("completions") for r in rows],
        "resume_reproduces": all(same) and first.returncode == -signal.SIGKILL and second.returncode == 0,
        "peak_gib": peak_memory(ctx.device),
        "torch": torch.__version__,
    }
    if second.returncode != 0:
        out["resume_tail"] = (second.stdout + second.stderr)[-1500:]
    if not (out["switch_applied"] and out["resume_reproduces"]):
        raise RuntimeError(json.dumps(out)[:3000])
    return out


# --- 2. two_clock auto with the examples' constraints ---------------------------------------------------
@part("adapters.trl_auto", seconds=50, small_seconds=300)
def trl_auto(ctx: Context) -> dict[str, Any]:
    """TRL GRPOTrainer on the device with examples/schedules/two_clock_auto.yaml: no errors, decisions logged, estimate formed."""
    import logging

    _paths(ctx.project)
    from trl import GRPOTrainer
    from trl_grpo_cpu import prompt_dataset

    from rlvr_schedule.plugins import PluginHost
    from rlvr_schedule.plugins.sinks import JsonlSink
    from rlvr_schedule.policy import read_config
    from rlvr_schedule_adapters.trl import RlvrScheduleCallback, find_callback

    spec = {
        **read_config(ctx.project / "examples" / "schedules" / "two_clock_auto.yaml"),
        "estimate_samples": 3200,
    }
    tok = _tiny_model(ctx.project, ctx.workdir / "model")
    host = PluginHost()
    host.register(JsonlSink(ctx.workdir / "schedule.jsonl"))
    cb = RlvrScheduleCallback(spec, plugins=host)
    reward = _Counted()
    rows: list[dict[str, Any]] = []
    logs: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda rec: logs.append(rec.getMessage())  # type: ignore[method-assign]
    logging.getLogger("rlvr_schedule").addHandler(handler)
    from transformers import TrainerCallback

    class StopAfterSwitch(TrainerCallback):
        left: int | None = None

        def on_step_end(self, args, state, control, **kwargs):
            done = [d for d in cb.decisions if d.switched]
            if self.left is None and done and cb.run.applied == (done[-1].batch, done[-1].lr):
                self.left = 3
            if self.left is not None:
                self.left -= 1
                control.should_training_stop = self.left <= 0

    steps = 160
    trainer = GRPOTrainer(
        model=str(ctx.workdir / "model"),
        reward_funcs=reward,
        args=_args(ctx.device, ctx.workdir / "run", max_steps=steps, max_completion_length=4),
        train_dataset=prompt_dataset(20_000),
        processing_class=tok,
        callbacks=[cb, _measure_callback(reward, ctx.device, rows), StopAfterSwitch()],
    )
    t0 = time.perf_counter()
    trainer.train()
    sync(ctx.device)
    wall = time.perf_counter() - t0
    cb = find_callback(trainer)
    lines = [json.loads(x) for x in (ctx.workdir / "schedule.jsonl").read_text().splitlines()]
    switches = [d for d in cb.decisions if d.switched]
    # each switch the trainer put in effect (a later one may supersede it while it waits for an
    # aligned boundary): the first update at its batch ran it through the accumulation count
    seen = []
    for d in switches:
        after = [r for r in rows if r["step"] > d.step]
        k = next((i for i, r in enumerate(after) if r["completions"] == d.batch), None)
        if k is not None:
            seen.append(after[k]["ga"] == d.batch // PER_DEVICE)
    last = rows[-1] if rows else {}
    noise = cb.schedule.noise
    formed = any(d.trigger == "auto" for d in switches) or noise.b_simple == noise.b_simple
    out = {
        "device": ctx.device,
        "updates": int(trainer.state.global_step),
        "s_per_update": round(wall / max(trainer.state.global_step, 1), 4),
        "callback_errors": [str(e)[:300] for e in cb.errors],
        "not_runnable_lines": sum("not runnable" in x for x in logs),
        "decisions": len(cb.decisions),
        "jsonl_lines": len(lines),
        "grid": cb.driver.grid.multiple if cb.driver.grid is not None else None,
        "setup_notes": cb.grid_notes,
        "all_batches_on_grid": all(d.batch % (PER_DEVICE * S) == 0 for d in cb.decisions)
        and all(r["completions"] % (PER_DEVICE * S) == 0 for r in rows),
        "switches": [(d.step, d.batch, round(d.lr, 10), d.reason[:160]) for d in switches],
        "switches_in_accumulation": seen,
        "stage_in_effect": list(cb.run.applied) if cb.run.applied else None,
        "last_update": last,
        "estimate_formed": formed,
        "noise_estimate": {"n_updates": noise.n_updates, "b_simple": noise.b_simple},
        "records_with_grad_norm_micro": sum(
            1 for x in lines if isinstance((x.get("record") or x).get("grad_norm_micro"), (int, float))
        ),
    }
    ok = (
        not out["callback_errors"]
        and out["not_runnable_lines"] == 0
        and out["all_batches_on_grid"]
        and all(seen)
        and formed
        and cb.run.applied is not None
        and last.get("completions") == cb.run.applied[0]
    )
    if not ok:
        raise RuntimeError(json.dumps(out, default=str)[:3000])
    return out


# --- 3. overhead --------------------------------------------------------------------------------------
def _old_norm(model: Any) -> float:
    """The norm as measured by the earlier callback (a cast, square and sum per tensor, read on the host)."""
    import torch

    sq = [p.grad.detach().float().pow(2).sum() for p in model.parameters() if p.grad is not None]
    return float(torch.sqrt(torch.stack(sq).sum()))


def _time_norms(model: Any, device: str, reps: int = 5) -> dict[str, float]:
    from rlvr_schedule_adapters._torch import grad_sq_norm

    out = {}
    for name, fn in (("old_per_tensor_ms", _old_norm), ("fused_ms", lambda m: float(grad_sq_norm(m)))):
        fn(model)
        sync(device)
        t0 = time.perf_counter()
        for _ in range(reps):
            fn(model)
        sync(device)
        out[name] = round((time.perf_counter() - t0) / reps * 1e3, 3)
    return out


@part("adapters.trl_overhead", seconds=70, small_seconds=400)
def trl_overhead(ctx: Context) -> dict[str, Any]:
    """The callback's cost per update at a 0.4B Qwen2 bf16 shape, 32 x 8 tokens: paired blocks with/without, CUDA events."""
    import torch

    _paths(ctx.project)
    from transformers import TrainerCallback
    from trl import GRPOTrainer
    from trl_grpo_cpu import prompt_dataset

    from rlvr_schedule_adapters.trl import RlvrScheduleCallback

    warm, pairs, block = (2, 5, 2) if not ctx.small else (1, 5, 1)
    tok = (_tiny_model if ctx.small else _big_model)(ctx.project, ctx.workdir / "model")
    cb = RlvrScheduleCallback({"stages": [{"batch": 32, "lr": 1e-5}]})
    state = {"active": True}
    gpu_events: list[tuple[int, Any, Any]] = []
    host_s: dict[int, float] = {}
    step = {"n": 0}

    def wrap(name: str) -> None:
        orig = getattr(cb, name)

        def wrapped(*a: Any, **k: Any) -> Any:
            if not state["active"]:
                return None
            t0 = time.perf_counter()
            if ctx.cuda:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
            r = orig(*a, **k)
            if ctx.cuda:
                e.record()
                gpu_events.append((step["n"], s, e))
            host_s[step["n"]] = host_s.get(step["n"], 0.0) + time.perf_counter() - t0
            return r

        setattr(cb, name, wrapped)

    for name in ("on_substep_end", "on_step_end", "on_log", "on_step_begin"):
        wrap(name)
    order: list[bool] = []
    for i in range(pairs):  # ON-OFF, OFF-ON, ... (each pair's order alternates)
        first = i % 2 == 0
        order += [first] * block + [not first] * block
    rows: list[dict[str, Any]] = []
    reward = _Counted()

    class Toggle(TrainerCallback):
        def on_step_end(self, args, state_, control, **kwargs):
            k = state_.global_step  # updates done; the next one runs under order[k - warm]
            step["n"] = k + 1
            nxt = k - warm
            state["active"] = True if nxt < 0 or nxt >= len(order) else order[nxt]

    steps = warm + len(order)
    trainer = GRPOTrainer(
        model=str(ctx.workdir / "model"),
        reward_funcs=reward,
        args=_args(ctx.device, ctx.workdir / "run", max_steps=steps, learning_rate=1e-5),
        train_dataset=prompt_dataset(4096),
        processing_class=tok,
        callbacks=[cb, Toggle(), _measure_callback(reward, ctx.device, rows)],
    )
    step["n"] = 1
    trainer.train()
    sync(ctx.device)
    for p in trainer.model.parameters():  # gradients of the model's shape and dtype, for the norm timings
        p.grad = torch.randn_like(p)
    norms = _time_norms(trainer.model, ctx.device)
    gpu_ms: dict[int, float] = {}
    for n, s, e in gpu_events:
        gpu_ms[n] = gpu_ms.get(n, 0.0) + s.elapsed_time(e)
    timed = rows[warm:]
    on = [r["s"] for r, a in zip(timed, order, strict=False) if a]
    diffs = []
    for i in range(pairs):
        blk = timed[2 * block * i : 2 * block * (i + 1)]
        acts = order[2 * block * i : 2 * block * (i + 1)]
        t_on = statistics.mean(r["s"] for r, a in zip(blk, acts, strict=True) if a)
        t_off = statistics.mean(r["s"] for r, a in zip(blk, acts, strict=True) if not a)
        diffs.append(t_on - t_off)
    off = [r["s"] for r, a in zip(timed, order, strict=False) if not a]
    update = statistics.median(off)
    active_steps = [warm + 1 + i for i, a in enumerate(order) if a]
    cb_host = [host_s.get(n, 0.0) for n in active_steps]
    cb_gpu = [gpu_ms.get(n, 0.0) for n in active_steps] if ctx.cuda else []
    med = statistics.median(diffs)
    out = {
        "device": ctx.device,
        "shape": "tiny" if ctx.small else "Qwen2 0.4B body (hidden 896, 24 layers), bf16",
        "rollouts_per_update": 32,
        "completion_tokens_max": 8,
        "per_micro_step": PER_DEVICE,
        "accumulation": S,
        "pairs": pairs,
        "updates_per_block": block,
        "update_s_median_without": round(update, 4),
        "update_s_median_with": round(statistics.median(on), 4),
        "paired_diff_ms": [round(d * 1e3, 2) for d in diffs],
        "paired_diff_median_ms": round(med * 1e3, 2),
        "paired_diff_median_pct": round(100 * med / update, 3),
        "paired_diff_spread_ms": [round(min(diffs) * 1e3, 2), round(max(diffs) * 1e3, 2)],
        "callback_host_ms_per_update": round(statistics.median(cb_host) * 1e3, 3),
        "callback_host_pct": round(100 * statistics.median(cb_host) / update, 3),
        "callback_cuda_event_ms_per_update": round(statistics.median(cb_gpu), 3) if cb_gpu else None,
        "norm_timings": norms,
        "callback_errors": [str(e)[:300] for e in cb.errors],
        "grad_norm_micro_last": cb.micro_norm.norm,
        "peak_gib": peak_memory(ctx.device),
    }
    if not ctx.small:
        out["target_pct"] = 1.0
        out["meets_target"] = out["callback_host_pct"] <= 1.0 and out["paired_diff_median_pct"] <= 1.0
    return out


if (
    __name__ == "__main__"
):  # the child of adapters.trl_static_resume: static DEVICE WORK [--kill-after N | --resume]
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["static"])
    ap.add_argument("device")
    ap.add_argument("work", type=Path)
    ap.add_argument("--kill-after", type=int)
    ap.add_argument("--resume", action="store_true")
    a = ap.parse_args()
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    static_run(root, a.device, a.work, kill_after=a.kill_after, resume=a.resume)
