"""The micro-batch gradient norm, the small-batch half of the two-batch gradient-noise estimate.

No extra backward pass: after the first micro-batch of an update the accumulated gradient is that
micro-batch's gradient (times the loss's 1/GA scaling, which the caller undoes), and after the last
one the update's full gradient, whose norm the Trainer logs as ``grad_norm`` (the estimator of
gpt-neox and nanoGNS; McCandlish et al. 2018, appendix A).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["grad_norm"]


def grad_norm(model: Any) -> float:
    """The L2 norm of the gradients held by ``model``'s parameters now (NaN when none has one)."""
    import torch

    sq = [p.grad.detach().float().pow(2).sum() for p in model.parameters() if p.grad is not None]
    if not sq:
        return math.nan
    return float(torch.sqrt(torch.stack(sq).sum()))
