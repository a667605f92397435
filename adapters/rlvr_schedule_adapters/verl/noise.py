"""The micro-batch gradient norm on a verl actor worker (``actor/grad_norm_micro`` in its metrics).

verl 0.9.1's actor update runs ``TrainingWorker.train_batch`` once per PPO mini-batch (one
optimizer update); inside, the engine's ``forward_backward_batch`` calls ``forward_step`` and
``backward`` once per micro-batch. :class:`EngineProbe` wraps the engine's ``forward_step``: the
first micro-batch of an update arms a :class:`~rlvr_schedule_adapters._torch.MicroGradNorm` on the
engine's module, the second closes it, so the hooks see the first micro-batch's gradient alone.

verl's loss (``agg_loss``) is the micro-batch's share of the mini-batch's: ``token-mean`` divides
the masked token sum by the mini-batch's tokens over all ranks (``batch_num_tokens``) times
``dp_size``; the ``seq-mean-*`` modes divide by the mini-batch's sequences (``global_batch_size``).
:func:`micro_scale` undoes that, so the norm is that of the micro-batch's own mean loss: |G_small|
for B_small = its sequences. ``token-sum`` has no mean to pair with and is not measured.
"""

from __future__ import annotations

import math
from typing import Any

from rlvr_schedule_adapters._torch import MicroGradNorm, mean_over_ranks

__all__ = ["EngineProbe", "micro_scale", "MEAN_MODES"]

#: verl ``loss_agg_mode`` values whose loss is a mean over the mini-batch (measurable).
MEAN_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


def _get(micro_batch: Any, key: str, default: Any = None) -> Any:
    try:
        value = micro_batch[key]
    except (KeyError, AttributeError, TypeError):
        return default
    return getattr(value, "data", value)  # tensordict's NonTensorData


def micro_scale(micro_batch: Any, loss_agg_mode: str | None) -> tuple[float, int]:
    """(factor from the hooked gradient to the micro-batch's own mean-loss gradient, sequences)."""
    mask = micro_batch["loss_mask"]
    rows = int(mask.shape[0]) if not getattr(mask, "is_nested", False) else int(mask.size(0))
    if loss_agg_mode not in MEAN_MODES:
        return math.nan, rows
    dp = float(_get(micro_batch, "dp_size", 1) or 1)
    if loss_agg_mode == "token-mean":
        total = _get(micro_batch, "batch_num_tokens")
        mine = float(mask.sum())
    else:
        total = _get(micro_batch, "global_batch_size")
        lengths = (
            mask.sum(-1)
            if not getattr(mask, "is_nested", False)
            else mask.values().new_tensor([float(m.sum()) for m in mask.unbind()])
        )
        mine = float((lengths > 0).sum())
    if total is None or mine <= 0:
        return math.nan, rows
    return float(total) / (dp * mine), rows


class EngineProbe:
    """Measures the first micro-batch of each update of a verl engine (``engine.module``,
    ``engine.forward_step``). :meth:`begin` before ``train_batch``; :meth:`metrics` after it."""

    def __init__(self, engine: Any, loss_agg_mode: str | None) -> None:
        self.engine = engine
        self.loss_agg_mode = loss_agg_mode
        self.meter = MicroGradNorm(engine.module)
        self._forward_step = engine.forward_step
        engine.forward_step = self.forward_step
        self._count: int | None = None
        self._scale, self._rows = math.nan, 0

    def begin(self) -> None:
        self._count, self._scale, self._rows = 0, math.nan, 0

    def forward_step(self, micro_batch: Any, loss_function: Any, forward_only: bool) -> Any:
        if self._count is not None and not forward_only:
            if self._count == 0:
                self._scale, self._rows = micro_scale(micro_batch, self.loss_agg_mode)
                self.meter.begin()
            elif self._count == 1:
                self.meter.close()  # the first micro-batch's backward is done
            self._count += 1
        return self._forward_step(micro_batch, loss_function=loss_function, forward_only=forward_only)

    def metrics(self, group: Any = None) -> dict[str, float]:
        """``{"grad_norm_micro", "micro_batch"}`` of the update just run (squared norms averaged over
        ``group``: call it on every rank of it), or nothing for an update of one micro-batch."""
        count, self._count = self._count, None
        norm = self.meter.value(self._scale) if count is not None and count >= 2 else math.nan
        norm = math.sqrt(mean_over_ranks(norm**2, group))
        if not math.isfinite(norm):
            return {}
        return {"grad_norm_micro": norm, "micro_batch": float(self._rows)}

    def remove(self) -> None:
        self.meter.remove()
        self.engine.forward_step = self._forward_step
