"""Where the trainer runs: the device, its compute precision and the engines' environment.

One rule for every path: the weights and the AdamW state stay in ``cfg.dtype`` (fp32 in every
preset); on CUDA the forward and backward compute in ``compute_dtype`` (bf16) under autocast,
and the rollout engine gets a bf16 copy. On the CPU everything stays fp32 (``compute_dtype``
"auto" resolves to the weights' dtype there), as it always was.

Why not bf16 weights: at the 1.5B preset's LR of 1e-6 an Adam step moves a weight by about
1e-6, below bf16's resolution for weights of order 1e-2 (spacing ~6e-5): the update rounds away
(``tests/trainer/test_device.py`` shows it).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from typing import Any

from rlvr_schedule.errors import ConfigError

__all__ = [
    "DEVICE_RE",
    "resolve_device",
    "resolve_compute_dtype",
    "autocast",
    "ENV_ALL",
    "ENV_CPU",
    "set_engine_env",
    "device_memory",
]

DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")

#: Environment for the rollout engines on every device (set before importing vllm; never overrides
#: what the user set). vLLM in this process: the in-place weight push through ``collective_rpc``
#: relies on it.
ENV_ALL = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_LOGGING_LEVEL": "WARNING",  # vLLM logs every weight push at INFO; keeps the progress bars readable
}
#: ... and on the CPU only: one OpenMP thread per process, a small KV cache (GiB) for vLLM's CPU
#: backend. (Chunked prefill off is an engine argument: see ``rollout.VLLMEngine``.)
ENV_CPU = {"OMP_NUM_THREADS": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}


def resolve_device(name: str = "auto") -> Any:
    """``torch.device`` for ``"auto"`` (CUDA where available, else the CPU), ``"cpu"``, ``"cuda"``
    or ``"cuda:N"``; a CUDA device that does not exist here is a :class:`ConfigError`."""
    import torch

    if not isinstance(name, str) or not DEVICE_RE.match(name):
        raise ConfigError(f"must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {name!r}", field="device")
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError(
            f"{name!r} asked for, but torch {torch.__version__} sees no CUDA device on this machine "
            "(use --device cpu, or install a CUDA build of torch: see README 'Install')",
            field="device",
        )
    dev = torch.device(name)
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ConfigError(
            f"{name!r} asked for, but this machine has {torch.cuda.device_count()} CUDA device(s)",
            field="device",
        )
    return dev


def resolve_compute_dtype(compute_dtype: str, weights_dtype: str, device: Any) -> Any:
    """The autocast dtype: ``"auto"`` is bf16 on CUDA and the weights' dtype elsewhere."""
    import torch

    if compute_dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else getattr(torch, weights_dtype)
    return getattr(torch, compute_dtype)


@contextlib.contextmanager
def autocast(device: Any, dtype: Any) -> Iterator[None]:
    """Autocast to ``dtype`` on ``device`` when it is lower than fp32 there; else nothing (the CPU
    default: fp32 weights, fp32 compute, no autocast)."""
    import torch

    if dtype in (torch.float32, torch.float64) or device.type not in ("cuda", "cpu"):
        yield
        return
    with torch.autocast(device_type=device.type, dtype=dtype):
        yield


def set_engine_env(device: Any = "cpu") -> None:
    """Fill in the engines' environment for ``device`` (a ``torch.device`` or its type name)."""
    kind = getattr(device, "type", str(device).split(":")[0])
    for k, v in ENV_ALL.items():
        os.environ.setdefault(k, v)
    if kind == "cpu":
        for k, v in ENV_CPU.items():
            os.environ.setdefault(k, v)
    from rlvr_trainer.model import cache_root

    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache_root() / "inductor"))


def device_memory(device: Any) -> int | None:
    """Total bytes of a CUDA device (None on the CPU: host memory is not checked)."""
    import torch

    if getattr(device, "type", None) != "cuda":
        return None
    return int(torch.cuda.get_device_properties(device).total_memory)
