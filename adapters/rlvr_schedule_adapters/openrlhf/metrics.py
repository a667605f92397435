"""OpenRLHF's step logs as numbers the core reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvr_schedule_adapters._common import as_number

__all__ = ["OPENRLHF_METRICS", "translate_metrics"]

#: OpenRLHF's ``save_logs_and_checkpoints`` keys the adapter reads (canonical field in brackets):
#: rollout/reward_mean [reward_mean], rollout/reward_std [reward_std], rollout/response_length_mean
#: [response_length], rollout/num_samples [rollouts this step], kl [kl], ppo_kl, ppo_clip_ratio
#: [clip_frac], actor_grad_norm [grad_norm], actor_lr [lr], entropy_loss [entropy, only with an
#: entropy coefficient].
OPENRLHF_METRICS: tuple[str, ...] = (
    "rollout/reward_mean",
    "rollout/reward_std",
    "rollout/response_length_mean",
    "rollout/truncated_rate",
    "rollout/num_samples",
    "kl",
    "ppo_kl",
    "ppo_clip_ratio",
    "actor_grad_norm",
    "actor_lr",
    "entropy_loss",
    "policy_loss",
    "reward",
    "return",
    "response_length",
    "total_length",
)


def translate_metrics(logs_dict: Mapping[str, Any]) -> dict[str, float]:
    """The numeric part of an OpenRLHF ``logs_dict`` (drops ``generated_samples`` and non-numbers).

    ``rollout/num_samples`` is left out: it is this step's rollout count, which the adapter turns
    into cumulative ``samples`` itself (the alias table would read it as ``batch``). So is an
    ``actor_grad_norm`` of 0.0: OpenRLHF's ``get_grad_norm`` answers 0.0 when the DeepSpeed engine
    computed no norm (measured: ZeRO-0 in fp32), and the noise estimate must not read it as |G_big|.
    """
    out: dict[str, float] = {}
    for k, v in logs_dict.items():
        if k in ("generated_samples", "rollout/num_samples"):
            continue
        x = as_number(v)
        if k == "actor_grad_norm" and x == 0.0:
            continue
        if x is not None:
            out[str(k)] = x
    return out
