"""GRPO advantages and losses against hand-computed cases."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_trainer.grpo import aggregate, group_advantages, policy_loss, token_logprobs


def test_group_advantages_scaled_and_unscaled():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    # group 1: mean 0.25, unbiased std sqrt(0.25) = 0.5; group 2: all equal -> 0
    raw = group_advantages(r, 4, scale=False)
    assert torch.allclose(raw, torch.tensor([0.75, -0.25, -0.25, -0.25, 0, 0, 0, 0]))
    scaled = group_advantages(r, 4, scale=True, eps=1e-4)
    assert torch.allclose(scaled[:4], torch.tensor([0.75, -0.25, -0.25, -0.25]) / (0.5 + 1e-4))
    assert torch.equal(scaled[4:], torch.zeros(4))


def test_group_advantages_rejects_ragged_groups():
    with pytest.raises(ValueError, match="group_size=4"):
        group_advantages(torch.zeros(6), 4)


def _case():
    # two sequences; completion lengths 2 and 1 (mask), max_len 3
    logp = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    adv = torch.tensor([2.0, -1.0])
    return logp, mask, adv


@pytest.mark.parametrize(
    "loss_type,expected",
    [
        # on-policy (ratio 1): per-token loss is -A: seq 1 tokens -2, -2; seq 2 token +1
        ("grpo", ((-2 - 2) / 2 + 1) / 2),  # mean per sequence, then over sequences
        ("token_mean", (-2 - 2 + 1) / 3),  # over all 3 tokens
        ("dr_grpo", (-2 - 2 + 1) / (2 * 3)),  # over sequences x max_len
    ],
)
def test_policy_loss_aggregations(loss_type, expected):
    logp, mask, adv = _case()
    loss, stats = policy_loss(
        logp, logp.detach(), adv, mask, loss_type=loss_type, n_seqs=2, n_tokens=3, max_len=3
    )
    assert float(loss.detach()) == pytest.approx(expected)
    assert stats.tokens == 3 and stats.clipped == 0
    loss.backward()
    # d loss / d logp = -A / normaliser on real tokens, 0 on padding
    assert logp.grad[0, 2] == 0 and logp.grad[1, 1] == 0
    assert float(logp.grad[0, 0]) < 0 < float(logp.grad[1, 0])


def test_clip_uses_separate_low_and_high_ranges():
    mask = torch.ones(1, 2)
    old = torch.zeros(1, 2)
    # ratios 1.5 (above 1 + 0.28) and 0.5 (below 1 - 0.2)
    logp = torch.log(torch.tensor([[1.5, 0.5]])).requires_grad_()
    pos, st_pos = policy_loss(
        logp,
        old,
        torch.tensor([1.0]),
        mask,
        loss_type="token_mean",
        n_seqs=1,
        n_tokens=2,
        max_len=2,
        clip_low=0.2,
        clip_high=0.28,
    )
    # A > 0: min(1.5, 1.28) = 1.28 (clipped); min(0.5, 0.8) = 0.5 (not clipped)
    assert float(pos) == pytest.approx(-(1.28 + 0.5) / 2)
    assert st_pos.clipped == 1
    neg, st_neg = policy_loss(
        logp,
        old,
        torch.tensor([-1.0]),
        mask,
        loss_type="token_mean",
        n_seqs=1,
        n_tokens=2,
        max_len=2,
        clip_low=0.2,
        clip_high=0.28,
    )
    # A < 0: min(-1.5, -1.28) = -1.5 (not clipped); min(-0.5, -0.8) = -0.8 (clipped)
    assert float(neg) == pytest.approx((1.5 + 0.8) / 2)
    assert st_neg.clipped == 1
    neg.backward()
    assert logp.grad[0, 1] == 0 and logp.grad[0, 0] != 0  # the clipped token has no gradient


def test_kl_k3_penalty():
    logp = torch.tensor([[math.log(0.5)]])
    ref = torch.tensor([[math.log(0.25)]])
    d = math.log(0.25) - math.log(0.5)
    kl = math.exp(d) - d - 1
    loss, st = policy_loss(
        logp,
        logp,
        torch.tensor([0.0]),
        torch.ones(1, 1),
        loss_type="token_mean",
        n_seqs=1,
        n_tokens=1,
        max_len=1,
        ref_logp=ref,
        beta=0.1,
    )
    assert float(loss) == pytest.approx(0.1 * kl)
    assert st.kl == pytest.approx(kl)


def test_micro_batch_shares_sum_to_the_batch_loss():
    torch.manual_seed(0)
    per_token = torch.randn(6, 5)
    mask = (torch.rand(6, 5) > 0.3).float()
    mask[:, 0] = 1
    n_tokens = int(mask.sum())
    for lt in ("grpo", "token_mean", "dr_grpo"):
        full = aggregate(per_token, mask, lt, n_seqs=6, n_tokens=n_tokens, max_len=5)
        parts = sum(
            aggregate(per_token[a : a + 2], mask[a : a + 2], lt, n_seqs=6, n_tokens=n_tokens, max_len=5)
            for a in (0, 2, 4)
        )
        assert float(parts) == pytest.approx(float(full), rel=1e-6)


def test_token_logprobs_and_entropy():
    logits = torch.tensor([[[0.0, 0.0], [math.log(3.0), 0.0]]])
    lp, ent = token_logprobs(logits, torch.tensor([[1, 0]]), with_entropy=True)
    assert torch.allclose(lp, torch.tensor([[math.log(0.5), math.log(0.75)]]))
    assert float(ent[0, 0]) == pytest.approx(math.log(2))
    assert float(ent[0, 1]) == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
