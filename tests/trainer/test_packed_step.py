"""The packed training step keeps the maths of the padded one: micro-batch plans, chunked
completion log-probs (values, gradients, entropy), and a hand-computed loss and gradient."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_trainer.grpo import (
    completion_logprobs,
    linear_logprobs,
    pack_rollouts,
    packed_update,
    plan_micro_batches,
    policy_loss,
    token_logprobs,
)


def _long_tail(n: int, seed: int = 0) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return [int(x) for x in (torch.empty(n).exponential_(generator=g) * 40 + 5).clamp(max=300)]


def test_plan_starts_with_a_fixed_size_random_sample():
    lengths = _long_tail(64)

    def sample(seed):
        plan, k = plan_micro_batches(lengths, micro_batch=8, token_budget=600, seed=seed)
        return plan, k, sorted(i for mb in plan[:k] for i in mb)

    plan, k, first = sample("0/3")
    assert k >= 1 and len(first) == 8
    assert sorted(i for mb in plan for i in mb) == list(range(64))  # every row exactly once
    assert sample("0/3")[0] == plan  # resumable: the same seed, the same plan
    firsts = [sample(f"0/{s}")[2] for s in range(20)]
    assert len({tuple(f) for f in firsts}) == 20
    # not the shortest rows: over 20 draws the sample's mean length is near the batch mean
    shortest = sorted(lengths)[:8]
    mean_first = sum(lengths[i] for f in firsts for i in f) / (8 * 20)
    assert mean_first > 2 * sum(shortest) / 8
    assert abs(mean_first - sum(lengths) / 64) < 0.35 * sum(lengths) / 64
    for part in (plan[:k], plan[k:]):  # the sample and the rest: each length-sorted, within the budget
        widths = [lengths[i] for mb in part for i in mb]
        assert widths == sorted(widths)
        for mb in part:
            assert len(mb) == 1 or len(mb) * max(lengths[i] for i in mb) <= 600


def test_plan_without_noise_sample_when_the_batch_fits_one_micro_batch():
    plan, noise = plan_micro_batches([5, 3, 9, 4], micro_batch=8, token_budget=1000)
    assert noise == 0 and plan == [[1, 3, 0, 2]]
    # budget 12: fixed cost 0.75 per micro-batch; [3, 4] would pad the 3 (8 + 0.75 > 3 + 4 + 1.5)
    plan, noise = plan_micro_batches([5, 3, 9, 4], micro_batch=8, token_budget=12)
    assert noise == 0 and plan == [[1], [3], [0], [2]]
    # one long row is not worth padding three short ones to: 3 x 10 + 100 + 2 x 62.5 < 4 x 100 + 62.5
    plan, _ = plan_micro_batches([10, 10, 10, 100], micro_batch=8, token_budget=1000)
    assert plan == [[0, 1, 2], [3]]


def test_linear_logprobs_gradients_and_entropy():
    torch.manual_seed(0)
    h = torch.randn(11, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(7, 5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(7, dtype=torch.float64, requires_grad=True)
    t = torch.randint(0, 7, (11,))
    # chunk 4: three chunks of logits, recomputed in the backward
    assert torch.autograd.gradcheck(lambda h, w, b: linear_logprobs(h, w, t, b, chunk=4)[0], (h, w, b))
    lp, ent = linear_logprobs(h, w, t, b, chunk=4, with_entropy=True)
    ref_lp, ref_ent = token_logprobs(torch.nn.functional.linear(h, w, b), t, with_entropy=True)
    torch.testing.assert_close(lp.float(), ref_lp, rtol=0, atol=1e-6)
    torch.testing.assert_close(ent.float(), ref_ent, rtol=0, atol=1e-6)
    assert not ent.requires_grad  # logged only


def test_hand_checked_loss_and_gradient(toy_lm):
    # rollout 0: prompt [0], completion [1, 2]; rollout 1: prompt [2], completion [0]
    # hidden at the completion positions: e(0) = (1, 0), e(1) = (0, 1), e(2) = (1, 1); logits = (h0, h1, 0)
    model = toy_lm()
    packed = pack_rollouts([[0], [2]], [[1, 2], [0]], pad_id=0, micro_batch=1, token_budget=100, seed=1)
    assert packed.noise_micro == 1 and len(packed.micro) == 2 and packed.n_tokens == 3
    adv = torch.tensor([1.0, -1.0])
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    res = packed_update(
        model,
        opt,
        packed,
        adv,
        loss_type="token_mean",
        max_len=2,
        clip_low=0.2,
        clip_high=0.2,
        max_grad_norm=math.inf,
    )
    z1, z2 = math.e + 2, 2 * math.e + 1
    # per-token logp: -log z1, -log z1, 1 - log z2; on-policy ratio 1: loss = -(1 + 1 - 1) / 3
    logps = {}
    for mb in packed.micro:
        with torch.no_grad():
            lp, _ = completion_logprobs(model, mb)
        for k, i in enumerate(mb.rows):
            logps[i] = lp[k][mb.mask[k] > 0].tolist()
    assert logps[0] == pytest.approx([-math.log(z1), -math.log(z1)])
    assert logps[1] == pytest.approx([1 - math.log(z2)])
    # dL/dW = sum_t (-A_t / 3) (onehot(t) - p_t) h_t^T
    tokens = [((1.0, 0.0), 1, 1.0), ((0.0, 1.0), 2, 1.0), ((1.0, 1.0), 0, -1.0)]
    expect = [[0.0, 0.0] for _ in range(3)]
    for h, t, a in tokens:
        logits = [h[0], h[1], 0.0]
        z = sum(math.exp(x) for x in logits)
        for v in range(3):
            g = (-a / 3) * ((v == t) - math.exp(logits[v]) / z)
            for d in range(2):
                expect[v][d] += g * h[d]
    torch.testing.assert_close(model.head.weight.grad, torch.tensor(expect), rtol=1e-6, atol=1e-7)
    # the loss itself, recomputed from the hand log-probs through policy_loss (on-policy)
    lp = torch.tensor([[-math.log(z1), -math.log(z1)], [1 - math.log(z2), 0.0]])
    loss, _ = policy_loss(
        lp,
        lp,
        adv,
        torch.tensor([[1.0, 1.0], [1.0, 0.0]]),
        loss_type="token_mean",
        n_seqs=2,
        n_tokens=3,
        max_len=2,
    )
    assert float(loss) == pytest.approx(-1 / 3)
    assert res.stats.tokens == 3 and res.micro_batch == 1 and res.grad_norm > 0


class _Passes:
    """Counts a model's decoder forwards, backwards (the embedding's gradient, computed once per
    backward through it) and optimizer steps."""

    def __init__(self, decoder, leaf, optimizer):
        self.forward = self.backward = self.steps = 0
        self._handles = [
            decoder.register_forward_hook(lambda *_: self._add("forward")),
            leaf.register_hook(lambda g: self._add("backward")),
            optimizer.register_step_post_hook(lambda *_: self._add("steps")),
        ]

    def _add(self, name):
        setattr(self, name, getattr(self, name) + 1)

    def remove(self):
        for h in self._handles:
            h.remove()


@pytest.mark.parametrize("epochs", [1, 2])
def test_one_forward_and_one_backward_per_micro_batch(toy_lm, epochs):
    """No pass of its own for the old log-probs (epoch 0's, detached) or grad_norm_micro (the
    accumulated gradients after the noise sample): per epoch one forward and one backward per
    micro-batch and one optimizer step."""
    from rlvr_trainer.timing import PartClock

    model = toy_lm()
    prompts = [[0], [2], [1, 0], [2, 2], [0, 1], [1]]
    comps = [[1, 2], [0], [2, 2, 1], [1], [0, 0], [2, 1, 0, 2]]
    packed = pack_rollouts(prompts, comps, pad_id=0, micro_batch=2, token_budget=6, seed=3)
    n = len(packed.micro)
    assert packed.noise_micro >= 1 and n > packed.noise_micro
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    passes, clock = _Passes(model.get_decoder(), model.emb.weight, opt), PartClock()
    res = packed_update(
        model,
        opt,
        packed,
        torch.linspace(-1.0, 1.0, 6),
        loss_type="grpo",
        max_len=4,
        clip_low=0.2,
        clip_high=0.2,
        ppo_epochs=epochs,
        clock=clock,
    )
    passes.remove()
    assert (passes.forward, passes.backward, passes.steps) == (epochs * n, epochs * n, epochs)
    assert res.micro_batch == 2 and math.isfinite(res.grad_norm_micro)
    assert [clock.count(k) for k in ("forward", "backward", "optimizer", "sync")] == [
        epochs * n,
        epochs * n,
        epochs,
        1,
    ]


def _tiny(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)


def _rollouts(vocab: int, n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    prompts, comps = [], []
    for _ in range(n):
        lp = int(torch.randint(3, 9, (1,), generator=g))
        lc = int(torch.randint(1, 30, (1,), generator=g))
        prompts.append(torch.randint(3, vocab, (lp,), generator=g).tolist())
        comps.append(torch.randint(3, vocab, (lc,), generator=g).tolist())
    return prompts, comps


def _padded(prompts, comps, pad=0):
    """Today's padded layout: the whole batch right-padded to its longest sequence."""
    seqs = [p + c for p, c in zip(prompts, comps, strict=True)]
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    attn = torch.zeros_like(ids)
    mask = torch.zeros((len(seqs), width - 1))
    for i, (s, p) in enumerate(zip(seqs, prompts, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        attn[i, : len(s)] = 1
        mask[i, len(p) - 1 : len(s) - 1] = 1
    return ids[:, :-1], attn[:, :-1], ids[:, 1:], mask


@pytest.mark.slow
def test_packed_logprobs_equal_the_padded_forward_on_the_tiny_model(tiny_model_dir):
    model = _tiny(tiny_model_dir).eval()
    prompts, comps = _rollouts(model.config.vocab_size, 24)
    ids, attn, targets, mask = _padded(prompts, comps)
    with torch.no_grad():
        ref, ref_ent = token_logprobs(model(ids, attention_mask=attn).logits, targets, with_entropy=True)
        packed = pack_rollouts(prompts, comps, pad_id=0, micro_batch=5, token_budget=90, seed=0)
        assert len(packed.micro) > 3 and packed.positions < ids.numel()
        for mb in packed.micro:
            lp, ent = completion_logprobs(model, mb, with_entropy=True, chunk=7)
            for k, i in enumerate(mb.rows):
                sel = mb.mask[k] > 0
                torch.testing.assert_close(lp[k][sel], ref[i][mask[i] > 0], rtol=0, atol=1e-5)
                torch.testing.assert_close(ent[k][sel], ref_ent[i][mask[i] > 0], rtol=0, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("loss_type", ["token_mean", "grpo", "dr_grpo"])
def test_packed_update_gradients_equal_the_padded_update(tiny_model_dir, loss_type):
    prompts, comps = _rollouts(31, 16, seed=1)
    adv = torch.linspace(-1.5, 1.5, 16)
    ids, attn, targets, mask = _padded(prompts, comps)
    n_tokens = int(mask.sum())

    ref_model = _tiny(tiny_model_dir)
    logp, _ = token_logprobs(ref_model(ids, attention_mask=attn).logits, targets)
    # off-policy old log-probs so that ratios differ from 1 and some tokens clip
    old = logp.detach() + 0.3 * torch.sin(torch.arange(logp.numel()).view_as(logp).float())
    loss, _ = policy_loss(logp, old, adv, mask, loss_type=loss_type, n_seqs=16, n_tokens=n_tokens, max_len=29)
    loss.backward()

    model = _tiny(tiny_model_dir)
    packed = pack_rollouts(prompts, comps, pad_id=0, micro_batch=4, token_budget=120, seed=5)
    assert len(packed.micro) > 2
    # same off-policy old log-probs, mapped into the packed layout
    import rlvr_trainer.grpo as grpo_mod

    calls = []
    real_loss = grpo_mod.policy_loss

    def with_old(lp, _old, a, m, **kw):
        mb = packed.micro[len(calls)]
        o = torch.zeros_like(lp)
        for k, i in enumerate(mb.rows):
            n = int(m[k].sum())
            o[k, :n] = old[i][mask[i] > 0]
        calls.append(1)
        return real_loss(lp, o, a, m, **kw)

    grpo_mod.policy_loss, saved = with_old, grpo_mod.policy_loss
    try:
        packed_update(
            model,
            torch.optim.SGD(model.parameters(), lr=0.0),
            packed,
            adv,
            loss_type=loss_type,
            max_len=29,
            clip_low=0.2,
            clip_high=0.2,
            max_grad_norm=math.inf,
        )
    finally:
        grpo_mod.policy_loss = saved
    for (name, p), q in zip(model.named_parameters(), ref_model.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("loss_type", ["token_mean", "grpo"])
def test_grad_norm_micro_is_the_noise_samples_own_gradient_norm(tiny_model_dir, loss_type):
    prompts, comps = _rollouts(31, 16, seed=2)
    adv = torch.linspace(-1.0, 1.0, 16)
    model = _tiny(tiny_model_dir)
    packed = pack_rollouts(prompts, comps, pad_id=0, micro_batch=6, token_budget=60, seed="0/1")
    assert packed.noise_micro >= 2  # the sample itself spans several micro-batches
    res = packed_update(
        model,
        torch.optim.SGD(model.parameters(), lr=0.0),
        packed,
        adv,
        loss_type=loss_type,
        max_len=29,
        clip_low=0.2,
        clip_high=0.2,
        max_grad_norm=math.inf,
    )
    rows = sorted(i for mb in packed.micro[: packed.noise_micro] for i in mb.rows)
    assert res.micro_batch == 6 == len(rows)
    # the same rows as a batch of their own: its gradient norm is what grad_norm_micro estimates
    alone = pack_rollouts(
        [prompts[i] for i in rows], [comps[i] for i in rows], pad_id=0, micro_batch=6, token_budget=10_000
    )
    model2 = _tiny(tiny_model_dir)
    res2 = packed_update(
        model2,
        torch.optim.SGD(model2.parameters(), lr=0.0),
        alone,
        adv[rows],
        loss_type=loss_type,
        max_len=29,
        clip_low=0.2,
        clip_high=0.2,
        max_grad_norm=math.inf,
    )
    assert res.grad_norm_micro == pytest.approx(res2.grad_norm, rel=1e-4)
    assert res.grad_norm != pytest.approx(res.grad_norm_micro, rel=1e-2)
