"""Rollout engines: an in-process vLLM engine (default) and a plain transformers ``generate`` path.

vLLM runs in the trainer's process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``); after every optimizer
update the policy's weights are pushed into the running engine with ``reload_weights`` and the
prefix cache is reset (without the reset, stale KV gives logprobs off by ~2). Each prompt gets
its own sampling seed derived from the run seed and step, so a resumed run samples exactly what
an uninterrupted one would.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rlvr_trainer.device import ENV_ALL, ENV_CPU, set_engine_env

__all__ = ["Rollout", "VLLMEngine", "HFEngine", "make_engine", "set_cpu_env", "set_engine_env"]

#: The CPU environment (every device's settings plus the CPU-only ones); see :mod:`rlvr_trainer.device`.
CPU_ENV = {**ENV_ALL, **ENV_CPU}


def set_cpu_env() -> None:
    """Fill in the CPU engine's environment (never overrides what the user set)."""
    set_engine_env("cpu")


@dataclass
class Rollout:
    """One sampled completion: token ids (EOS included when the model stopped) and text."""

    prompt_ids: list[int]
    completion_ids: list[int]
    text: str
    finished: bool
    logprobs: list[float] | None = None  # the engine's sampling logprobs, when requested


class _RotaryReloadFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.getMessage().startswith("RotaryEmbedding")
            and "Failed to load weights" in record.getMessage()
        )


def _seed(run_seed: int, step: int, i: int) -> int:
    """A hashed per-prompt seed: vLLM gives the group's j-th sample ``seed + j``, so neighbouring
    prompts must not get neighbouring seeds."""
    import hashlib

    digest = hashlib.blake2b(f"{run_seed}/{step}/{i}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") % (2**30)


