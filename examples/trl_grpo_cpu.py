"""GRPO with TRL on CPU, its rollout batch and LR switched mid-run by rlvr-schedule.

A tiny Qwen2 (one layer, hidden 64) and a word-level tokenizer are created locally (no downloads);
the task is verifiable: repeat the prompt's first word (reward = share of completion words equal to
it). ``RlvrScheduleCallback`` feeds TRL's logs to the schedule and applies its switches: rollouts per
update through ``gradient_accumulation_steps`` (``steps_per_generation`` fixed) and the LR through the
optimizer and its scheduler. Records and decisions go to a JSONL file (``rlvr-schedule report`` reads it).

    python examples/trl_grpo_cpu.py                      # built-in two-stage schedule, 12 updates
    python examples/trl_grpo_cpu.py --schedule my.yaml   # any static or two_clock schedule file
    python examples/trl_grpo_cpu.py --resume             # continue from the last complete checkpoint
    python examples/trl_grpo_cpu.py --schedule examples/schedules/trl_two_clock.yaml --advisory

Rollout batches must be multiples of per-device batch x world x steps_per_generation (here 4 x 1 x 2).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

for _k, _v in {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "OMP_NUM_THREADS": "1",
}.items():
    os.environ.setdefault(_k, _v)

# The console is the schedule's: its switch lines and the table below. Deprecation notices from
# transformers and TRL's note on the vLLM version (this example samples with transformers) say
# nothing about this run; every other warning (the schedule's set-up warnings included) stays.
warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", message="TRL currently supports vLLM versions")

#: Two stages: 8 rollouts per update (2 prompts x 4) until 32 rollouts, then 16 at the sqrt-rule LR.
DEFAULT_SCHEDULE = {"stages": [{"batch": 8, "lr": 1e-3, "until_samples": 32}, {"batch": 16, "lr": 1.414e-3}]}
WORDS = [f"w{i}" for i in range(29)]


def make_tiny_model(path: Path) -> Any:
    """Save a tiny untied Qwen2 and a word-level tokenizer under ``path``; return the tokenizer."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    vocab = ["<pad>", "<eos>", "<unk>"] + WORDS
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    ptok = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    cfg = Qwen2Config(
        vocab_size=len(vocab),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=None,
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).save_pretrained(path)
    ptok.save_pretrained(path)
    return ptok


def prompt_dataset(n: int) -> Any:
    """``n`` three-word prompts over the first 20 words (the reward asks for the first one back)."""
    from datasets import Dataset

    return Dataset.from_dict(
        {"prompt": [f"{WORDS[i % 20]} {WORDS[(i * 7) % 20]} {WORDS[(i * 3) % 20]}" for i in range(n)]}
    )


