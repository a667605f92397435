"""The noise-scale experiment's opt-in tasks and evaluation: short-answer (finite prompt set,
bare answers, exact expected reward), content (the answer's value, boxed or bare), log-spaced
evaluation on distinct prompts, clipping off with the share a clip would have acted on."""

from __future__ import annotations

import json
import math

import pytest

from rlvr_schedule.errors import ConfigError
from rlvr_trainer.config import TrainConfig
from rlvr_trainer.evaluation import ExactEval, HeldOutEval, heldout_problems, log_points, training_task
from rlvr_trainer.tasks import (
    ShortAnswerTask,
    bare_reward,
    content_reward,
    distinct_problems,
    heldout,
    math_reward,
    reward_for,
)


def test_distinct_problems_enumerate_each_level_once_and_split_cleanly():
    assert len(distinct_problems(0)) == 100
    every = distinct_problems(1)
    assert len(every) == 1000 == len({p.prompt for p in every})
    assert {int(p.answer) for p in every} == set(range(109))  # answers of 1-3 characters
    assert all(str(eval(p.prompt[:-1])) == p.answer for p in every)  # noqa: S307 (our own sums)
    train, held = distinct_problems(1, "train"), distinct_problems(1, "heldout")
    assert len(train) + len(held) == 1000 and all(heldout(p.prompt) for p in held)
    assert not {p.prompt for p in train} & {p.prompt for p in held}
    with pytest.raises(ValueError, match="max_level"):
        distinct_problems(7)


def test_short_answer_task_is_deterministic_and_keeps_to_its_split():
    t = ShortAnswerTask(seed=3, max_level=1, split="train")
    draws = [t.problem(i) for i in range(400)]
    assert draws == [ShortAnswerTask(seed=3, max_level=1, split="train").problem(i) for i in range(400)]
    assert not any(heldout(p.prompt) for p in draws)
    assert len({p.prompt for p in draws}) > 250  # uniform over ~900 prompts, not a few repeated
    cfg = TrainConfig(task="short-answer", eval_every=64)
    assert isinstance(training_task(cfg), ShortAnswerTask) and training_task(cfg).split == "train"


def test_rewards_per_task():
    assert reward_for("short-answer") is bare_reward and reward_for("arithmetic") is math_reward
    assert bare_reward("17", "17") == 1.0
    for wrong in ("17 ", "\\boxed{17}", "170", "1"):
        assert bare_reward(wrong, "17") == 0.0
    # content: the value, boxed or bare; the arithmetic task's reward wants the box
    assert content_reward("17", "17") == content_reward("\\boxed{17}", "17") == 1.0
    assert content_reward(" 017", "17") == 1.0 and math_reward("17", "17") == 0.0
    for wrong in ("18", "\\boxed{18}", "\\boxed{17}\\boxed{17}", "\\boxed{17", "", "1-7"):
        assert content_reward(wrong, "17") == 0.0, wrong


def test_log_points_and_the_due_rule():
    pts = log_points(64, 14336)
    assert pts[:6] == [0, 64, 91, 128, 181, 256] and pts[-1] == 14336
    assert all(b / a <= math.sqrt(2) + 0.02 for a, b in zip(pts[1:-2], pts[2:-1], strict=True))
    ev = HeldOutEval(distinct_problems(0)[:4], 64, points=pts)
    # before the update whose rollouts cross a point; a function of the sample count alone
    hits = [s for s in range(0, 14336, 48) if ev.due(s, 48)]
    assert hits[:5] == [0, 48, 96, 144, 240]
    assert not ev.due(288, 48) and ev.due(336, 48)  # 256 < 288..336 < 362 <= 384
    lin = HeldOutEval(distinct_problems(0)[:4], 64)
    assert [s for s in range(0, 512, 48) if lin.due(s, 48)] == [0, 48, 96, 144, 240, 288, 336, 432, 480]


