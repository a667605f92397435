"""GRPO losses: group-normalised advantages, the clipped surrogate, KL to a reference, entropy.

Shapes: ``logp``, ``old_logp``, ``ref_logp``, ``mask`` are ``[rollouts, completion_tokens]``
(mask 1 on real completion tokens); ``advantages`` is ``[rollouts]``.

Loss aggregation (``loss_type``), all normalised over the *whole* rollout batch so that
micro-batches can be summed (``n_seqs``/``n_tokens``/``max_len`` describe the full batch):

- ``"grpo"``: mean over each sequence's tokens, then mean over sequences (the original GRPO).
- ``"token_mean"``: sum over all tokens / tokens in the batch (DAPO).
- ``"dr_grpo"``: sum over tokens / (sequences x max completion length) (Dr. GRPO: no length bias).

The training step (:func:`pack_rollouts`, :func:`completion_logprobs`, :func:`packed_update`)
never pads a row to the batch's longest sequence: rows are sorted by length into micro-batches
that fill a token budget and are trimmed to their own longest row, and the log-probabilities
are taken only at completion positions, in chunks, without materialising ``[positions, vocab]``
fp32 logits for the whole micro-batch (the backward recomputes each chunk's logits). The first
rows of an update are a random fixed-size sample (``micro_batch`` rows, itself packed the same
way into one or more micro-batches): the gradient norm after them is the small-batch half of
the gradient-noise estimate (``grad_norm_micro``), so length sorting must not make it the
shortest rollouts.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from rlvr_trainer.timing import PartClock

__all__ = [
    "LOSS_TYPES",
    "group_advantages",
    "token_logprobs",
    "aggregate",
    "policy_loss",
    "LossStats",
    "MicroBatch",
    "PackedBatch",
    "plan_micro_batches",
    "pack_rollouts",
    "linear_logprobs",
    "completion_logprobs",
    "reference_logprobs",
    "behaviour_logprobs",
    "UpdateResult",
    "packed_update",
    "LOGIT_CHUNK_BYTES",
    "logit_chunk",
    "micro_scale",
]

LOSS_TYPES = ("grpo", "token_mean", "dr_grpo")


def group_advantages(
    rewards: torch.Tensor, group_size: int, *, scale: bool = True, eps: float = 1e-4
) -> torch.Tensor:
    """``r - mean(group)``, divided by the group's std when ``scale`` (Dr. GRPO sets it False).

    ``rewards`` is flat, groups contiguous (``[g0 r0..r{G-1}, g1 ...]``). The std is the unbiased
    one (as in TRL); a group with equal rewards gets advantage 0 either way.
    """
    if rewards.ndim != 1 or rewards.numel() % group_size:
        raise ValueError(
            f"rewards must be flat with a multiple of group_size={group_size} entries, "
            f"got shape {tuple(rewards.shape)}"
        )
    r = rewards.view(-1, group_size).to(torch.float32)
    adv = r - r.mean(dim=1, keepdim=True)
    if scale:
        std = r.std(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(r[:, :1])
        adv = adv / (std + eps)
    return adv.reshape(-1)


def token_logprobs(
    logits: torch.Tensor, targets: torch.Tensor, *, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of each target token (and the per-position entropy) from ``[.., T, V]`` logits."""
    logp_all = torch.log_softmax(logits.float(), dim=-1)
    logp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    ent = -(logp_all.exp() * logp_all).sum(-1) if with_entropy else None
    return logp, ent


def aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, loss_type: str, *, n_seqs: int, n_tokens: int, max_len: int
) -> torch.Tensor:
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
    """Sums over a micro-batch's completion tokens (divide by ``tokens`` for means).

    Inside an update the sums are 0-dim device tensors (adding them never waits for the device);
    :meth:`item` turns them into floats once per update."""

    tokens: Any = 0.0
    clipped: Any = 0.0
    kl: Any = 0.0
    entropy: Any = 0.0

    def add(self, other: LossStats) -> None:
        self.tokens = self.tokens + other.tokens
        self.clipped = self.clipped + other.clipped
        self.kl = self.kl + other.kl
        self.entropy = self.entropy + other.entropy

    def item(self) -> LossStats:
        """Floats (one host sync for all four)."""
        vals = [self.tokens, self.clipped, self.kl, self.entropy]
        if any(isinstance(v, torch.Tensor) for v in vals):
            t = torch.stack([torch.as_tensor(v, dtype=torch.float64).to(_dev(vals)) for v in vals])
            vals = t.tolist()
        return LossStats(*(float(v) for v in vals))


def _dev(vals: list) -> torch.device:
    for v in vals:
        if isinstance(v, torch.Tensor):
            return v.device
    return torch.device("cpu")


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    loss_type: str,
    n_seqs: int,
    n_tokens: int,
    max_len: int,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    ref_logp: torch.Tensor | None = None,
    beta: float = 0.0,
    entropy: torch.Tensor | None = None,
    token_weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, LossStats]:
    """PPO-clip surrogate with separate low/high ranges, plus ``beta`` x k3 KL to the reference.

    Per token: ``-min(ratio A, clip(ratio, 1 - clip_low, 1 + clip_high) A) + beta KL`` with
    ``KL = exp(ref - logp) - (ref - logp) - 1`` (unbiased, non-negative). ``clipped`` counts the
    tokens where the clipped branch is the one taken (its gradient is zero). ``token_weight``
    (no gradient) multiplies each token's surrogate: the truncated importance-sampling weight
    ``min(pi_old / pi_sampler, cap)`` when the sampler's numerics differ from the trainer's.
    """
    ratio = torch.exp(logp - old_logp)
    adv = advantages.unsqueeze(-1)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * adv
    per_token = -torch.minimum(unclipped, clipped)
    if token_weight is not None:
        per_token = per_token * token_weight.detach()
    m = mask.to(per_token.dtype)
    kl = None
    if ref_logp is not None:
        d = ref_logp - logp
        kl = torch.exp(d) - d - 1.0
        if beta:
            per_token = per_token + beta * kl
    loss = aggregate(per_token, mask, loss_type, n_seqs=n_seqs, n_tokens=n_tokens, max_len=max_len)
    with torch.no_grad():  # 0-dim device tensors: no host sync here (LossStats.item makes floats)
        is_clipped = (clipped < unclipped).to(m.dtype)
        nan = torch.full((), float("nan"), device=m.device)
        stats = LossStats(
            tokens=m.sum(),
            clipped=(is_clipped * m).sum(),
            kl=(kl.detach() * m).sum() if kl is not None else nan,
            entropy=(entropy.detach() * m).sum() if entropy is not None else nan,
        )
    return loss, stats


# --- the packed training step ------------------------------------------------------------------

#: fp32 logits held at once per chunk of completion positions (forward and backward): ~64 MiB.
LOGIT_CHUNK_BYTES = 1 << 26