def repeat_first_word(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
    """Verifiable reward: the share of completion words equal to the prompt's first word."""
    out = []
    for p, c in zip(prompts, completions, strict=True):
        words, target = c.split(), p.split()[0]
        out.append(sum(w == target for w in words) / len(words) if words else 0.0)
    return out


def build_trainer(
    out: Path,
    *,
    schedule: Any,
    steps: int,
    prompts: int,
    save_steps: int,
    resume: bool = False,
    advisory: bool = False,
) -> tuple[Any, Any]:
    from transformers import PreTrainedTokenizerFast, PrinterCallback
    from transformers.utils import logging as hf_logging
    from trl import GRPOConfig, GRPOTrainer

    hf_logging.disable_progress_bar()  # weight loading and saving bars

    from rlvr_schedule.plugins import PluginHost
    from rlvr_schedule.plugins.sinks import JsonlSink
    from rlvr_schedule_adapters.trl import RlvrScheduleCallback

    model_dir = out / "tiny-model"
    tok = (
        PreTrainedTokenizerFast.from_pretrained(model_dir)
        if (model_dir / "config.json").exists()
        else make_tiny_model(model_dir)
    )
    data = prompt_dataset(prompts)
    host = PluginHost()
    host.register(JsonlSink(out / "schedule.jsonl"))
    callback = RlvrScheduleCallback(schedule, plugins=host, apply=not advisory)
    args = GRPOConfig(
        output_dir=str(out / "run"),
        per_device_train_batch_size=4,
        num_generations=4,
        steps_per_generation=2,
        gradient_accumulation_steps=2,  # S fixed; GA = k x S per stage
        max_completion_length=6,
        max_steps=steps,
        learning_rate=1e-3,
        lr_scheduler_type="constant",
        logging_steps=1,  # one record (and decision) per update
        save_strategy="steps" if save_steps else "no",
        save_steps=save_steps or 500,
        restore_callback_states_from_checkpoint=True,  # resume the schedule with the run
        use_cpu=True,
        bf16=False,
        beta=0.0,
        report_to=[],
        disable_tqdm=True,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=repeat_first_word,
        args=args,
        train_dataset=data,
        processing_class=tok,
        callbacks=[callback],
    )
    trainer.remove_callback(PrinterCallback)  # each update's log dict: the table after training has them
    return trainer, callback


def resume_point(run_dir: Path) -> str | None:
    """The last *complete* checkpoint: a kill while the Trainer writes one leaves a ``checkpoint-N``
    without ``trainer_state.json`` (written last), which ``resume_from_checkpoint=True`` would pick."""
    from rlvr_schedule_adapters.trl import last_complete_checkpoint

    choice = last_complete_checkpoint(run_dir)
    for name, why in choice.skipped:
        print(f"resume: skipping incomplete {run_dir / name} ({why})")
    if choice.path is None:
        print(f"resume: no complete checkpoint in {run_dir}; starting from scratch")
        return None
    print(f"resume: from {choice.path}")
    return str(choice.path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="output dir (default: a temp dir)")
    ap.add_argument("--schedule", default=None, help="schedule YAML/JSON (default: a built-in two-stage one)")
    ap.add_argument("--steps", type=int, default=12, help="optimizer updates (max_steps)")
    ap.add_argument("--prompts", type=int, default=256, help="prompts in the dataset (one epoch)")
    ap.add_argument("--save-steps", type=int, default=0, help="checkpoint every N updates (0: none)")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="resume from the last complete checkpoint in --out (one cut by a kill is skipped)",
    )
    ap.add_argument(
        "--advisory",
        action="store_true",
        help="decide and log every decision with its reason, change nothing (apply=False)",
    )
    a = ap.parse_args(argv)
    out = a.out or Path(tempfile.mkdtemp(prefix="trl-grpo-cpu-"))
    out.mkdir(parents=True, exist_ok=True)

    from rlvr_schedule_adapters.trl import find_callback

    trainer, _ = build_trainer(
        out,
        schedule=a.schedule or DEFAULT_SCHEDULE,
        steps=a.steps,
        prompts=a.prompts,
        save_steps=a.save_steps,
        advisory=a.advisory,
    )
    trainer.train(resume_from_checkpoint=resume_point(out / "run") if a.resume else None)
    cb = find_callback(trainer)  # a resumed run holds a new instance rebuilt from the checkpoint
    print(f"{'step':>4} {'samples':>7} {'batch':>5} {'lr':>9} {'reward':>7} {'entropy':>7}  decision")
    logs = {h["step"]: h for h in trainer.state.log_history if "reward" in h}
    prev = cb.run.start_samples
    for d in cb.decisions:
        h, batch, prev = logs.get(d.step, {}), d.samples - prev, d.samples
        note = f"switch -> {d.batch} @ {d.lr:g} ({d.reason})" if d.switched else ""
        print(
            f"{d.step:>4} {d.samples:>7} {batch:>5} {h.get('learning_rate', float('nan')):>9.3g} "
            f"{h.get('reward', float('nan')):>7.3f} {h.get('entropy', float('nan')):>7.3f}  {note}"
        )
    print(
        f"rollouts {cb.samples}, stage {cb.schedule.current.batch}/update at lr {cb.schedule.current.lr:g}, "
        f"callback errors {len(cb.errors)}, callback time {cb.overhead_s * 1e3:.1f} ms; records: "
        f"{out / 'schedule.jsonl'}"
    )
    return 0 if not cb.errors else 1


if __name__ == "__main__":
    raise SystemExit(main())
