"""The micro-batch gradient norm, the small-batch half of the two-batch gradient-noise estimate.

No extra backward pass: after the first micro-batch of an update the accumulated gradient is that
micro-batch's gradient (times the loss's 1/GA scaling, which the caller undoes), and after the last
one the update's full gradient, whose norm the Trainer logs as ``grad_norm`` (the estimator of
gpt-neox and nanoGNS; McCandlish et al. 2018, appendix A). TRL's Trainer keeps the accumulated
``.grad`` between micro-steps (plain and DDP runs), so the callback reads it there; under DeepSpeed
ZeRO or FSDP it does not, and the callback uses, like verl and OpenRLHF, the tensor hooks of :mod:`rlvr_schedule_adapters._torch` (where both helpers live).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from rlvr_schedule_adapters._torch import MicroGradNorm, grad_norm, grad_sq_norm, mean_over_ranks, sq_norm_of

__all__ = ["MicroNorm", "grad_norm", "grad_sq_norm", "mean_over_ranks", "micro_meter", "sharded"]

log = logging.getLogger("rlvr_schedule.adapters.trl")


def micro_meter(model: Any) -> MicroGradNorm:
    """A hook meter on ``model`` (unwrapped from DeepSpeed's engine): its first backward's gradient.

    Under DeepSpeed ZeRO-2/3 and FSDP the Trainer leaves ``.grad`` empty between micro-steps, so the
    callback sums what the parameter tensors' hooks see instead (as the verl and OpenRLHF adapters
    do). Only parameters that require a gradient are hooked: with PEFT/LoRA the norm is that of the
    trainable (adapter) parameters, the ones the optimizer updates and ``grad_norm`` reports."""
    return MicroGradNorm(getattr(model, "module", model))


def sharded(args: Any) -> bool:
    """Whether the Trainer runs a DeepSpeed or FSDP engine (``.grad`` is empty between micro-steps)."""
    import os

    if getattr(args, "deepspeed", None) or getattr(args, "fsdp", None):
        return True
    return any(
        os.environ.get(k, "").lower() in ("1", "true")
        for k in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP")
    )


class MicroNorm:
    """The micro-batch gradient norm of each update, as the TRL callback takes it.

    ``take`` runs after the first micro-step of an update and keeps the squared norm on the device;
    ``read`` turns it into a number once per logged update (averaged over the ranks: the gradient
    there is rank-local, DDP syncs at the last micro-batch), where the Trainer syncs anyway.
    ``mode``: "grad" reads the accumulated ``.grad`` (one fused norm); "hooks" sums what tensor
    hooks see in the first backward (DeepSpeed ZeRO and FSDP leave ``.grad`` empty there); "auto"
    takes hooks when the run is sharded or ``.grad`` turns out empty, else ``.grad``.
    """

    def __init__(self, mode: str = "auto") -> None:
        if mode not in ("auto", "grad", "hooks"):
            raise ValueError(f"noise_meter must be 'auto', 'grad' or 'hooks', got {mode!r}")
        self.mode = mode
        self.meter: MicroGradNorm | None = None  # the hook meter (sharded runs, mode "hooks")
        self.norm = math.nan  # the last read norm
        self.micro_batch: int | None = None  # the local micro-batch it was taken on
        self._sq: Any = None  # squared norm of the last update's first micro-batch (a device tensor)
        self._params: tuple[int, list[Any]] | None = None  # (id of the model, its trainable parameters)

    def setup(self, args: Any, model: Any) -> None:
        """Hook meter when ``.grad`` will be empty after a micro-step (DeepSpeed ZeRO, FSDP) or asked for."""
        self.close()
        if model is None or self.mode == "grad":
            return
        if self.mode == "hooks" or sharded(args):
            self.meter = micro_meter(model)
            self.meter.begin()

    def take(self, args: Any, model: Any) -> None:
        """After the first micro-batch of an update the accumulated gradient is that micro-batch's,
        scaled by the loss's 1/GA: its norm x GA is |G_small| for B_small = the local micro-batch
        (the two-batch estimator's small batch; the update's ``grad_norm`` is the big one). Sharded
        runs (empty ``.grad``) take the hook meter, from the next update on."""
        ga = int(args.gradient_accumulation_steps)
        if self.meter is not None:
            sq = self.meter.sq_value(ga)
        else:
            sq = sq_norm_of(p.grad for p in self._trainable(model) if p.grad is not None)
            if sq is None and self.mode == "auto":
                log.info("rlvr-schedule: no .grad after the first micro-step (a sharded engine): hook meter")
                self.meter = micro_meter(model)
            sq = None if sq is None else sq * float(ga * ga)
        # NaN when nothing was seen: every rank still joins the mean at the log (no rank waits alone)
        self._sq = math.nan if sq is None else sq
        self.micro_batch = int(args.per_device_train_batch_size)

    def _trainable(self, model: Any) -> list[Any]:
        """The model's trainable parameters, listed once per model (walking the module tree at every
        update cost more than the norm itself on a small model)."""
        if self._params is None or self._params[0] != id(model):
            self._params = (id(model), [p for p in model.parameters() if p.requires_grad])
        return self._params[1]

    def next_update(self) -> None:
        if self.meter is not None:
            self.meter.begin()  # the next update's first backward

    def read(self) -> float:
        """The norm taken since the last read (the one host read), else the last one; NaN before any."""
        if self._sq is not None:
            sq, self._sq = self._sq, None
            mean = mean_over_ranks(sq)
            self.norm = math.sqrt(max(mean, 0.0)) if math.isfinite(mean) else math.nan
        return self.norm

    def close(self) -> None:
        """Remove the hooks (they go with the run)."""
        if self.meter is not None:
            self.meter.remove()
            self.meter = None
