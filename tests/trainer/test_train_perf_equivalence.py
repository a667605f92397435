"""The loop's speed-ups keep its maths: with several PPO epochs the old-policy logprobs are taken
from the first epoch's own forward instead of a separate no-grad pass, which must give the same values."""

from __future__ import annotations

import pytest
import rlvr_trainer.train as train_mod
import torch
from rlvr_trainer.config import TrainConfig
from rlvr_trainer.train import Trainer


@pytest.mark.slow
def test_old_logprobs_equal_a_separate_pre_update_forward(tiny_model_dir, tmp_path, monkeypatch):
    cfg = TrainConfig(model=str(tiny_model_dir), rollout="hf", batch=8, group_size=4, base_batch=8, micro_batch=4,
                      ppo_epochs=2, max_tokens=6, base_lr=1e-2, max_samples=8, track_kl=False, warmup_samples=0)
    tr = Trainer(cfg, tmp_path)
    start = {k: v.clone() for k, v in tr.model.state_dict().items()}
    seen: dict[str, list] = {"tensors": [], "old": []}
    make_tensors, loss = tr._tensors, train_mod.policy_loss

    def spy_tensors(rollouts):
        out = make_tensors(rollouts)
        seen["tensors"].append(out)
        return out

    def spy_loss(logp, old, *args, **kw):
        seen["old"].append(old.clone())
        return loss(logp, old, *args, **kw)

    monkeypatch.setattr(tr, "_tensors", spy_tensors)
    monkeypatch.setattr(train_mod, "policy_loss", spy_loss)
    # mixed rewards in every group, so the advantages (and the update) are non-zero
    monkeypatch.setattr(train_mod, "score", lambda texts, golds: [float(i % 2) for i in range(len(texts))])
    rec = tr.train_step(tr._engine())
    tr.close()

    ids, attn, targets, _ = seen["tensors"][0]
    assert len(seen["old"]) == 4  # 2 micro-batches x 2 epochs
    assert any(not torch.equal(v, tr.model.state_dict()[k]) for k, v in start.items())  # the policy moved
    tr.model.load_state_dict(start)  # the pre-update policy, evaluated as the old separate pass did
    with torch.no_grad():
        ref = [train_mod.token_logprobs(tr.model(ids[a:b], attention_mask=attn[a:b]).logits, targets[a:b])[0]
               for a, b in ((0, 4), (4, 8))]
    for epoch in range(2):
        for j in range(2):
            torch.testing.assert_close(seen["old"][2 * epoch + j], ref[j], rtol=0, atol=1e-5)
    assert 0.0 <= rec.clip_frac <= 1.0
