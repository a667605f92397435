"""The micro-batch gradient norm on an OpenRLHF policy worker (``grad_norm_micro`` in its status).

OpenRLHF's ``ActorPPOTrainer.ppo_train`` runs ``training_step`` once per micro-batch and groups
``strategy.accumulated_gradient`` of them into one DeepSpeed update. :class:`MicroNormProbe`
wraps ``training_step`` of one trainer: at the first micro-batch of each update it arms a
:class:`~rlvr_schedule_adapters._torch.MicroGradNorm` on the policy module, so the hooks see that
micro-batch's gradient before DeepSpeed reduces it (ZeRO-2 keeps no ``.grad`` between micro-steps).

The gradient the hooks see is of OpenRLHF's share of the update's loss: ``aggregate_loss`` divides
the masked token sum by ``batch_num_tokens`` (the update's tokens over all ranks / GA) times
``dp_size``, and DeepSpeed divides by GA again. :func:`micro_scale` undoes both, so the recorded
norm is that of the micro-batch's own token mean (sample mean of sequence means when the loss is
sequence-level): |G_small| for B_small = the micro-batch's samples. The last update of a step is
kept, the one ``actor_grad_norm`` (|G_big|) reports. With several ranks the squared norms are
averaged over the default process group, so every rank reports the same number.
"""

from __future__ import annotations

import math
from typing import Any

from rlvr_schedule_adapters._torch import MicroGradNorm, mean_over_ranks

__all__ = ["MicroNormProbe", "micro_scale"]


def micro_scale(experience: Any, loss_batch_info: Any, gas: int, *, token_level: bool) -> float:
    """Factor from the hooked gradient of one micro-batch to the gradient of its own mean loss."""
    mask = experience.action_mask
    dp = float(loss_batch_info.get("dp_size", 1) or 1)
    if token_level:
        total, mine = loss_batch_info["batch_num_tokens"], float(mask.sum())
    else:
        total = loss_batch_info["global_batch_size"]
        mine = float((mask.reshape(mask.shape[0], -1).sum(-1) > 0).sum())
    if mine <= 0:
        return math.nan
    return float(total) * gas / (dp * mine)


class MicroNormProbe:
    """Measures the first micro-batch of each update of ``trainer`` (an ``ActorPPOTrainer``).

    Wraps the instance's ``training_step``; :meth:`metrics` (call it on every rank after
    ``ppo_train``: it may all-reduce) gives ``{"grad_norm_micro", "micro_batch"}`` of the last
    update, or nothing when none was measured (GA of 1, dynamic batching).
    """

    def __init__(self, trainer: Any) -> None:
        engine = trainer.actor.model
        self.trainer = trainer
        self.meter = MicroGradNorm(getattr(engine, "module", engine))
        self._step = trainer.training_step
        self._last: tuple[float, int | None] = (math.nan, None)
        trainer.training_step = self.training_step

    def training_step(
        self, experience: Any, kl_ctl: float, step: int, loss_batch_info: Any = None, *args: Any, **kw: Any
    ) -> Any:
        t = self.trainer
        gas = int(t.strategy.accumulated_gradient)
        first = gas > 1 and loss_batch_info is not None and step % gas == 0
        if first:
            self.meter.begin()
        try:
            return self._step(experience, kl_ctl, step, loss_batch_info, *args, **kw)
        finally:
            if first:
                token_level = bool(getattr(t.actor_loss_fn, "token_level_loss", True))
                scale = micro_scale(experience, loss_batch_info, gas, token_level=token_level)
                self._last = (self.meter.value(scale), int(experience.action_mask.shape[0]))

    def metrics(self) -> dict[str, float]:
        """The last update's micro-batch norm (squared norms averaged over ranks), then forgets it."""
        norm, micro = self._last
        self._last = (math.nan, None)
        norm = math.sqrt(mean_over_ranks(norm**2))
        if not math.isfinite(norm) or micro is None:
            return {}
        return {"grad_norm_micro": norm, "micro_batch": float(micro)}

    def remove(self) -> None:
        """Unhook: the trainer's own ``training_step`` again."""
        self.meter.remove()
        self.trainer.training_step = self._step
