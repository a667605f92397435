"""The micro-batch gradient norm, the small-batch half of the two-batch gradient-noise estimate.

No extra backward pass: after the first micro-batch of an update the accumulated gradient is that
micro-batch's gradient (times the loss's 1/GA scaling, which the caller undoes), and after the last
one the update's full gradient, whose norm the Trainer logs as ``grad_norm`` (the estimator of
gpt-neox and nanoGNS; McCandlish et al. 2018, appendix A).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["grad_norm", "mean_over_ranks"]


def grad_norm(model: Any) -> float:
    """The L2 norm of the gradients held by ``model``'s parameters now (NaN when none has one)."""
    import torch

    sq = [p.grad.detach().float().pow(2).sum() for p in model.parameters() if p.grad is not None]
    if not sq:
        return math.nan
    return float(torch.sqrt(torch.stack(sq).sum()))


def mean_over_ranks(value: float) -> float:
    """The mean of ``value`` over the processes of the default ``torch.distributed`` group (``value``
    itself in one process). Every rank must feed its schedule the same record, or the ranks' decisions
    (and with them their accumulation counts) could differ."""
    import torch

    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return value
    t = torch.tensor([value], dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t)
    return float(t.item()) / dist.get_world_size()
