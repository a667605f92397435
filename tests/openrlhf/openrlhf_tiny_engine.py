"""Test helper: a tiny DeepSpeed CPU engine built the way OpenRLHF builds the policy's.

``DeepspeedStrategy._ds_init_train_model`` minus what needs CUDA: OpenRLHF's own DeepSpeed config
(``get_ds_train_config``: ZeRO stage, bf16, clipping), its AdamW parameter groups (decay / no
decay) and its LambdaLR factory (``get_scheduler`` cosine_with_min_lr with warm-up). Two test-side
changes keep it fast on CPU: ``torch_adam`` (no FusedAdam JIT build) and DeepSpeed's shared-memory
comm op switched off (no C++ build; one process needs no shared memory).
"""

from __future__ import annotations

import math
import os
from functools import partial
from typing import Any

os.environ.setdefault("DS_ACCELERATOR", "cpu")


def init_single_process_dist() -> None:
    """A one-rank gloo group (unless one exists), as DeepSpeed expects, without building the shm
    comm op.

    The group rendezvous through a file (no TCP port to race other processes for).
    """
    import tempfile

    import deepspeed
    import torch.distributed as dist

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    if not dist.is_initialized():
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        fd, path = tempfile.mkstemp(prefix="rlvr-openrlhf-dist-")
        os.close(fd)
        os.unlink(path)
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=0, world_size=1)
    deepspeed.init_distributed(dist_backend="gloo")


def build_policy(
    args: Any,
    *,
    lr: float = 1e-3,
    scheduler_steps: int = 20,
    seed: int = 0,
    model: Any = None,
    stage: int | None = None,
    param_dtype: str | None = None,
):
    """(strategy, engine, optimizer, scheduler) for OpenRLHF ``args`` on one CPU rank.

    ``model``: the module to train (default: a tiny MLP); ``stage`` / ``param_dtype``: override
    the ZeRO stage and dtype OpenRLHF's args give (``"fp32"`` turns bf16 off: exact comparisons).
    """
    import deepspeed
    import torch
    from openrlhf.utils import get_strategy
    from openrlhf.utils.deepspeed.deepspeed_utils import get_optimizer_grouped_parameters
    from transformers.trainer import get_scheduler

    init_single_process_dist()
    torch.manual_seed(seed)
    strategy = get_strategy(args)
    # what setup_distributed computes (it builds a CUDA device mesh, so it is not called on CPU)
    strategy.world_size = torch.distributed.get_world_size()  # 1 unless the caller made a group
    strategy.accumulated_gradient = strategy.train_batch_size // (
        strategy.micro_train_batch_size * strategy.world_size
    )
    if stage is not None:
        strategy.stage = stage
    if param_dtype is not None:
        strategy.param_dtype = param_dtype
    if model is None:
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 1))
    optim = {
        "type": "AdamW",
        "params": {"lr": lr, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.01, "torch_adam": True},
    }
    config = strategy.get_ds_train_config(optim_dict=optim, max_norm=1.0)
    sched = partial(
        get_scheduler,
        "cosine_with_min_lr",
        num_warmup_steps=math.ceil(scheduler_steps * 0.1),
        num_training_steps=scheduler_steps,
        scheduler_specific_kwargs={"min_lr_rate": 0.1},
    )
    engine, optimizer, _, scheduler = deepspeed.initialize(
        model=model,
        model_parameters=get_optimizer_grouped_parameters(model, 0.01),
        lr_scheduler=sched,
        config=config,
        dist_init_required=False,
    )
    return strategy, engine, optimizer, scheduler


def micro_step(engine: Any, rows: int = 2) -> bool:
    """One forward/backward/step of ``rows`` samples; True when it ended an optimizer update."""
    import torch

    x = torch.randn(rows, 8, dtype=next(engine.module.parameters()).dtype)
    loss = engine(x).float().pow(2).mean()
    engine.backward(loss)
    boundary = engine.is_gradient_accumulation_boundary()
    engine.step()
    return boundary
