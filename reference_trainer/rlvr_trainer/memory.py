"""Training memory before any weight is loaded: parameters counted on the meta device, bytes per
part (weights, optimizer, activations, logits, the rollout engine), and a refusal naming the knob
to turn when the run would not fit. ``rlvr-trainer ... --dry-run`` prints it; the trainer checks
it before it loads a model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlvr_schedule.errors import ConfigError

__all__ = ["dry_run", "ACT_HIDDEN", "ACT_INTER", "ACT_CKPT_HIDDEN"]


def _model_config(cfg) -> tuple[Any, str]:
    """The model's config without weights: local dir, HF cache, or the preset's known architecture."""
    from transformers import AutoConfig, Qwen2Config

    from rlvr_trainer.config import QWEN25_MATH_15B
    from rlvr_trainer.model import CHARS, TinyModelConfig

    if cfg.model is None:
        t = TinyModelConfig()
        return Qwen2Config(
            vocab_size=3 + len(dict.fromkeys(CHARS)),
            hidden_size=t.hidden_size,
            intermediate_size=t.intermediate_size,
            num_hidden_layers=t.num_layers,
            num_attention_heads=t.num_heads,
            num_key_value_heads=t.num_heads,
            tie_word_embeddings=False,
        ), "embedded tiny model"
    try:
        return AutoConfig.from_pretrained(cfg.model, local_files_only=True), f"{cfg.model} (local)"
    except Exception:
        if "qwen2.5-math-1.5b" in cfg.model.lower():
            kw = {k: v for k, v in QWEN25_MATH_15B.items() if k not in ("architectures", "torch_dtype")}
            return Qwen2Config(**kw), "built-in Qwen2.5-Math-1.5B architecture (weights not on this machine)"
        raise


#: Activation bytes the backward keeps per token and decoder layer, as ``a * hidden + b *
#: intermediate * compute bytes``: measured with ``torch.autograd.graph.saved_tensors_hooks`` on a
#: Qwen2 layer at the 1.5B shape (fp32: 131 x hidden; bf16 autocast over fp32 weights: 81 x
#: hidden; the MLP's four intermediate tensors are the ``4 * intermediate`` term). With gradient
#: checkpointing a layer keeps only its fp32 input (2 x 4 bytes x hidden, measured 8.0 x hidden)
#: and one layer is recomputed at a time.
ACT_HIDDEN, ACT_INTER, ACT_CKPT_HIDDEN = 35, 4, 8


#: The estimate's measured error: peaks of 0.918 to 0.992 of the estimate at the 1.5B shape (H200,
#: benchmarks/PERFORMANCE.md, "Reference trainer"). A run is refused only when even the estimate
#: less this share exceeds the usable memory; between the two it is "may not fit".
ESTIMATE_ERROR = 0.09
#: The share of the device (or RAM) a run may use.
USABLE = 0.95


def machine_ram() -> int | None:
    """Total bytes of this machine's RAM (None where the OS does not say)."""
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _target_device(cfg) -> tuple[str, int | None]:
    """(device kind, total bytes) the run would use: the device named in the config when it is
    on this machine (the CPU: its RAM), else "cuda" without a known size (dry runs plan for
    machines elsewhere)."""
    import torch

    from rlvr_trainer.device import device_memory, resolve_device

    if cfg.device == "cpu" or (cfg.device == "auto" and not torch.cuda.is_available()):
        return "cpu", machine_ram()
    if not torch.cuda.is_available():
        return "cuda", None
    dev = resolve_device(cfg.device)
    return dev.type, device_memory(dev)


