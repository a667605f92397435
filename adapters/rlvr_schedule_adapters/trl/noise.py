"""The micro-batch gradient norm, the small-batch half of the two-batch gradient-noise estimate.

No extra backward pass: after the first micro-batch of an update the accumulated gradient is that
micro-batch's gradient (times the loss's 1/GA scaling, which the caller undoes), and after the last
one the update's full gradient, whose norm the Trainer logs as ``grad_norm`` (the estimator of
gpt-neox and nanoGNS; McCandlish et al. 2018, appendix A). TRL's Trainer keeps the accumulated
``.grad`` between micro-steps, so the callback reads it there; verl and OpenRLHF, whose engines do
not, use the tensor hooks of :mod:`rlvr_schedule_adapters._torch` (where both helpers live).
"""

from __future__ import annotations

from rlvr_schedule_adapters._torch import grad_norm, mean_over_ranks

__all__ = ["grad_norm", "mean_over_ranks"]
