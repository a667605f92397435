"""Overlap mode (generation in a second process, one step off-policy): the importance-ratio
correction on a hand-checked case, and kill/resume exactness with the prefetched batch."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rlvr_schedule.policy import StaticSchedule
from rlvr_schedule.records import Stage
from rlvr_schedule.theory.scaling import lr_for_batch
from rlvr_trainer.config import TrainConfig
from rlvr_trainer.grpo import behaviour_logprobs, pack_rollouts, packed_update


def test_off_policy_ratio_is_corrected_and_clipped_by_hand(toy_lm):
    # rollout 0: prompt [0], completion [1, 2] (A = +1); rollout 1: prompt [2], completion [0] (A = -1)
    # hidden states (1, 0), (0, 1), (1, 1); logits (h0, h1, 0); logp -log z1, -log z1, 1 - log z2
    model = toy_lm()
    z1, z2 = math.e + 2, 2 * math.e + 1
    packed = pack_rollouts([[0], [2]], [[1, 2], [0]], pad_id=0, micro_batch=1, token_budget=100, seed=1)
    # the sampler gave rollout 0's tokens 1/1.1 of today's probability (ratio 1.1, inside the
    # clip range) and rollout 1's token twice it (ratio 0.5, below 1 - 0.2 with A < 0: clipped)
    beh = [[-math.log(z1) - math.log(1.1)] * 2, [1 - math.log(z2) + math.log(2.0)]]
    res = packed_update(
        model,
        torch.optim.SGD(model.parameters(), lr=0.0),
        packed,
        torch.tensor([1.0, -1.0]),
        loss_type="token_mean",
        max_len=2,
        clip_low=0.2,
        clip_high=0.2,
        max_grad_norm=math.inf,
        behaviour_logp=behaviour_logprobs(packed, beh),
    )
    assert res.ratio_mean == pytest.approx((1.1 + 1.1 + 0.5) / 3, rel=1e-5)
    assert res.ratio_max == pytest.approx(1.1, rel=1e-5)
    assert res.stats.clipped == 1 and res.stats.tokens == 3
    # dL/dW = sum over unclipped tokens of (-r A / 3) (onehot(t) - p) h^T; the clipped one adds 0
    expect = [[0.0, 0.0] for _ in range(3)]
    for h, t in [((1.0, 0.0), 1), ((0.0, 1.0), 2)]:
        logits = [h[0], h[1], 0.0]
        z = sum(math.exp(x) for x in logits)
        for v in range(3):
            g = (-1.1 / 3) * ((v == t) - math.exp(logits[v]) / z)
            for d in range(2):
                expect[v][d] += g * h[d]
    torch.testing.assert_close(model.head.weight.grad, torch.tensor(expect), rtol=1e-5, atol=1e-7)


def test_on_policy_behaviour_logprobs_change_nothing(toy_lm):
    def run(with_behaviour):
        model = toy_lm()
        packed = pack_rollouts(
            [[0], [2], [1]], [[1, 2], [0], [2, 2, 1]], pad_id=0, micro_batch=2, token_budget=4, seed=3
        )
        beh = None
        if with_behaviour:
            from rlvr_trainer.grpo import completion_logprobs

            lps: dict[int, list[float]] = {}
            with torch.no_grad():
                for mb in packed.micro:
                    lp, _ = completion_logprobs(model, mb)
                    for k, i in enumerate(mb.rows):
                        lps[i] = lp[k][mb.mask[k] > 0].tolist()
            beh = behaviour_logprobs(packed, [lps[i] for i in range(3)])
        res = packed_update(
            model,
            torch.optim.AdamW(model.parameters(), lr=0.1),
            packed,
            torch.tensor([1.0, -0.5, 0.25]),
            loss_type="grpo",
            max_len=3,
            clip_low=0.2,
            clip_high=0.28,
            ppo_epochs=2,
            behaviour_logp=beh,
        )
        return res, model.head.weight.detach().clone()

    (plain, w_plain), (corr, w_corr) = run(False), run(True)
    torch.testing.assert_close(w_corr, w_plain, rtol=0, atol=1e-7)
    assert corr.grad_norm == pytest.approx(plain.grad_norm, rel=1e-6)
    assert corr.ratio_mean == pytest.approx(1.0) and corr.ratio_max == pytest.approx(1.0)
    assert math.isnan(plain.ratio_mean)  # on the serial path nothing is reported


def test_behaviour_logprobs_must_match_the_completion_lengths():
    packed = pack_rollouts([[0], [2]], [[1, 2], [0]], pad_id=0, micro_batch=8, token_budget=100)
    with pytest.raises(ValueError, match="rollout 1: 2 behaviour log-probs for 1 tokens"):
        behaviour_logprobs(packed, [[-1.0, -1.0], [-1.0, -2.0]])


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _two_stage(cfg):
    lr16 = lr_for_batch(16, cfg.base_batch, cfg.base_lr)
    lr32 = lr_for_batch(32, cfg.base_batch, cfg.base_lr)
    return StaticSchedule([Stage(batch=16, lr=lr16, until_samples=64), Stage(batch=32, lr=lr32)])


@pytest.mark.slow
def test_overlap_resume_is_exact_and_the_switch_lags_one_update(tiny_model_dir, tmp_path):
    from rlvr_trainer.train import Trainer

    cfg = TrainConfig(
        model=str(tiny_model_dir),
        batch=16,
        base_batch=16,
        base_lr=3e-4,
        max_samples=144,
        micro_batch=8,
        seed=2,
        overlap=True,
    )
    with Trainer(cfg, tmp_path / "full", schedule=_two_stage(cfg)) as full:
        full.train()
    with Trainer(cfg, tmp_path / "part", schedule=_two_stage(cfg)) as part:
        part.train(max_steps=3)  # killed with the batch of update 4 sampled by update 3's weights
    with Trainer(cfg, tmp_path / "part", schedule=_two_stage(cfg)) as resumed:
        resumed.train(resume=True)

    d_full, d_part = (
        _rows(tmp_path / "full" / "decisions.jsonl"),
        _rows(tmp_path / "part" / "decisions.jsonl"),
    )
    assert d_part == d_full
    assert [d["batch"] for d in d_full] == [16, 16, 16, 32, 32, 32, 32]  # decided after update 4 ...
    m_full, m_part = _rows(tmp_path / "full" / "metrics.jsonl"), _rows(tmp_path / "part" / "metrics.jsonl")
    assert [m["batch"] for m in m_full] == [16, 16, 16, 16, 16, 32, 32]  # ... sampled for update 6
    assert [m["samples"] for m in m_part] == [m["samples"] for m in m_full] == [16, 32, 48, 64, 80, 112, 144]
    # one step off-policy after the first update; the first batch is on-policy (vLLM vs torch ~1e-6)
    assert [m["staleness"] for m in m_full] == [0, 1, 1, 1, 1, 1, 1]
    assert abs(m_full[0]["is_ratio_mean"] - 1) < 1e-4
    assert max(m["is_ratio_max"] for m in m_full[1:]) > 1.001  # real staleness, visible
    # the resumed run trains on the checkpoint's prefetched batch: the same numbers throughout
    for key in ("reward_mean", "entropy", "grad_norm", "response_length"):
        assert [m[key] for m in m_part] == pytest.approx([m[key] for m in m_full], rel=1e-5), key
    for key in ("is_ratio_mean", "is_ratio_max"):
        got = [m[key] for m in m_part]
        assert got == pytest.approx([m[key] for m in m_full], rel=1e-5), key
