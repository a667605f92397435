"""Rollout engines: an in-process vLLM engine (default) and a plain transformers ``generate`` path.

vLLM runs in the trainer's process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``); after every optimizer
update the policy's weights are pushed into the running engine with ``reload_weights`` and the
prefix cache is reset (without the reset, stale KV gives logprobs off by ~2). Each prompt gets
its own sampling seed derived from the run seed and step, so a resumed run samples exactly what
an uninterrupted one would.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Rollout", "VLLMEngine", "HFEngine", "make_engine", "set_cpu_env"]

#: Environment for the in-process CPU engine (see docs/INTEGRATION notes); set before importing vllm.
CPU_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "OMP_NUM_THREADS": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_LOGGING_LEVEL": "WARNING",  # vLLM logs every weight push at INFO; keeps the progress bars readable
}


def set_cpu_env() -> None:
    """Fill in the CPU engine's environment (never overrides what the user set)."""
    for k, v in CPU_ENV.items():
        os.environ.setdefault(k, v)
    from rlvr_trainer.model import cache_root

    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache_root() / "inductor"))


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
    """One ``vllm.LLM`` per run, loaded from a Hugging Face directory and updated in place."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        max_tokens: int,
        temperature: float = 1.0,
        max_model_len: int = 64,
        dtype: str = "float32",
        seed: int = 0,
        log_file: str | Path | None = None,
    ) -> None:
        set_cpu_env()
        import torch

        self.max_tokens, self.temperature, self.seed = max_tokens, temperature, seed
        kw = {}
        if not torch.cuda.is_available():
            # a prompt prefill split over engine steps rewinds the request's seeded generator, which
            # fails on CPU ("CPU Generator does not use offset"): schedule whole prompts only
            kw = {"enable_chunked_prefill": False, "max_num_batched_tokens": max(4096, max_model_len)}
        from rlvr_trainer.quiet import engine_log

        with engine_log(log_file):  # vLLM's own log (and its dependencies' warnings) to the run's file
            from vllm import LLM

            self.llm = LLM(
                model=str(model_dir),
                dtype=dtype,
                seed=seed,
                max_model_len=max_model_len,
                enforce_eager=True,
                enable_prefix_caching=True,
                gpu_memory_utilization=0.5,
                **kw,
            )
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

    def push_weights(self, model) -> None:
        """Load the policy's current weights into the engine and drop the stale prefix cache."""
        self.push_state(model.state_dict())

    def push_state(self, state) -> None:
        """Load a state dict (name -> tensor) into the engine and drop the stale prefix cache."""
        weights = [(k, v.detach()) for k, v in state.items()]
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        del self.llm
        import gc

        gc.collect()


class HFEngine:
    """Sampling with transformers ``generate`` from the policy itself (``--rollout hf``): slow, but
    needs no vLLM; for debugging and for environments where vLLM cannot run."""

    def __init__(self, model, tokenizer, *, max_tokens: int, temperature: float = 1.0, seed: int = 0) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.max_tokens, self.temperature, self.seed = max_tokens, temperature, seed

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

        tok = self.tokenizer
        temp = self.temperature if temperature is None else temperature
        groups = []
        was_training = self.model.training
        self.model.eval()
        for i, prompt in enumerate(prompts):
            pid = tok(prompt, add_special_tokens=False)["input_ids"]
            ids = torch.tensor([pid] * n)
            with torch.random.fork_rng(), torch.no_grad():
                torch.manual_seed(_seed(self.seed, step, i))
                out = self.model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    do_sample=temp > 0,
                    temperature=temp if temp > 0 else None,
                    top_k=0,
                    top_p=1.0,
                    max_new_tokens=self.max_tokens,
                    eos_token_id=tok.eos_token_id,
                    pad_token_id=tok.pad_token_id,
                )
            group = []
            for row in out[:, len(pid) :].tolist():
                if tok.eos_token_id in row:
                    row = row[: row.index(tok.eos_token_id) + 1]
                    finished = True
                else:
                    finished = False
                text = tok.decode(row, skip_special_tokens=True)
                group.append(Rollout(pid, row, text, finished))
            groups.append(group)
        self.model.train(was_training)
        return groups

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
    log_file: str | Path | None = None,
):
    """``"vllm"`` (default) or ``"hf"``; ``log_file``: where vLLM's own log goes (None: console)."""
    if kind == "vllm":
        return VLLMEngine(
            model_dir,
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
            max_model_len=max_model_len,
            dtype=dtype,
            log_file=log_file,
        )
    if kind == "hf":
        return HFEngine(model, tokenizer, max_tokens=max_tokens, temperature=temperature, seed=seed)
    raise ValueError(f"rollout engine must be 'vllm' or 'hf', got {kind!r}")