def logit_chunk(vocab_size: int) -> int:
    """Completion positions per logits chunk for a vocabulary (at least 16)."""
    return max(16, LOGIT_CHUNK_BYTES // (4 * vocab_size))


@dataclass
class MicroBatch:
    """Rows ``rows`` of the rollout batch, right-padded to their own longest sequence.

    ``input_ids``/``attention_mask`` are ``[m, W]`` (``prompt + completion`` without its last
    token); ``targets``/``mask`` are ``[m, Lc]`` completion tokens (``Lc`` = this micro-batch's
    longest completion); ``pos_rows``/``pos_cols`` index the input positions whose next token is
    a completion token, in the row-major order of ``mask``'s ones.
    """

    rows: list[int]
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor
    pos_rows: torch.Tensor
    pos_cols: torch.Tensor
    # built on the host with the rest, so that no step needs a data-dependent shape from the
    # device (a boolean index or ``nonzero`` would wait for it): the completion targets in
    # ``pos_rows``/``pos_cols`` order, their flat indices in ``[m * Lc]``, and ``rows`` as a tensor
    flat_targets: torch.Tensor | None = None
    flat_idx: torch.Tensor | None = None
    rows_t: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.flat_idx is None:
            self.flat_idx = self.mask.reshape(-1).nonzero().squeeze(1)
        if self.flat_targets is None:
            self.flat_targets = self.targets.reshape(-1)[self.flat_idx]
        if self.rows_t is None:
            self.rows_t = torch.tensor(self.rows, dtype=torch.long)

    @property
    def positions(self) -> int:
        """Padded positions the forward runs over (the cost the token budget bounds)."""
        return self.input_ids.numel()

    def to(self, device: Any) -> MicroBatch:
        """The same micro-batch with its tensors on ``device`` (asynchronous host-to-device copies)."""
        names = ("input_ids", "attention_mask", "targets", "mask", "pos_rows", "pos_cols")
        names += ("flat_targets", "flat_idx", "rows_t")
        moved = {k: getattr(self, k).to(device, non_blocking=True) for k in names}
        return MicroBatch(self.rows, **moved)


@dataclass
class PackedBatch:
    """A rollout batch cut into micro-batches; the first ``noise_micro`` hold the noise sample."""

    micro: list[MicroBatch]
    n_seqs: int
    n_tokens: int  # completion tokens in the whole batch
    completion_lengths: torch.Tensor  # [n_seqs], batch order
    noise_micro: int = 0

    @property
    def positions(self) -> int:
        return sum(mb.positions for mb in self.micro)

    def to(self, device: Any) -> PackedBatch:
        """The batch with every micro-batch's tensors on ``device`` (one copy per update, before
        the micro-batch loop)."""
        micro = [mb.to(device) for mb in self.micro]
        return PackedBatch(micro, self.n_seqs, self.n_tokens, self.completion_lengths, self.noise_micro)


def _cut(rows: list[int], lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """Rows sorted by length, cut into runs with ``rows x longest <= token_budget`` (>= 1 row each)
    that minimise padded positions plus ``token_budget / 16`` per micro-batch (its fixed cost):
    an exact dynamic programme over the sorted order."""
    rows = sorted(rows, key=lambda i: (lengths[i], i))
    m = len(rows)
    if m == 0:
        return []
    overhead = token_budget / 16
    best = [0.0] + [math.inf] * m
    cut_at = [0] * (m + 1)
    for j in range(1, m + 1):
        width = lengths[rows[j - 1]]  # the longest of rows[i:j]
        i = j - 1
        while i >= 0 and (j - i == 1 or (j - i) * width <= token_budget):
            cost = best[i] + (j - i) * width + overhead
            if cost < best[j]:
                best[j], cut_at[j] = cost, i
            i -= 1
    out: list[list[int]] = []
    j = m
    while j > 0:
        out.append(rows[cut_at[j] : j])
        j = cut_at[j]
    return out[::-1]


def plan_micro_batches(
    lengths: Sequence[int], *, micro_batch: int, token_budget: int, seed: Any = 0
) -> tuple[list[list[int]], int]:
    """Row indices per micro-batch, and how many leading micro-batches hold the noise sample.

    When the batch has more than ``micro_batch`` rows, its first rows are a uniform random
    sample of exactly ``micro_batch`` rows (``random.Random(seed)``: a resumed run draws the
    same one). The sample and the other rows are each sorted by length and cut greedily so that
    ``rows x longest row <= token_budget`` (at least one row per micro-batch).
    """
    n = len(lengths)
    if micro_batch < 1 or token_budget < 1:
        raise ValueError(f"micro_batch and token_budget must be >= 1, got {micro_batch}, {token_budget}")
    if n <= micro_batch:
        return _cut(list(range(n)), lengths, token_budget), 0
    first = random.Random(str(seed)).sample(range(n), micro_batch)
    taken = set(first)
    head = _cut(first, lengths, token_budget)
    return head + _cut([i for i in range(n) if i not in taken], lengths, token_budget), len(head)


def pack_rollouts(
    prompt_ids: Sequence[Sequence[int]],
    completion_ids: Sequence[Sequence[int]],
    *,
    pad_id: int,
    micro_batch: int,
    token_budget: int,
    seed: Any = 0,
) -> PackedBatch:
    """Micro-batches of ``prompt + completion`` rows (see :func:`plan_micro_batches`)."""
    if len(prompt_ids) != len(completion_ids):
        raise ValueError("prompt_ids and completion_ids must have one entry per rollout")
    lengths = [len(p) + len(c) - 1 for p, c in zip(prompt_ids, completion_ids, strict=True)]
    plan, noise = plan_micro_batches(lengths, micro_batch=micro_batch, token_budget=token_budget, seed=seed)
    micro = []
    for rows in plan:
        width = max(lengths[i] for i in rows)
        lc = max(max(len(completion_ids[i]) for i in rows), 1)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        targets = torch.full((len(rows), lc), pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), lc), dtype=torch.float32)
        pr, pc = [], []
        for k, i in enumerate(rows):
            p, c = list(prompt_ids[i]), list(completion_ids[i])
            seq = (p + c)[:-1]
            ids[k, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            attn[k, : len(seq)] = 1
            if c:
                targets[k, : len(c)] = torch.tensor(c, dtype=torch.long)
                mask[k, : len(c)] = 1.0
                pr.extend([k] * len(c))
                pc.extend(range(len(p) - 1, len(p) - 1 + len(c)))
        micro.append(
            MicroBatch(
                rows,
                ids,
                attn,
                targets,
                mask,
                torch.tensor(pr, dtype=torch.long),
                torch.tensor(pc, dtype=torch.long),
            )
        )
    clen = torch.tensor([len(c) for c in completion_ids], dtype=torch.float32)
    return PackedBatch(micro, len(lengths), int(clen.sum()), clen, noise)


class _LinearLogprob(torch.autograd.Function):
    """``log_softmax(h @ W.T + b)[target]`` over chunks of rows; the backward recomputes each
    chunk's logits instead of keeping them. The entropy comes out without a gradient."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(ctx, hidden, weight, bias, targets, chunk, with_entropy):  # type: ignore[override]
        n = hidden.shape[0]
        acc = torch.promote_types(hidden.dtype, torch.float32)  # fp32 logits (fp64 when given fp64)
        logp = hidden.new_empty(n, dtype=acc)
        lse = torch.empty_like(logp)
        ent = torch.empty_like(logp) if with_entropy else None
        for a in range(0, n, chunk):
            b = min(a + chunk, n)
            logits = torch.nn.functional.linear(hidden[a:b], weight, bias).to(acc)
            lse[a:b] = torch.logsumexp(logits, dim=-1)
            logp[a:b] = logits.gather(-1, targets[a:b, None]).squeeze(-1) - lse[a:b]
            if ent is not None:
                p = torch.exp(logits - lse[a:b, None])
                ent[a:b] = lse[a:b] - (p * logits).sum(-1)
        ctx.save_for_backward(hidden, weight, bias, targets, lse)
        ctx.chunk = chunk
        if ent is None:
            ent = logp.new_zeros(0)
        ctx.mark_non_differentiable(ent)
        return logp, ent

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")  # the backward's logits in the forward's precision
    def backward(ctx, grad_logp, _grad_ent):  # type: ignore[override]
        hidden, weight, bias, targets, lse = ctx.saved_tensors
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        gh = torch.empty_like(hidden) if need_h else None
        acc = lse.dtype
        gw = torch.zeros_like(weight, dtype=acc) if need_w else None
        gb = torch.zeros_like(bias, dtype=acc) if need_b and bias is not None else None
        n = hidden.shape[0]
        for a in range(0, n, ctx.chunk):
            b = min(a + ctx.chunk, n)
            logits = torch.nn.functional.linear(hidden[a:b], weight, bias).to(acc)
            # d logp_t / d logits = onehot(t) - softmax
            g = torch.exp(logits - lse[a:b, None]).mul_(-grad_logp[a:b, None])
            g.scatter_add_(-1, targets[a:b, None], grad_logp[a:b, None])
            if gh is not None:
                gh[a:b] = (g.to(weight.dtype) @ weight).to(hidden.dtype)
            if gw is not None:
                gw += g.t() @ hidden[a:b].to(acc)
            if gb is not None:
                gb += g.sum(0)
        return (
            gh,
            gw.to(weight.dtype) if gw is not None else None,
            gb.to(bias.dtype) if gb is not None else None,
            None,
            None,
            None,
        )


def linear_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    chunk: int | None = None,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of ``targets`` under ``h @ W.T + b`` (``hidden [N, H]``, ``weight [V, H]``) and,
    optionally, the entropy (no gradient): at most ``chunk`` rows of fp32 logits exist at once."""
    chunk = chunk or logit_chunk(weight.shape[0])
    logp, ent = _LinearLogprob.apply(hidden, weight, bias, targets, int(chunk), bool(with_entropy))
    return logp, (ent if with_entropy else None)


def _split_head(model) -> tuple[Any, Any] | None:
    """(decoder, lm_head) when logits are a plain linear map of the decoder's last hidden state."""
    cfg = getattr(model, "config", None)
    if cfg is not None and (
        getattr(cfg, "final_logit_softcapping", None) or getattr(cfg, "logit_scale", None)
    ):
        return None
    get_dec = getattr(model, "get_decoder", None)
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if get_dec is None or not isinstance(head, torch.nn.Linear):
        return None
    try:
        dec = get_dec()
    except (AttributeError, NotImplementedError):
        return None
    return (dec, head) if dec is not None and dec is not model else None


def completion_logprobs(
    model, mb: MicroBatch, *, with_entropy: bool = False, chunk: int | None = None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``[m, Lc]`` log-probs of ``mb``'s completion tokens (0 on padding), and their entropy.

    Runs the decoder over the micro-batch, keeps the hidden states at completion positions only
    and applies the output layer in chunks (:func:`linear_logprobs`). Models whose logits are
    not a plain linear map (soft-capping, scaling) fall back to the full logits of those rows.
    """
    m, lc = mb.mask.shape
    parts = _split_head(model)
    if parts is not None:
        dec, head = parts
        hidden = dec(input_ids=mb.input_ids, attention_mask=mb.attention_mask).last_hidden_state
        h = hidden[mb.pos_rows, mb.pos_cols]
        flat, ent = linear_logprobs(
            h, head.weight, mb.flat_targets, head.bias, chunk=chunk, with_entropy=with_entropy
        )
    else:
        logits = model(input_ids=mb.input_ids, attention_mask=mb.attention_mask).logits[
            mb.pos_rows, mb.pos_cols
        ]
        flat, ent = token_logprobs(logits, mb.flat_targets)
        if with_entropy:
            with torch.no_grad():
                lp = torch.log_softmax(logits.detach().float(), -1)
                ent = -(lp.exp() * lp).sum(-1)
        else:
            ent = None
    idx = mb.flat_idx  # row-major, the order of pos_rows/pos_cols
    out = flat.new_zeros(m * lc).index_copy(0, idx, flat).view(m, lc)
    ent_out = None
    if ent is not None:
        ent_out = ent.new_zeros(m * lc).index_copy(0, idx, ent.detach()).view(m, lc)
    return out, ent_out


@dataclass
class UpdateResult:
    """What one update (all PPO epochs) reports to the step record."""

    stats: LossStats = field(default_factory=LossStats)
    grad_norm: float = math.nan
    grad_norm_micro: float = math.nan
    micro_batch: int | None = None  # rows in the noise sample (None: no separate one)
    n_micro: int = 0
    positions: int = 0  # padded positions per epoch (forward cost)
    # importance ratio pi_theta / pi_behaviour over completion tokens before the step (off-policy
    # batches only): how stale the batch is; tokens outside the clip range get no gradient
    ratio_mean: float = math.nan
    ratio_max: float = math.nan
    # |log pi_trainer - log pi_sampler| over completion tokens before the step (the sampler's own
    # log-probs given): the two numerics' mismatch; and the mean truncated IS weight when applied
    logp_diff_mean: float = math.nan
    logp_diff_max: float = math.nan
    tis_weight_mean: float = math.nan


def _grad_norm_t(params: list[torch.Tensor]) -> torch.Tensor:
    """The gradients' global norm as a 0-dim device tensor (no host sync)."""
    return torch.sqrt(sum((p.grad.detach().float() ** 2).sum() for p in params if p.grad is not None))


def micro_scale(loss_type: str, n_seqs: int, n_tokens: int, micro_seqs: int, micro_tokens: float) -> float:
    """Factor from a micro-batch's share of the batch-normalised loss to its own mean loss."""
    if loss_type == "token_mean":
        return n_tokens / max(micro_tokens, 1.0)
    return n_seqs / micro_seqs


def _autocast_on(mb: MicroBatch, dtype: torch.dtype | None):
    from rlvr_trainer.device import autocast

    return autocast(mb.input_ids.device, dtype if dtype is not None else torch.float32)


def reference_logprobs(
    ref_model, packed: PackedBatch, *, compute_dtype: torch.dtype | None = None
) -> list[torch.Tensor]:
    """The reference policy's completion log-probs per micro-batch (no gradient)."""
    out = []
    with torch.no_grad():
        for mb in packed.micro:
            with _autocast_on(mb, compute_dtype):
                out.append(completion_logprobs(ref_model, mb)[0])
    return out


def behaviour_logprobs(
    packed: PackedBatch, logprobs: Sequence[Sequence[float]], *, device: Any = None
) -> list[torch.Tensor]:
    """The sampling policy's per-token log-probs (one list per rollout, batch order) laid out like
    each micro-batch's ``mask`` (0 on padding); built on the host, copied to ``device`` once."""
    out = []
    for mb in packed.micro:
        t = torch.zeros(mb.mask.shape, dtype=torch.float32)
        for k, i in enumerate(mb.rows):
            lp = logprobs[i]
            n = int(mb.mask[k].sum()) if mb.mask.device.type == "cpu" else None
            if n is not None and len(lp) != n:
                raise ValueError(f"rollout {i}: {len(lp)} behaviour log-probs for {n} tokens")
            if lp:
                t[k, : len(lp)] = torch.tensor(lp, dtype=t.dtype)
        out.append(t.to(device if device is not None else mb.mask.device, non_blocking=True))
    return out


class _Tally:
    """An update's bookkeeping beside the loss, as 0-dim device tensors (the micro-batch loop never
    waits for the device): epoch 0's own log-probs as the old policy's, the off-policy ratio, the
    sampler mismatch and its truncated-IS weights, the loss statistics, the noise sample's
    gradient norm and each epoch's. :meth:`result` brings them to the host in one transfer."""

    def __init__(self, packed: PackedBatch, behaviour_logp, sampler_logp, tis_cap: float) -> None:
        n = len(packed.micro)
        for name, given in (("behaviour_logp", behaviour_logp), ("sampler_logp", sampler_logp)):
            if given is not None and len(given) != n:
                raise ValueError(f"{name} has {len(given)} micro-batches, the batch {n}")
        self.packed, self.tis_cap = packed, tis_cap
        self.behaviour, self.sampler = behaviour_logp, sampler_logp
        self.old: list[torch.Tensor] = list(behaviour_logp) if behaviour_logp is not None else []
        self.weights: list[torch.Tensor | None] = [None] * n
        dev = packed.micro[0].input_ids.device if packed.micro else torch.device("cpu")
        zero, neg = torch.zeros((), device=dev), torch.full((), -math.inf, device=dev)
        self.sums = {"ratio": zero, "ratio_max": neg, "diff": zero, "diff_max": neg, "tis": zero}
        self.stats = LossStats()
        self.noise_norm: torch.Tensor | None = None
        self.noise_tokens: Any = zero
        self.noise_rows: int | None = None
        self.norms: list[torch.Tensor] = []
        self.dev = dev

    @torch.no_grad()
    def first_epoch(self, j: int, mb: MicroBatch, logp: torch.Tensor) -> None:
        """Epoch 0's forward, detached: the old log-probs (on-policy) or the ratio to the sampler's
        (off-policy); the sampler mismatch and, with ``tis_cap``, the truncated IS weights."""
        lp0 = logp.detach()
        if self.behaviour is None:
            self.old.append(lp0)
        else:
            r = torch.exp(lp0 - self.old[j]) * mb.mask
            self.sums["ratio"] = self.sums["ratio"] + r.sum()
            self.sums["ratio_max"] = torch.maximum(self.sums["ratio_max"], r.max())
        if self.sampler is not None:
            d = (lp0 - self.sampler[j]).abs() * mb.mask
            self.sums["diff"] = self.sums["diff"] + d.sum()
            self.sums["diff_max"] = torch.maximum(self.sums["diff_max"], d.max())
            if self.tis_cap > 0:
                self.weights[j] = torch.exp(lp0 - self.sampler[j]).clamp(max=self.tis_cap)
                self.sums["tis"] = self.sums["tis"] + (self.weights[j] * mb.mask).sum()

    def add(self, epoch: int, st: LossStats) -> None:
        """Loss statistics: epoch 0's (the batch before the step), clipped tokens over all epochs."""
        if epoch == 0:
            self.stats.add(st)
        else:
            self.stats.clipped = self.stats.clipped + st.clipped

    def noise_sample(self, params: list[torch.Tensor], j: int) -> None:
        """After the noise sample's last micro-batch: its own gradient norm (same parameters),
        rescaled in :meth:`result` once its token count is on the host."""
        self.noise_norm = _grad_norm_t(params)
        self.noise_rows = sum(len(m.rows) for m in self.packed.micro[: j + 1])
        self.noise_tokens = self.stats.tokens

    def result(self, res: UpdateResult, loss_type: str) -> UpdateResult:
        """The update's one host sync: every logged scalar in one transfer."""
        nan = torch.full((), math.nan, device=self.dev)
        st, s, noise = self.stats, self.sums, self.noise_norm is not None
        vals = [st.tokens, st.clipped, st.kl, st.entropy, self.norms[-1] if self.norms else nan]
        vals += [self.noise_norm if noise else nan, self.noise_tokens if noise else nan]
        vals += [s["ratio"], s["ratio_max"], s["diff"], s["diff_max"], s["tis"]]
        host = torch.stack([torch.as_tensor(v, device=self.dev).float().reshape(()) for v in vals]).tolist()
        tokens, clipped, kl, entropy, gnorm, gmicro, ntok, rs, rm, ds, dm, ws = host
        res.stats, res.grad_norm = LossStats(tokens, clipped, kl, entropy), gnorm
        if noise:
            n_seqs, n_tokens, rows = self.packed.n_seqs, self.packed.n_tokens, self.noise_rows or 1
            res.micro_batch = rows
            res.grad_norm_micro = gmicro * micro_scale(loss_type, n_seqs, n_tokens, rows, ntok)
        if self.behaviour is not None and tokens > 0:
            res.ratio_mean, res.ratio_max = rs / tokens, rm
        if self.sampler is not None and tokens > 0:
            res.logp_diff_mean, res.logp_diff_max = ds / tokens, dm
            if self.tis_cap > 0:
                res.tis_weight_mean = ws / tokens
        return res


def _micro_loss(
    model, mb: MicroBatch, j: int, epoch: int, tally: _Tally, advantages, ref_logp, compute_dtype, loss_kw
) -> torch.Tensor:
    """Micro-batch ``j``'s forward and its share of the batch loss (epoch 0 also fills ``tally``)."""
    with _autocast_on(mb, compute_dtype):
        logp, ent = completion_logprobs(model, mb, with_entropy=epoch == 0)
    if epoch == 0:
        tally.first_epoch(j, mb, logp)
    loss, st = policy_loss(
        logp,
        tally.old[j],
        advantages[mb.rows_t],
        mb.mask,
        ref_logp=ref_logp[j] if ref_logp is not None else None,
        entropy=ent,
        token_weight=tally.weights[j],
        **loss_kw,
    )
    tally.add(epoch, st)
    return loss


def packed_update(
    model,
    optimizer: torch.optim.Optimizer,
    packed: PackedBatch,
    advantages: torch.Tensor,
    *,
    loss_type: str,
    max_len: int,
    clip_low: float,
    clip_high: float,
    beta: float = 0.0,
    ppo_epochs: int = 1,
    max_grad_norm: float = 1.0,
    ref_logp: list[torch.Tensor] | None = None,
    behaviour_logp: list[torch.Tensor] | None = None,
    sampler_logp: list[torch.Tensor] | None = None,
    tis_cap: float = 0.0,
    compute_dtype: torch.dtype | None = None,
    clock: PartClock | None = None,
) -> UpdateResult:
    """One optimizer step per PPO epoch over ``packed``'s micro-batches (gradients accumulated):
    per micro-batch one forward and one backward, per epoch one clip and one optimizer step, per
    update one host sync.

    The old policy's log-probs are epoch 0's own (detached): no optimizer step happens before
    epoch 0's last micro-batch, so a separate no-grad pass would recompute the same values. The
    noise sample's gradient norm (``grad_norm_micro``) is read from the accumulated gradients
    after its last micro-batch: no pass of its own. ``behaviour_logp`` (an off-policy batch: the
    sampler's log-probs per micro-batch) replaces the old log-probs: the surrogate's ratio is
    then ``pi_theta / pi_behaviour``, clipped as usual (the importance-ratio correction for the
    stale sampler); its mean and max are reported.

    ``sampler_logp`` (the engine's own log-probs of the sampled tokens, same layout) gives the
    sampler-vs-trainer mismatch ``|log pi_old - log pi_sampler|`` (mean, max); with ``tis_cap > 0``
    each token's surrogate is weighted by ``min(pi_old / pi_sampler, tis_cap)`` (truncated
    importance sampling). Under ``compute_dtype`` (bf16 on CUDA) the forward and backward run
    in autocast; the weights and their gradients stay in their own dtype (fp32). ``clock``
    times the parts (``forward``, ``backward``, ``optimizer``, ``sync``).
    """
    clock = clock if clock is not None else PartClock()
    tally = _Tally(packed, behaviour_logp, sampler_logp, tis_cap)
    params = [p for p in model.parameters() if p.requires_grad]
    loss_kw = dict(loss_type=loss_type, n_seqs=packed.n_seqs, n_tokens=packed.n_tokens, max_len=max_len)
    loss_kw.update(clip_low=clip_low, clip_high=clip_high, beta=beta)
    for epoch in range(ppo_epochs):
        optimizer.zero_grad(set_to_none=True)
        for j, mb in enumerate(packed.micro):
            with clock.part("forward"):
                loss = _micro_loss(model, mb, j, epoch, tally, advantages, ref_logp, compute_dtype, loss_kw)
            with clock.part("backward"):
                loss.backward()
            if epoch == 0 and j == packed.noise_micro - 1:
                tally.noise_sample(params, j)
        with clock.part("optimizer"):
            tally.norms.append(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
            optimizer.step()
    with clock.part("sync"):
        return tally.result(UpdateResult(n_micro=len(packed.micro), positions=packed.positions), loss_type)
