"""Run configuration and presets (the embedded tiny default and Qwen2.5-Math-1.5B).

All sample counts are rollouts (prompts x group size); ``batch`` is rollouts per optimizer
update. The LR at any batch follows the core's rule:
``lr_for_batch(batch, base_batch, base_lr, rule=lr_rule)`` (square root for Adam).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlvr_schedule.errors import ConfigError
from rlvr_trainer.grpo import LOSS_TYPES

__all__ = ["TrainConfig", "PRESETS", "preset", "QWEN25_MATH_15B", "DTYPES", "OPTIMIZERS", "make_optimizer"]

DTYPES = ("float32", "bfloat16", "float16")
OPTIMIZERS = ("adamw", "sgd")


@dataclass
class TrainConfig:
    """Everything one GRPO run needs; JSON-able (stored in checkpoints)."""

    model: str | None = None  # HF directory; None = the embedded tiny model
    # "arithmetic", "content" (its answer's value scored, boxed or bare), "short-answer" (bare
    # 1-3 token answers over a finite prompt set, exact expected reward; see rlvr_trainer.tasks)
    # or a local .jsonl/.parquet of GSM8K/MATH records
    task: str = "arithmetic"
    task_max_level: int | None = (
        1  # arithmetic only: 0 = one-digit sums, 1 = + two-digit + one-digit, None = all
    )
    group_size: int = 8
    batch: int = 32  # rollouts per update at the start
    base_batch: int = 32
    base_lr: float = (
        4e-4  # the demo's LR: the tiny model learns (+0.3 reward), then collapses near the budget's end
    )
    lr_rule: str = "sqrt"
    max_samples: int = 14336  # per run; `make demo` (2 seeds x 5 batches + the schedule) ~9 min on 2 cores
    micro_batch: int = 16  # rollouts in the first (random, noise-estimate) micro-batch; grad_norm_micro
    # padded positions per later micro-batch (rows sorted by length, each trimmed to its longest);
    # 0: micro_batch x max_model_len, the memory bound of a full-length micro-batch
    micro_tokens: int = 0
    ppo_epochs: int = 1
    max_tokens: int = 12  # completion tokens
    max_model_len: int = 64
    temperature: float = 1.0
    loss_type: str = "token_mean"
    scale_rewards: bool = True  # divide advantages by the group std (False: Dr. GRPO)
    clip_low: float = 0.2
    clip_high: float = 0.28
    beta: float = 0.0  # KL-to-reference coefficient
    track_kl: bool = True  # log KL to the initial policy even when beta = 0
    warmup_samples: int = 512  # linear LR ramp over the first rollouts (Adam's first steps are sign steps)
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.99)
    # "adamw", or "sgd" (with ``momentum``): the theory's local quadratic model is an SGD model,
    # and Adam divides the step by the gradient noise; a large ``adam_eps`` moves AdamW toward SGD
    optimizer: str = "adamw"
    adam_eps: float = 1e-8
    momentum: float = 0.9  # sgd only
    # rollouts between evaluations on the held-out prompt set (0: none; see rlvr_trainer.evaluation);
    # the training task then leaves the held-out prompts out
    eval_every: int = 0
    eval_size: int = 64  # held-out prompts, one greedy answer each
    # "linear": every eval_every rollouts; "log": at 0, eval_every x 2^(k/2) and the budget's end
    eval_spacing: str = "linear"
    eval_distinct: bool = False  # arithmetic: each held-out prompt once (content: always)
    # the records' clip_would_act is 1 when the update's gradient norm exceeds this (how often a
    # clip at this norm would act, also with clipping off: max_grad_norm 1e9)
    clip_reference: float = 1.0
    rollout: str = "vllm"  # "vllm" or "hf"
    # the weights' and AdamW state's dtype: fp32 (bf16 weights lose Adam steps at small LRs)
    dtype: str = "float32"
    # "auto" (CUDA where available, else the CPU), "cpu", "cuda" or "cuda:N"
    device: str = "auto"
    # autocast dtype of the forward/backward and the rollout engine's copy; "auto": bf16 on CUDA,
    # the weights' dtype (fp32) on the CPU
    compute_dtype: str = "auto"
    gradient_checkpointing: bool = False  # recompute each layer in the backward (less memory, ~1.3x time)
    gpu_memory_utilization: float = 0.5  # vLLM on CUDA: its share of the device (weights + KV cache)
    # truncated importance sampling: weight each token by min(pi_trainer / pi_sampler, tis_cap)
    # (the sampler's numerics differ from the trainer's); 0 = off
    tis_cap: float = 0.0
    seed: int = 0
    checkpoint_every: int = 0  # updates between checkpoints (0: only at the end)
    # generate the next batch in a second process while training on this one (one step
    # off-policy, importance-ratio corrected; vLLM only); see docs/reference_trainer.md
    overlap: bool = False
    min_batch: int | None = None
    max_batch: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.adam_betas = tuple(self.adam_betas)  # JSON gives lists
        self.validate()

    def validate(self) -> None:
        """ConfigError naming the first invalid field."""

        def need(cond: bool, name: str, msg: str) -> None:
            if not cond:
                raise ConfigError(f"{msg}, got {getattr(self, name)!r}", field=name)

        for name in (
            "group_size",
            "batch",
            "base_batch",
            "max_samples",
            "micro_batch",
            "ppo_epochs",
            "max_tokens",
            "max_model_len",
        ):
            v = getattr(self, name)
            need(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1, name, "must be a positive integer"
            )
        need(
            self.batch % self.group_size == 0, "batch", f"must be a multiple of group_size={self.group_size}"
        )
        need(self.group_size >= 2, "group_size", "must be >= 2 (advantages are relative to the group)")
        need(self.base_lr > 0, "base_lr", "must be positive")
        need(self.lr_rule in ("sqrt", "linear", "constant"), "lr_rule", "must be sqrt, linear or constant")
        need(self.loss_type in LOSS_TYPES, "loss_type", f"must be one of {LOSS_TYPES}")
        need(self.rollout in ("vllm", "hf"), "rollout", "must be 'vllm' or 'hf'")
        need(0 <= self.clip_low < 1, "clip_low", "must be in [0, 1)")
        need(self.clip_high >= 0, "clip_high", "must be >= 0")
        need(self.beta >= 0, "beta", "must be >= 0")
        need(self.temperature >= 0, "temperature", "must be >= 0")
        need(
            isinstance(self.micro_tokens, int) and self.micro_tokens >= 0,
            "micro_tokens",
            "must be a non-negative integer (0: micro_batch x max_model_len)",
        )
        need(self.optimizer in OPTIMIZERS, "optimizer", f"must be one of {OPTIMIZERS}")
        need(self.adam_eps > 0, "adam_eps", "must be > 0")
        need(0 <= self.momentum < 1, "momentum", "must be in [0, 1)")
        need(
            isinstance(self.eval_every, int) and self.eval_every >= 0,
            "eval_every",
            "must be a non-negative integer (0: no evaluation)",
        )
        need(
            isinstance(self.eval_size, int) and self.eval_size >= 1, "eval_size", "must be a positive integer"
        )
        need(self.warmup_samples >= 0, "warmup_samples", "must be >= 0")
        need(self.eval_spacing in ("linear", "log"), "eval_spacing", "must be 'linear' or 'log'")
        need(isinstance(self.eval_distinct, bool), "eval_distinct", "must be true or false")
        need(self.max_grad_norm > 0, "max_grad_norm", "must be > 0 (1e9: clipping off)")
        need(self.clip_reference > 0, "clip_reference", "must be > 0")
        need(
            self.task_max_level is None or self.task_max_level in range(5),
            "task_max_level",
            "must be 0-4 or null (all five levels)",
        )
        need(self.checkpoint_every >= 0, "checkpoint_every", "must be >= 0")
        need(isinstance(self.overlap, bool), "overlap", "must be true or false")
        from rlvr_trainer.device import DEVICE_RE

        need(
            isinstance(self.device, str) and bool(DEVICE_RE.match(self.device)),
            "device",
            "must be 'auto', 'cpu', 'cuda' or 'cuda:N'",
        )
        need(self.dtype in DTYPES, "dtype", f"must be one of {DTYPES}")
        need(self.compute_dtype in ("auto", *DTYPES), "compute_dtype", f"must be 'auto' or one of {DTYPES}")
        need(isinstance(self.gradient_checkpointing, bool), "gradient_checkpointing", "must be true or false")
        need(0 < self.gpu_memory_utilization <= 1, "gpu_memory_utilization", "must be in (0, 1]")
        need(self.tis_cap >= 0, "tis_cap", "must be >= 0 (0: off)")
        need(
            not self.overlap or self.rollout == "vllm",
            "overlap",
            "needs rollout='vllm' (the hf engine samples from the policy itself)",
        )

    def token_budget(self) -> int:
        """Padded positions per micro-batch after the first (see ``micro_tokens``)."""
        return self.micro_tokens or self.micro_batch * self.max_model_len

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["adam_betas"] = list(self.adam_betas)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, source: str | None = None) -> TrainConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        for k in d:
            if k not in names:
                raise ConfigError(
                    f"unknown key (allowed: {', '.join(sorted(names))})", source=source, field=k
                )
        return cls(**dict(d))

    def replace(self, **kw: Any) -> TrainConfig:
        return dataclasses.replace(self, **kw)

    def json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


#: Qwen2.5-Math-1.5B's architecture (from its config.json), used by ``--dry-run`` when the
#: weights are not on this machine.
QWEN25_MATH_15B: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-6,
    "torch_dtype": "bfloat16",
}

PRESETS: dict[str, dict[str, Any]] = {
    # the embedded default: runs on 2 CPU cores; progress read on 64 held-out prompts every
    # 512 rollouts (greedy, a few % of a run's wall time)
    "tiny": {"eval_every": 512, "eval_size": 64},
    # paper-like settings for a real GPU run; weights from a local path or the HF cache
    "qwen2.5-math-1.5b": {
        "model": "Qwen/Qwen2.5-Math-1.5B",
        "task": "gsm8k.jsonl",
        "group_size": 8,
        "batch": 128,
        "base_batch": 128,
        "base_lr": 1e-6,
        "lr_rule": "sqrt",
        "max_samples": 200_000,
        "micro_batch": 8,
        "max_tokens": 1024,
        "max_model_len": 1536,
        "loss_type": "dr_grpo",
        "scale_rewards": False,
        "clip_low": 0.2,
        "clip_high": 0.28,
        "beta": 0.0,
        "track_kl": False,
        "dtype": "float32",  # fp32 weights + AdamW state; bf16 compute (autocast) on CUDA
        "compute_dtype": "auto",
        "gradient_checkpointing": False,  # --set gradient_checkpointing=true: see --dry-run
        "gpu_memory_utilization": 0.3,  # vLLM on CUDA (asleep during the step where it can)
        "warmup_samples": 2048,
        "checkpoint_every": 50,
    },
}

#: Sweep batches per preset: a 16x range of rollout batches.
SWEEP_BATCHES: dict[str, list[int]] = {
    "tiny": [8, 16, 32, 64, 128],
    "qwen2.5-math-1.5b": [64, 128, 256, 512, 1024],
}


def make_optimizer(cfg: TrainConfig, params, lr: float):
    """The run's optimizer (``cfg.optimizer``) over ``params`` at ``lr``."""
    import torch

    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(
        params, lr=lr, betas=cfg.adam_betas, eps=cfg.adam_eps, weight_decay=cfg.weight_decay
    )


def preset(name: str, **overrides: Any) -> TrainConfig:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset (choose from {', '.join(PRESETS)})", field="preset")
    return TrainConfig(**{**PRESETS[name], **overrides})