class VLLMEngine:
    """One ``vllm.LLM`` per run, loaded from a Hugging Face directory and updated in place.

    On the CPU (what the project's checks run): chunked prefill off, the KV cache from
    ``VLLM_CPU_KVCACHE_SPACE``. On CUDA (configured, not run by the project's checks): the engine
    takes ``gpu_memory_utilization`` of the device, the weights are pushed from the policy's GPU
    tensors (cast to the engine's dtype on the device), and where the installed vLLM has sleep
    mode the engine sleeps (level 1: weights offloaded, KV cache dropped) during the training
    step (:meth:`sleep` / :meth:`wake_up`).
    """

    def __init__(
        self,
        model_dir: str | Path,
        *,
        max_tokens: int,
        temperature: float = 1.0,
        max_model_len: int = 64,
        dtype: str = "float32",
        seed: int = 0,
        device: str = "cpu",
        gpu_memory_utilization: float = 0.5,
        log_file: str | Path | None = None,
    ) -> None:
        set_engine_env(device)

        self.max_tokens, self.temperature, self.seed = max_tokens, temperature, seed
        self.cuda = str(device).startswith("cuda")
        self.dtype = dtype
        kw: dict = {}
        if not self.cuda:
            # a prompt prefill split over engine steps rewinds the request's seeded generator, which
            # fails on CPU ("CPU Generator does not use offset"): schedule whole prompts only
            kw = {"enable_chunked_prefill": False, "max_num_batched_tokens": max(4096, max_model_len)}
        from rlvr_trainer.quiet import engine_log

        with engine_log(log_file):  # vLLM's own log (and its dependencies' warnings) to the run's file
            from vllm import LLM

            if self.cuda:
                import inspect

                from vllm.engine.arg_utils import EngineArgs

                self.can_sleep = "enable_sleep_mode" in inspect.signature(EngineArgs).parameters
                if self.can_sleep:
                    kw["enable_sleep_mode"] = True
            self.llm = LLM(
                model=str(model_dir),
                dtype=dtype,
                seed=seed,
                max_model_len=max_model_len,
                enforce_eager=True,
                enable_prefix_caching=True,
                gpu_memory_utilization=gpu_memory_utilization,
                **kw,
            )
        self.asleep = False
        self.tokenizer = self.llm.get_tokenizer()
        # rotary embeddings hold no checkpoint weights: vLLM warns on every reload and keeps its
        # own (correct) cos/sin cache; the logprob check in tests/trainer covers it
        logging.getLogger("vllm.model_executor.model_loader.reload.layerwise").addFilter(
            _RotaryReloadFilter()
        )

    def generate(
        self,
        prompts: Sequence[str],
        n: int,
        *,
        step: int,
        logprobs: bool = False,
        temperature: float | None = None,
    ) -> list[list[Rollout]]:
        """``n`` completions per prompt (groups in prompt order)."""
        from vllm import SamplingParams

        self.wake_up()
        temp = self.temperature if temperature is None else temperature
        params = [
            SamplingParams(
                n=n,
                temperature=temp,
                max_tokens=self.max_tokens,
                logprobs=0 if logprobs else None,
                seed=_seed(self.seed, step, i),
            )
            for i in range(len(prompts))
        ]
        outs = self.llm.generate(list(prompts), params, use_tqdm=False)
        groups = []
        for out in outs:
            pid = list(out.prompt_token_ids)
            group = []
            for c in out.outputs:
                lps = None
                if logprobs and c.logprobs is not None:
                    lps = [d[t].logprob for d, t in zip(c.logprobs, c.token_ids, strict=True)]
                group.append(Rollout(pid, list(c.token_ids), c.text, c.finish_reason == "stop", lps))
            groups.append(group)
        return groups

    def sleep(self) -> None:
        """CUDA with sleep mode: free the engine's GPU memory for the training step."""
        if self.cuda and getattr(self, "can_sleep", False) and not self.asleep:
            self.llm.sleep(level=1)
            self.asleep = True

    def wake_up(self) -> None:
        if self.asleep:
            self.llm.wake_up()
            self.asleep = False

    def push_weights(self, model) -> None:
        """Load the policy's current weights into the engine and drop the stale prefix cache."""
        self.push_state(model.state_dict())

    def push_state(self, state) -> None:
        """Load a state dict (name -> tensor) into the engine and drop the stale prefix cache.
        On CUDA the tensors stay on the device, cast to the engine's dtype (its bf16 copy)."""
        import torch

        self.wake_up()
        dt = getattr(torch, self.dtype)
        weights = [(k, v.detach().to(dt) if self.cuda else v.detach()) for k, v in state.items()]
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        del self.llm
        import gc

        gc.collect()


class _RecordLogprobs:
    """A logits processor that keeps each sampled token's log-prob under the raw logits (before
    temperature, like vLLM's default ``raw_logprobs``), then applies the temperature itself.

    Called at step ``t`` with the ids sampled so far, it gathers the previous step's log-prob of
    the token just sampled: one ``[rows, vocab]`` log-softmax is held at a time, never all steps'.
    """

    def __init__(self, temperature: float, prompt_width: int) -> None:
        self.temperature, self.width = temperature, prompt_width
        self.prev = None
        self.out: list = []

    def __call__(self, input_ids, scores):
        if self.prev is not None:
            self.out.append(self.prev.gather(-1, input_ids[:, -1:]).squeeze(-1))
        self.prev = scores.float().log_softmax(-1)
        return scores / self.temperature if self.temperature not in (0, 1) else scores

    def finish(self, sequences):
        """``[rows, steps]`` log-probs of the sampled tokens (one device tensor)."""
        import torch

        if self.prev is not None and sequences.shape[1] > self.width + len(self.out):
            self.out.append(
                self.prev.gather(-1, sequences[:, self.width + len(self.out)][:, None]).squeeze(-1)
            )
        return (
            torch.stack(self.out, 1)
            if self.out
            else sequences.new_zeros((sequences.shape[0], 0), dtype=torch.float32)
        )


