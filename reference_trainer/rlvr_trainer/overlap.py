"""Generation in a second process, so that training gets the other core (``TrainConfig.overlap``).

vLLM's CPU worker pins its process to one thread: with the engine in the trainer's process the
training step cannot use a second core. :class:`EngineProcess` owns the ``vllm.LLM`` in a
``spawn`` child instead. The weights travel through shared memory: the parent allocates one
shared copy of the state dict at start-up and hands it to the child; before each request it
copies the policy into it (the child is idle then, so there is no race) and the child reloads
its engine from it (``reload_weights`` + prefix-cache reset, as in-process). Requests and
rollouts (token ids, text, the behaviour log-probs) go over a pipe.

The trainer uses it one step off-policy: while it trains update ``t`` on a batch sampled by the
weights of update ``t - 1``, the child samples the batch of update ``t + 1`` with the weights of
update ``t``. See ``Trainer.train_step`` for the loop and the importance-ratio correction.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr_trainer.rollout import Rollout, set_cpu_env

__all__ = ["EngineProcess", "Request"]


@dataclass
class Request:
    """One generation asked of the child: ``n`` completions for each prompt, sampled with the
    seeds of update ``step`` (the same per-prompt seeds as the in-process engine)."""

    prompts: list[str]
    n: int
    step: int
    push: bool = True  # reload the shared weights first
    logprobs: bool = True
    sent_at: float = field(default_factory=time.perf_counter)


def _worker(conn, shared: dict, engine_kw: dict[str, Any]) -> None:
    """The child: build the engine, then serve requests until ``None`` or the pipe closes."""
    set_cpu_env()
    try:
        from rlvr_trainer.rollout import VLLMEngine

        engine = VLLMEngine(**engine_kw)
        engine.push_state(shared)
        conn.send(("ready", None))
    except Exception:
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        try:
            req = conn.recv()
        except EOFError:
            break
        if req is None:
            break
        try:
            t0 = time.perf_counter()
            if req.push:
                engine.push_state(shared)
            t1, c1 = time.perf_counter(), time.process_time()
            groups = engine.generate(req.prompts, req.n, step=req.step, logprobs=req.logprobs)
            t2, c2 = time.perf_counter(), time.process_time()
            times = {"child_push_s": t1 - t0, "child_generate_s": t2 - t1, "child_generate_cpu_s": c2 - c1}
            conn.send(("ok", (groups, times)))
        except Exception:
            conn.send(("error", traceback.format_exc()))
    engine.close()


class EngineProcess:
    """A :class:`~rlvr_trainer.rollout.VLLMEngine` in a ``spawn`` child; at most one request in flight.

    ``submit`` copies ``model``'s weights into shared memory and returns at once; ``result``
    waits for the rollouts. ``generate`` is the blocking form without a weight push (the
    in-process engine's interface, for benchmarks and tests).
    """

    def __init__(
        self,
        model_dir: str | Path,
        model,
        *,
        max_tokens: int,
        temperature: float = 1.0,
        max_model_len: int = 64,
        dtype: str = "float32",
        seed: int = 0,
        start_timeout: float = 600.0,
        log_file: str | Path | None = None,
    ) -> None:
        import torch
        import torch.multiprocessing as mp

        set_cpu_env()
        ctx = mp.get_context("spawn")
        with torch.no_grad():
            self.shared = {
                k: v.detach().clone().contiguous().share_memory_() for k, v in model.state_dict().items()
            }
        self.conn, child_conn = ctx.Pipe()
        kw = dict(
            model_dir=str(model_dir),
            max_tokens=max_tokens,
            temperature=temperature,
            max_model_len=max_model_len,
            dtype=dtype,
            seed=seed,
            log_file=log_file,
        )
        self.proc = ctx.Process(target=_worker, args=(child_conn, self.shared, kw), daemon=True)
        self.proc.start()
        child_conn.close()
        self.pending: Request | None = None
        self._expect("ready", timeout=start_timeout)

    def _expect(self, what: str, timeout: float | None = None) -> Any:
        if timeout is not None and not self.conn.poll(timeout):
            raise RuntimeError(f"generation process: no {what!r} after {timeout:.0f} s")
        try:
            kind, payload = self.conn.recv()
        except EOFError:
            raise RuntimeError(f"generation process exited (code {self.proc.exitcode})") from None
        if kind == "error":
            raise RuntimeError(f"generation process failed:\n{payload}")
        return payload

    def _copy_weights(self, model) -> None:
        import torch

        with torch.no_grad():
            for k, v in model.state_dict().items():
                self.shared[k].copy_(v)

    def submit(self, prompts: Sequence[str], n: int, *, step: int, model=None, logprobs: bool = True) -> None:
        """Ask for ``n`` completions per prompt, sampled by ``model``'s current weights (none: keep)."""
        if self.pending is not None:
            raise RuntimeError("a generation request is already in flight")
        if model is not None:
            self._copy_weights(model)
        req = Request(list(prompts), n, step, push=model is not None, logprobs=logprobs)
        self.conn.send(req)
        self.pending = req

    @property
    def busy(self) -> bool:
        return self.pending is not None

    def result(self) -> tuple[list[list[Rollout]], dict[str, float]]:
        """The in-flight request's groups and timings (``wait_s``: how long this call blocked)."""
        if self.pending is None:
            raise RuntimeError("no generation request in flight")
        t0 = time.perf_counter()
        try:
            groups, times = self._expect("rollouts")
        finally:
            self.pending = None
        times["wait_s"] = time.perf_counter() - t0
        return groups, times

    def generate(
        self, prompts: Sequence[str], n: int, *, step: int, logprobs: bool = False
    ) -> list[list[Rollout]]:
        self.submit(prompts, n, step=step, logprobs=logprobs)
        return self.result()[0]

    def close(self) -> None:
        if self.proc.is_alive():
            try:
                if self.pending is not None:
                    self.result()
                self.conn.send(None)
            except (OSError, RuntimeError, BrokenPipeError):
                pass
            self.proc.join(timeout=30)
            if self.proc.is_alive():
                self.proc.terminate()
                self.proc.join(timeout=10)
        self.conn.close()
