"""A tiny local GRPO harness for the TRL adapter tests: no downloads, CPU, a few seconds a run.

``make_tiny_model`` (from ``examples/trl_grpo_cpu.py``) saves a 1-layer Qwen2 (hidden 64) and a
word-level tokenizer; ``prompts`` is the example's prompt dataset. ``run_grpo`` trains a real
``GRPOTrainer`` and MEASURES, per optimizer step, the completions that reached the reward function
and the LR in the optimizer's param groups when ``step()`` ran (a torch step pre-hook), independently
of anything the callback or the logs report.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from transformers import TrainerCallback

# the tiny model and the prompts are the TRL example's own (examples/ is not a package)
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from trl_grpo_cpu import make_tiny_model  # noqa: F401 (the fixtures and killable_grpo take it from here)
from trl_grpo_cpu import prompt_dataset as prompts

PER_DEVICE = 4  # completions per micro-step
GROUP = 4  # num_generations
S = 2  # steps_per_generation, fixed while the batch changes


@dataclass
class Measured:
    """Per optimizer step: completions scored since the previous step and the LR ``step()`` used."""

    completions: list[int] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    ga: list[int] = field(default_factory=list)
    prompts: list[list[str]] = field(default_factory=list)  # per step: the prompts scored, in order
    texts: list[list[str]] = field(default_factory=list)  # per step: the completions scored
    _scored: int = 0
    _prompts: list[str] = field(default_factory=list)
    _texts: list[str] = field(default_factory=list)

    def reward(self, completions: list[Any], prompts: list[Any] | None = None, **kwargs: Any) -> list[float]:
        self._scored += len(completions)
        self._prompts += [str(p) for p in prompts or []]
        self._texts += [str(c) for c in completions]
        return [float(len(c)) for c in completions]

    def on_step(self, optimizer: Any, *args: Any, **kwargs: Any) -> None:
        self.completions.append(self._scored)
        self.prompts.append(self._prompts)
        self.texts.append(self._texts)
        self._scored, self._prompts, self._texts = 0, [], []
        self.lr.append(float(optimizer.param_groups[0]["lr"]))


class _Probe(TrainerCallback):
    """Hooks the torch optimizer's ``step`` once the Trainer has built it."""

    def __init__(self, measured: Measured, stop_at: int | None = None) -> None:
        self.m, self.stop_at, self.handle = measured, stop_at, None

    def on_train_begin(self, args, state, control, optimizer=None, **kwargs):
        inner = getattr(optimizer, "optimizer", optimizer)
        self.handle = inner.register_step_pre_hook(self.m.on_step)

    def on_step_begin(self, args, state, control, **kwargs):
        self.m.ga.append(args.gradient_accumulation_steps)

    def on_step_end(self, args, state, control, **kwargs):
        if self.stop_at is not None and state.global_step >= self.stop_at:
            control.should_training_stop = True

    def on_train_end(self, args, state, control, **kwargs):
        if self.handle is not None:
            self.handle.remove()


def grpo_args(out: Path | str, **kw: Any) -> Any:
    from trl import GRPOConfig

    base = {
        "output_dir": str(out),
        "per_device_train_batch_size": PER_DEVICE,
        "num_generations": GROUP,
        "gradient_accumulation_steps": S,
        "steps_per_generation": S,
        "max_completion_length": 4,
        "max_steps": 8,
        "learning_rate": 1e-3,
        "lr_scheduler_type": "constant",
        "logging_steps": 1,
        "use_cpu": True,
        "bf16": False,
        "report_to": [],
        "save_strategy": "no",
        "beta": 0.0,
        "disable_tqdm": True,
        "seed": 0,
        "dataloader_num_workers": 0,
    }
    base.update(kw)
    return GRPOConfig(**base)


def run_grpo(
    tiny_model: tuple[str, Any],
    out: Path | str,
    callbacks: list[Any],
    *,
    n_prompts: int = 64,
    resume: str | None = None,
    stop_at: int | None = None,
    **kw: Any,
) -> tuple[Any, Measured]:
    """Train a real GRPOTrainer; returns the trainer and what was measured."""
    from trl import GRPOTrainer

    model, tok = tiny_model
    m = Measured()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=m.reward,
        args=grpo_args(out, **kw),
        train_dataset=prompts(n_prompts),
        processing_class=tok,
        callbacks=[*callbacks, _Probe(m, stop_at)],
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer, m


TWO_STAGES = {"stages": [{"batch": 8, "lr": 1e-3, "until_samples": 32}, {"batch": 16, "lr": 2.5e-4}]}