def dry_run(
    cfg, *, batches: Sequence[int] | None = None, device_memory: int | None = None, check: bool = False
) -> dict[str, Any]:
    """Validate, count parameters on the meta device and estimate training memory (bytes).

    ``device_memory`` (bytes) overrides the device's own (planning for another machine); with
    ``check`` a run whose estimate exceeds 95% of it is a ConfigError naming the knob to turn.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from rlvr_trainer.grpo import logit_chunk

    cfg.validate()
    mcfg, source = _model_config(cfg)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(mcfg)
    n = sum(p.numel() for p in model.parameters())
    kind, dev_mem = _target_device(cfg)
    dev_mem = device_memory if device_memory is not None else dev_mem
    wbytes = torch.empty((), dtype=getattr(torch, cfg.dtype)).element_size()
    if cfg.compute_dtype == "auto":
        cbytes = 2 if kind == "cuda" else wbytes
    else:
        cbytes = torch.empty((), dtype=getattr(torch, cfg.compute_dtype)).element_size()
    autocast = cbytes < wbytes
    seq = cfg.max_model_len
    hidden, layers, vocab = mcfg.hidden_size, mcfg.num_hidden_layers, mcfg.vocab_size
    inter = getattr(mcfg, "intermediate_size", 4 * hidden)
    ref = cfg.beta > 0 or cfg.track_kl
    # the packed step (rlvr_trainer.grpo): a micro-batch spans at most max(noise micro-batch x
    # max_model_len, token budget) padded positions; log-probs are taken at completion positions
    # only, from fp32 logits chunks of logit_chunk(vocab) positions (logits + softmax/gradient in
    # the backward: 3 such chunks), never [positions, vocab] for the whole micro-batch
    positions = max(cfg.micro_batch * seq, cfg.token_budget())
    chunk = min(logit_chunk(vocab), cfg.micro_batch * cfg.max_tokens)
    per_layer = ACT_HIDDEN * hidden + ACT_INTER * inter * cbytes
    if cfg.gradient_checkpointing:  # each layer's input, plus one layer recomputed in the backward
        acts = positions * (layers * ACT_CKPT_HIDDEN * hidden * wbytes // 4 + per_layer)
    else:
        acts = positions * layers * per_layer
    engine = n * cbytes if cfg.rollout == "vllm" else 0  # hf samples from the policy itself
    kv = 0
    if cfg.rollout == "vllm" and kind == "cuda" and dev_mem:
        kv = max(0, int(cfg.gpu_memory_utilization * dev_mem) - engine)  # vLLM claims the rest of its share
    est = {
        # fp32 weights: the master copy the optimizer updates (bf16 compute reads casts of it)
        "policy_weights": n * wbytes,
        "gradients": n * wbytes,
        "adamw_state": 2 * n * wbytes,  # exp_avg + exp_avg_sq in the weights' dtype
        # autocast's cached bf16 casts of the weights, held for the step's forward and backward
        "autocast_weight_copies": n * cbytes if autocast else 0,
        "reference_weights": n * cbytes if ref else 0,  # kept in the compute dtype (no optimizer)
        "rollout_engine_weights": engine,
        "vllm_kv_cache": kv,
        "activations_micro_batch": acts,
        "logits_chunks": 3 * chunk * vocab * 4,
    }
    est["total"] = sum(est.values())
    out: dict[str, Any] = {
        "config": cfg.to_dict(),
        "model_source": source,
        "parameters": n,
        "device": kind,
        "compute_bytes": cbytes,
        "memory_bytes": est,
        "memory_gib": {k: round(v / 2**30, 3) for k, v in est.items()},
        # what gradient checkpointing changes (the other setting's activations)
        "activations_other_checkpointing_gib": round(
            (
                positions * layers * per_layer
                if cfg.gradient_checkpointing
                else positions * (layers * ACT_CKPT_HIDDEN * hidden * wbytes // 4 + per_layer)
            )
            / 2**30,
            3,
        ),
        # what the padded step held per micro-batch: fp32 logits and their log-softmax, every position
        "padded_step_logits_bytes": 2 * cfg.micro_batch * seq * vocab * 4,
        "sweep_batches": list(batches) if batches else None,
        "updates_per_run": {b: -(-cfg.max_samples // b) for b in (batches or [cfg.batch])},
        "device_memory_gib": round(dev_mem / 2**30, 2) if dev_mem else None,
        "memory_of": None if not dev_mem else ("machine RAM" if kind == "cpu" else "device"),
        "estimate_error": ESTIMATE_ERROR,
        "fits": _fits(est["total"], dev_mem),
    }
    if check and dev_mem and out["fits"] is False:
        raise ConfigError(_too_big(cfg, est, dev_mem, out["memory_of"]), field="memory")
    return out


def _fits(total: int, dev_mem: int | None) -> bool | str | None:
    """True, "may not fit" (within the estimate's measured error of the usable memory), False, or
    None (the memory is not known: a device elsewhere)."""
    if not dev_mem:
        return None
    if total <= USABLE * dev_mem:
        return True
    return "may not fit" if total * (1 - ESTIMATE_ERROR) <= USABLE * dev_mem else False


def _too_big(cfg, est: dict[str, int], dev_mem: int, memory_of: str | None = "device") -> str:
    """The refusal, naming the knob that frees the most."""
    gib = 2**30
    knobs = []
    if not cfg.gradient_checkpointing and est["activations_micro_batch"] > 0.2 * est["total"]:
        knobs.append("--set gradient_checkpointing=true")
    if est["activations_micro_batch"] > 0.2 * est["total"]:
        knobs.append(f"a smaller micro-batch (--set micro_tokens=N, now {cfg.token_budget()} positions)")
    if est["vllm_kv_cache"] > 0:
        knobs.append(f"a lower --set gpu_memory_utilization (now {cfg.gpu_memory_utilization})")
    if est["reference_weights"]:
        knobs.append("--set track_kl=false (no reference model when beta = 0)")
    knobs = knobs or ["a smaller model or a larger device"]
    return (
        f"the run needs ~{est['total'] / gib:.1f} GiB (+-{ESTIMATE_ERROR:.0%}, the estimate's measured error; "
        f"rlvr-trainer ... --dry-run itemises it) but the {memory_of or 'device'} has {dev_mem / gib:.1f} GiB "
        f"({USABLE:.0%} usable): try " + ", or ".join(knobs)
    )
