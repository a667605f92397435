"""The policy-worker side (one per DeepSpeed rank): samples per update and base LR set together."""

from __future__ import annotations

from typing import Any

from rlvr_schedule_adapters._common import scale_base_lr

__all__ = ["WORKER_METHOD", "set_worker_batch_and_lr"]

#: Name of the policy-worker method that sets samples per update and LR.
WORKER_METHOD = "rlvr_set_batch_and_lr"


def set_worker_batch_and_lr(
    strategy: Any,
    engine: Any,
    optimizer: Any,
    scheduler: Any,
    *,
    train_batch: int | None = None,
    lr: float | None = None,
) -> dict[str, Any]:
    """Set samples per update and base LR on one policy worker (DeepSpeed rank); returns what it set.

    Samples per update: DeepSpeed's ``set_train_batch_size`` (its gradient-accumulation steps, with
    its micro-step count realigned to the new boundary), the
    strategy's ``train_batch_size`` / ``accumulated_gradient`` (OpenRLHF groups micro-batches into
    optimizer steps by it) and ``args.train.batch_size`` (dynamic batching reads it). LR: the
    scheduler's ``base_lrs``, the live ``param_groups`` and the last-LR value together, keeping the
    LambdaLR warm-up/decay multiplier (:func:`rlvr_schedule_adapters._common.scale_base_lr`).
    """
    args = strategy.args
    out: dict[str, Any] = {}
    if train_batch is not None:
        ring = int(getattr(strategy, "ring_attn_size", 1) or 1)
        tp = int(getattr(strategy, "ds_tensor_parallel_size", 1) or 1)
        if getattr(args.train, "dynamic_batch_enable", False):
            gas = 1
        else:
            micro, world = int(strategy.micro_train_batch_size), int(strategy.world_size)
            if (train_batch * ring * tp) % (micro * world):
                raise ValueError(
                    f"train batch {train_batch} does not split over world size {world} x "
                    f"micro_batch_size {micro}"
                )
            engine.set_train_batch_size(train_batch * ring * tp)
            gas = train_batch * ring * tp // micro // world
            # DeepSpeed counts micro-steps over the whole run and steps the optimizer when
            # (micro_steps + 1) % gas == 0: realign the count to the new gas, else the first
            # update after a change is cut short (and OpenRLHF's loss windows no longer match)
            steps = getattr(engine, "micro_steps", None)
            if isinstance(steps, int):
                engine.micro_steps = -(-steps // gas) * gas
            got = int(engine.gradient_accumulation_steps())
            if got != gas:
                raise RuntimeError(f"DeepSpeed took {got} accumulation steps, expected {gas}")
        strategy.train_batch_size = train_batch
        strategy.accumulated_gradient = gas
        args.train.batch_size = train_batch
        out.update(train_batch=train_batch, accumulated_gradient=gas)
    if lr is not None:
        lrs = scale_base_lr(optimizer, scheduler, float(lr))
        adam = getattr(args.actor, "adam", None)
        if adam is not None:
            adam.lr = float(lr)
        out.update(lr=float(lr), group_lrs=lrs)
    return out
