"""The loop's speed-ups keep its maths: with several PPO epochs the old-policy logprobs are taken
from the first epoch's own forward (packed, completion positions only) instead of a separate
no-grad pass over the padded batch, which must give the same values."""

from __future__ import annotations

import pytest
import torch

import rlvr_trainer.grpo as grpo_mod
import rlvr_trainer.train as train_mod
from rlvr_trainer.config import TrainConfig
from rlvr_trainer.train import Trainer


@pytest.mark.slow
def test_old_logprobs_equal_a_separate_pre_update_forward(tiny_model_dir, tmp_path, monkeypatch):
    cfg = TrainConfig(
        model=str(tiny_model_dir),
        rollout="hf",
        batch=8,
        group_size=4,
        base_batch=8,
        micro_batch=4,
        ppo_epochs=2,
        max_tokens=6,
        base_lr=1e-2,
        max_samples=8,
        track_kl=False,
        warmup_samples=0,
    )
    tr = Trainer(cfg, tmp_path)
    start = {k: v.clone() for k, v in tr.model.state_dict().items()}
    seen: dict[str, list] = {"packed": [], "rollouts": [], "old": []}
    pack, loss = train_mod.pack_rollouts, grpo_mod.policy_loss

    def spy_pack(prompts, comps, **kw):
        out = pack(prompts, comps, **kw)
        seen["packed"].append(out)
        seen["rollouts"].append((prompts, comps))
        return out

    def spy_loss(logp, old, *args, **kw):
        seen["old"].append(old.clone())
        return loss(logp, old, *args, **kw)

    monkeypatch.setattr(train_mod, "pack_rollouts", spy_pack)
    monkeypatch.setattr(grpo_mod, "policy_loss", spy_loss)
    # mixed rewards in every group, so the advantages (and the update) are non-zero
    monkeypatch.setattr(
        train_mod, "score", lambda texts, golds, *_: [float(i % 2) for i in range(len(texts))]
    )
    rec = tr.train_step(tr._engine())
    tr.close()

    packed = seen["packed"][0]
    n_micro = len(packed.micro)
    assert sum(len(mb.rows) for mb in packed.micro[: packed.noise_micro]) == 4 and rec.micro_batch == 4
    assert len(seen["old"]) == 2 * n_micro  # every micro-batch in both epochs
    assert any(not torch.equal(v, tr.model.state_dict()[k]) for k, v in start.items())  # the policy moved
    tr.model.load_state_dict(start)  # the pre-update policy, evaluated as the old padded pass did
    prompts, comps = seen["rollouts"][0]
    seqs = [p + c for p, c in zip(prompts, comps, strict=True)]
    width = max(map(len, seqs))
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    attn = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, : len(s)], attn[i, : len(s)] = torch.tensor(s), 1
    with torch.no_grad():
        ref = _padded_logprobs(tr.model, ids, attn)
    for epoch in range(2):
        for j, mb in enumerate(packed.micro):
            old = seen["old"][epoch * n_micro + j]
            for k, i in enumerate(mb.rows):
                p, c = len(prompts[i]), len(comps[i])
                torch.testing.assert_close(old[k, :c], ref[i, p - 1 : p - 1 + c], rtol=0, atol=1e-5)
                assert torch.all(old[k, c:] == 0)
    assert 0.0 <= rec.clip_frac <= 1.0


def _padded_logprobs(model, ids, attn):
    """Today's padded path: full-vocabulary log-softmax at every position of the whole batch."""
    return grpo_mod.token_logprobs(model(ids[:, :-1], attention_mask=attn[:, :-1]).logits, ids[:, 1:])[0]


@pytest.mark.slow
def test_an_update_takes_one_forward_and_backward_per_micro_batch(tiny_model_dir, tmp_path, monkeypatch):
    """The trainer's update adds no pass of its own: the policy runs one forward and one backward
    per micro-batch and epoch, the reference (KL tracked) one forward per micro-batch; the
    record's timed parts lie inside its span."""
    cfg = TrainConfig(
        model=str(tiny_model_dir),
        rollout="hf",
        batch=8,
        group_size=4,
        base_batch=8,
        micro_batch=2,
        ppo_epochs=2,
        max_tokens=6,
        max_samples=8,
        track_kl=True,
        warmup_samples=0,
    )
    monkeypatch.setattr(
        train_mod, "score", lambda texts, golds, *_: [float(i % 2) for i in range(len(texts))]
    )
    with Trainer(cfg, tmp_path) as tr:
        engine = tr._engine()  # generation runs the policy too: count inside the update only
        counts = {"policy": 0, "backward": 0, "reference": 0}
        update = tr._update

        def counted(*a, **kw):
            hooks = [
                tr.model.get_decoder().register_forward_hook(
                    lambda *_: counts.__setitem__("policy", counts["policy"] + 1)
                ),
                tr.model.get_input_embeddings().weight.register_hook(
                    lambda g: counts.__setitem__("backward", counts["backward"] + 1)
                ),
                tr.ref_model.get_decoder().register_forward_hook(
                    lambda *_: counts.__setitem__("reference", counts["reference"] + 1)
                ),
            ]
            try:
                return update(*a, **kw)
            finally:
                for h in hooks:
                    h.remove()

        monkeypatch.setattr(tr, "_update", counted)
        rec = tr.train_step(engine)
    n = rec.extra["micro_batches"]
    assert n >= 2 and rec.micro_batch == 2  # the noise sample and the rest
    assert counts == {"policy": 2 * n, "backward": 2 * n, "reference": n}
    t = {k.removeprefix("timing_s/"): v for k, v in rec.extra.items() if k.startswith("timing_s/")}
    parts = ("reward", "pack", "transfer", "reference", "forward", "backward", "optimizer", "sync")
    assert set(parts) <= set(t) and all(t[k] >= 0 for k in parts)
    assert sum(t[k] for k in parts) <= t["span"] + 1e-6
    assert rec.extra["backward_s"] == pytest.approx(sum(t[k] for k in parts[4:]))
