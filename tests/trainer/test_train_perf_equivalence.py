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
    monkeypatch.setattr(train_mod, "score", lambda texts, golds: [float(i % 2) for i in range(len(texts))])
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
