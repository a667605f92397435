"""The micro-batch gradient norm, the small-batch half of the two-batch gradient-noise estimate.

No extra backward pass: after the first micro-batch of an update the accumulated gradient is that
micro-batch's gradient (times the loss's 1/GA scaling, which the caller undoes), and after the last
one the update's full gradient, whose norm the Trainer logs as ``grad_norm`` (the estimator of
gpt-neox and nanoGNS; McCandlish et al. 2018, appendix A). TRL's Trainer keeps the accumulated
``.grad`` between micro-steps (plain and DDP runs), so the callback reads it there; under DeepSpeed
ZeRO or FSDP it does not, and the callback uses, like verl and OpenRLHF, the tensor hooks of :mod:`rlvr_schedule_adapters._torch` (where both helpers live).
"""

from __future__ import annotations

from typing import Any

from rlvr_schedule_adapters._torch import MicroGradNorm, grad_norm, grad_sq_norm, mean_over_ranks

__all__ = ["grad_norm", "grad_sq_norm", "mean_over_ranks", "micro_meter"]


def micro_meter(model: Any) -> MicroGradNorm:
    """A hook meter on ``model`` (unwrapped from DeepSpeed's engine): its first backward's gradient.

    Under DeepSpeed ZeRO-2/3 and FSDP the Trainer leaves ``.grad`` empty between micro-steps, so the
    callback sums what the parameter tensors' hooks see instead (as the verl and OpenRLHF adapters
    do). Only parameters that require a gradient are hooked: with PEFT/LoRA the norm is that of the
    trainable (adapter) parameters, the ones the optimizer updates and ``grad_norm`` reports."""
    return MicroGradNorm(getattr(model, "module", model))
