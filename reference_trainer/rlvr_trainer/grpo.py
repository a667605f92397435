"""GRPO losses: group-normalised advantages, the clipped surrogate, KL to a reference, entropy.

Shapes: ``logp``, ``old_logp``, ``ref_logp``, ``mask`` are ``[rollouts, completion_tokens]``
(mask 1 on real completion tokens); ``advantages`` is ``[rollouts]``.

Loss aggregation (``loss_type``), all normalised over the *whole* rollout batch so that
micro-batches can be summed (``n_seqs``/``n_tokens``/``max_len`` describe the full batch):

- ``"grpo"``: mean over each sequence's tokens, then mean over sequences (the original GRPO).
- ``"token_mean"``: sum over all tokens / tokens in the batch (DAPO).
- ``"dr_grpo"``: sum over tokens / (sequences x max completion length) (Dr. GRPO: no length bias).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["LOSS_TYPES", "group_advantages", "token_logprobs", "aggregate", "policy_loss", "LossStats"]

LOSS_TYPES = ("grpo", "token_mean", "dr_grpo")


def group_advantages(rewards: torch.Tensor, group_size: int, *, scale: bool = True,
                     eps: float = 1e-4) -> torch.Tensor:
    """``r - mean(group)``, divided by the group's std when ``scale`` (Dr. GRPO sets it False).

    ``rewards`` is flat, groups contiguous (``[g0 r0..r{G-1}, g1 ...]``). The std is the unbiased
    one (as in TRL); a group with equal rewards gets advantage 0 either way.
    """
    if rewards.ndim != 1 or rewards.numel() % group_size:
        raise ValueError(f"rewards must be flat with a multiple of group_size={group_size} entries, "
                         f"got shape {tuple(rewards.shape)}")
    r = rewards.view(-1, group_size).to(torch.float32)
    adv = r - r.mean(dim=1, keepdim=True)
    if scale:
        std = r.std(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(r[:, :1])
        adv = adv / (std + eps)
    return adv.reshape(-1)


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, *,
                   with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of each target token (and the per-position entropy) from ``[.., T, V]`` logits."""
    logp_all = torch.log_softmax(logits.float(), dim=-1)
    logp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    ent = -(logp_all.exp() * logp_all).sum(-1) if with_entropy else None
    return logp, ent


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, loss_type: str, *, n_seqs: int,
              n_tokens: int, max_len: int) -> torch.Tensor:
    """This micro-batch's share of the batch loss (see the module docstring)."""
    m = mask.to(per_token.dtype)
    if loss_type == "grpo":
        per_seq = (per_token * m).sum(-1) / m.sum(-1).clamp(min=1)
        return per_seq.sum() / n_seqs
    if loss_type == "token_mean":
        return (per_token * m).sum() / max(n_tokens, 1)
    if loss_type == "dr_grpo":
        return (per_token * m).sum() / (n_seqs * max_len)
    raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")


@dataclass
class LossStats:
    """Sums over a micro-batch's completion tokens (divide by ``tokens`` for means)."""

    tokens: float = 0.0
    clipped: float = 0.0
    kl: float = 0.0
    entropy: float = 0.0

    def add(self, other: "LossStats") -> None:
        self.tokens += other.tokens
        self.clipped += other.clipped
        self.kl += other.kl
        self.entropy += other.entropy


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                *, loss_type: str, n_seqs: int, n_tokens: int, max_len: int, clip_low: float = 0.2,
                clip_high: float = 0.2, ref_logp: torch.Tensor | None = None, beta: float = 0.0,
                entropy: torch.Tensor | None = None) -> tuple[torch.Tensor, LossStats]:
    """PPO-clip surrogate with separate low/high ranges, plus ``beta`` x k3 KL to the reference.

    Per token: ``-min(ratio A, clip(ratio, 1 - clip_low, 1 + clip_high) A) + beta KL`` with
    ``KL = exp(ref - logp) - (ref - logp) - 1`` (unbiased, non-negative). ``clipped`` counts the
    tokens where the clipped branch is the one taken (its gradient is zero).
    """
    ratio = torch.exp(logp - old_logp)
    adv = advantages.unsqueeze(-1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    m = mask.to(per_token.dtype)
    kl = None
    if ref_logp is not None:
        d = ref_logp - logp
        kl = torch.exp(d) - d - 1.0
        if beta:
            per_token = per_token + beta * kl
    loss = aggregate(per_token, mask, loss_type, n_seqs=n_seqs, n_tokens=n_tokens, max_len=max_len)
    with torch.no_grad():
        is_clipped = (clipped < unclipped).to(m.dtype)
        stats = LossStats(tokens=float(m.sum()), clipped=float((is_clipped * m).sum()),
                          kl=float((kl.detach() * m).sum()) if kl is not None else float("nan"),
                          entropy=float((entropy.detach() * m).sum()) if entropy is not None else float("nan"))
    return loss, stats