def test_config_fields_validate_by_name():
    assert TrainConfig(max_grad_norm=1e9, warmup_samples=64, eval_spacing="log").eval_spacing == "log"
    for field, bad in (
        ("eval_spacing", "cubic"),
        ("max_grad_norm", 0.0),
        ("clip_reference", -1.0),
        ("task_max_level", 9),
        ("eval_distinct", "yes"),
    ):
        with pytest.raises(ConfigError) as exc:
            TrainConfig(**{field: bad})
        assert exc.value.field == field
    # the defaults are what they were: linear spacing, repeated draws, clip at 1.0
    d = TrainConfig()
    assert (d.task, d.eval_spacing, d.eval_distinct, d.max_grad_norm, d.warmup_samples) == (
        "arithmetic",
        "linear",
        False,
        1.0,
        512,
    )


def test_heldout_sets_distinct_where_asked():
    base = TrainConfig(eval_every=64, eval_size=64)
    old = [p.prompt for p in heldout_problems(base)]
    assert len(set(old)) < len(old)  # the default draws i.i.d. (unchanged)
    new = [p.prompt for p in heldout_problems(base.replace(eval_distinct=True))]
    assert len(new) == 64 == len(set(new)) and all(heldout(p) for p in new)
    content = heldout_problems(base.replace(task="content", task_max_level=2, eval_size=128))
    assert len(content) == 128 == len({p.prompt for p in content})
    assert {p.level for p in content} == {0, 1, 2}
    short = heldout_problems(base.replace(task="short-answer", eval_size=1000))
    assert len(short) == len(distinct_problems(1, "heldout"))


@pytest.fixture(scope="module")
def embedded(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return (
        AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval(),
        AutoTokenizer.from_pretrained(tiny_model_dir),
    )


def test_exact_expected_reward_matches_sampling(embedded):
    """The teacher-forced probability of "answer, then EOS" is what sampling at temperature 1
    gets right, scored by the task's own reward on the decoded text."""
    import torch

    model, tok = embedded
    cfg = TrainConfig(task="short-answer", eval_every=64, max_tokens=4)
    ev = ExactEval(cfg, model, tok)
    prob = ev.probabilities()
    assert len(prob) == 1000 and all(0.0 <= q <= 1.0 for q in prob)
    i = next(k for k, p in enumerate(ev.problems) if p.level == 1 and 0.3 < prob[k] < 0.7)
    p, n = ev.problems[i], 1500
    x = tok(p.prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    torch.manual_seed(0)
    with torch.no_grad():
        gen = model.generate(
            x.repeat(n, 1),
            attention_mask=torch.ones(n, x.shape[1], dtype=torch.long),
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=4,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
        )
    texts = tok.batch_decode(gen[:, x.shape[1] :], skip_special_tokens=True)
    hit = sum(bare_reward(t, p.answer) for t in texts) / n
    se = math.sqrt(prob[i] * (1 - prob[i]) / n)
    assert abs(hit - prob[i]) < 4 * se, (hit, prob[i])
    rec = ev(None, step=0)
    assert rec["eval_accuracy"] == pytest.approx(sum(prob) / 1000)
    assert 0 < rec["eval_heldout"] < 1 and rec["eval_size"] == 1000


@pytest.mark.slow
def test_short_answer_run_logs_exact_reward_at_log_points_and_clip_share(tiny_model_dir, tmp_path):
    from rlvr_trainer.train import Trainer

    cfg = TrainConfig(
        model=str(tiny_model_dir),
        task="short-answer",
        batch=32,
        base_batch=32,
        max_samples=160,
        max_tokens=4,
        rollout="hf",
        track_kl=False,
        warmup_samples=64,
        max_grad_norm=1e9,
        eval_every=64,
        eval_spacing="log",
    )
    with Trainer(cfg, tmp_path / "run") as trainer:
        trainer.train()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = [r["samples"] - r["batch"] for r in rows if "eval_accuracy" in r]  # measured before
    assert evals == [0, 32, 64, 96]  # points 0, 64, 91, 128: before the update crossing each
    assert rows[-1]["eval_final_samples"] == 160 and 0 < rows[-1]["eval_final_accuracy"] < 1
    assert all(r["clip_would_act"] == float(r["grad_norm"] > 1.0) for r in rows)
    assert rows[0]["lr_effective"] == pytest.approx(rows[0]["lr"] * 32 / 64)  # warm-up of 64 rollouts