class HFEngine:
    """Sampling with transformers ``generate`` from the policy itself (``--rollout hf``): the GPU
    path the project measures, and the CPU path where vLLM cannot run.

    All prompts of an update go through one batched ``generate`` call (left-padded), under
    autocast to the trainer's compute dtype, seeded per update: a resumed run samples exactly
    what an uninterrupted one would (on the same device and batch). The sampled tokens' raw
    log-probs come back with the rollouts, for the sampler-vs-trainer mismatch.
    """

    def __init__(
        self,
        model,
        tokenizer,
        *,
        max_tokens: int,
        temperature: float = 1.0,
        seed: int = 0,
        compute_dtype=None,
    ) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.max_tokens, self.temperature, self.seed = max_tokens, temperature, seed
        self.compute_dtype = compute_dtype

    def generate(
        self,
        prompts: Sequence[str],
        n: int,
        *,
        step: int,
        logprobs: bool = False,
        temperature: float | None = None,
    ) -> list[list[Rollout]]:
        import torch

        from rlvr_trainer.device import autocast

        tok = self.tokenizer
        temp = self.temperature if temperature is None else temperature
        dev = next(self.model.parameters()).device
        pids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
        width = max(map(len, pids))
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        ids = torch.full((len(pids) * n, width), pad, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for i, pid in enumerate(pids):
            ids[i * n : (i + 1) * n, width - len(pid) :] = torch.tensor(pid)
            attn[i * n : (i + 1) * n, width - len(pid) :] = 1
        ids, attn = ids.to(dev), attn.to(dev)
        rec = _RecordLogprobs(temp if temp > 0 else 1.0, width)
        was_training = self.model.training
        self.model.eval()
        cdt = self.compute_dtype or next(self.model.parameters()).dtype
        with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []), torch.no_grad():
            torch.manual_seed(_seed(self.seed, step, 0))
            with autocast(dev, cdt):
                out = self.model.generate(
                    ids,
                    attention_mask=attn,
                    do_sample=temp > 0,
                    temperature=1.0,
                    top_k=0,
                    top_p=1.0,
                    max_new_tokens=self.max_tokens,
                    eos_token_id=tok.eos_token_id,
                    pad_token_id=pad,
                    logits_processor=[rec],
                )
            lps = rec.finish(out)
        self.model.train(was_training)
        rows, lp_rows = out[:, width:].tolist(), lps.tolist()  # the one host sync of the call
        groups = []
        for i, pid in enumerate(pids):
            group = []
            for j in range(i * n, (i + 1) * n):
                row, finished = rows[j], False
                if tok.eos_token_id in row:
                    row, finished = row[: row.index(tok.eos_token_id) + 1], True
                text = tok.decode(row, skip_special_tokens=True)
                group.append(Rollout(list(pid), row, text, finished, lp_rows[j][: len(row)]))
            groups.append(group)
        return groups

    def sleep(self) -> None:  # the engine is the policy: nothing to free
        pass

    def wake_up(self) -> None:
        pass

    def push_weights(self, model) -> None:  # the engine samples from the policy itself
        self.model = model

    def close(self) -> None:
        pass


def make_engine(
    kind: str,
    *,
    model_dir: str | Path,
    model,
    tokenizer,
    max_tokens: int,
    temperature: float,
    seed: int,
    max_model_len: int = 64,
    dtype: str = "float32",
    device: str = "cpu",
    gpu_memory_utilization: float = 0.5,
    compute_dtype=None,
    log_file: str | Path | None = None,
):
    """``"vllm"`` (default) or ``"hf"``; ``dtype`` is the vLLM engine's (bf16 on CUDA); ``log_file``:
    where vLLM's own log goes (None: console)."""
    if kind == "vllm":
        return VLLMEngine(
            model_dir,
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
            max_model_len=max_model_len,
            dtype=dtype,
            device=device,
            gpu_memory_utilization=gpu_memory_utilization,
            log_file=log_file,
        )
    if kind == "hf":
        return HFEngine(
            model,
            tokenizer,
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
            compute_dtype=compute_dtype,
        )
    raise ValueError(f"rollout engine must be 'vllm' or 'hf', got {kind!r}")
