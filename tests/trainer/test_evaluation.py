"""Held-out evaluation: a disjoint prompt set, the due rule, greedy scoring, the loop's records,
and the optimizer choice."""

from __future__ import annotations

import json

import pytest

from rlvr_schedule.errors import ConfigError
from rlvr_trainer.config import TrainConfig, make_optimizer, preset
from rlvr_trainer.evaluation import HeldOutEval, heldout_problems, training_task
from rlvr_trainer.rollout import Rollout
from rlvr_trainer.tasks import ArithmeticTask, FileTask, Problem, heldout


def test_training_and_heldout_prompts_are_disjoint_and_keep_the_level_mix():
    cfg = TrainConfig(eval_every=512, eval_size=64)
    train = training_task(cfg)
    seen = {train.problem(i).prompt for i in range(4000)}
    held = heldout_problems(cfg)
    assert len(held) == 64
    assert all(heldout(p.prompt) for p in held)
    assert not seen & {p.prompt for p in held}
    assert not any(heldout(p) for p in seen)
    # both levels of the default mix (one-digit sums, two-digit + one-digit) are in the held-out set
    assert {p.level for p in held} == {0, 1}
    # the same set for every run seed; without evaluation the task is unsplit (all prompts)
    assert heldout_problems(cfg.replace(seed=5)) == held
    unsplit = training_task(cfg.replace(eval_every=0))
    assert any(heldout(unsplit.problem(i).prompt) for i in range(200))


def test_file_task_split(tmp_path):
    probs = [Problem(prompt=f"q{i}", answer=str(i)) for i in range(200)]
    tr, he = FileTask(probs, split="train"), FileTask(probs, split="heldout")
    assert len(tr.problems) + len(he.problems) == 200 and he.problems
    assert not {p.prompt for p in tr.problems} & {p.prompt for p in he.problems}
    with pytest.raises(ValueError, match="split"):
        ArithmeticTask(split="test")


def test_due_rule_depends_on_the_sample_count_alone():
    ev = HeldOutEval([Problem("1+1=", "2")], every=64)
    # a constant batch of 16: before the first update, then before every 4th
    steps = [s for s in range(0, 320, 16) if ev.due(s, 16)]
    assert steps == [0, 48, 112, 176, 240, 304]
    # batch larger than the interval: every update
    assert all(ev.due(s, 128) for s in range(0, 1024, 128))
    # a changing batch still evaluates once per crossed multiple
    assert ev.due(56, 16) and not ev.due(72, 16)


class _Engine:
    """Answers ``\\boxed{<answer>}`` for the first ``right`` prompts, nonsense after."""

    def __init__(self, right: int) -> None:
        self.right, self.calls = right, []

    def generate(self, prompts, n, *, step, temperature=None, logprobs=False):
        self.calls.append((len(prompts), n, temperature))
        out = []
        for i, p in enumerate(prompts):
            a, b = p.rstrip("=").split("+")
            text = f"\\boxed{{{int(a) + int(b)}}}" if i < self.right else "\\boxed{x}"
            out.append([Rollout([1], [2], text, True, None)])
        return out


def test_eval_is_greedy_and_scores_the_share_right():
    probs = [Problem(f"{i}+1=", str(i + 1)) for i in range(8)]
    eng = _Engine(right=3)
    rec = HeldOutEval(probs, every=10)(eng, step=0)
    assert eng.calls == [(8, 1, 0.0)]  # one answer per prompt, temperature 0
    assert rec["eval_accuracy"] == pytest.approx(3 / 8)
    assert rec["eval_size"] == 8 and rec["eval_s"] >= 0


def test_config_options_and_optimizer():
    import torch

    assert preset("tiny").eval_every > 0
    for kw, name in (
        ({"optimizer": "rmsprop"}, "optimizer"),
        ({"eval_every": -1}, "eval_every"),
        ({"eval_size": 0}, "eval_size"),
        ({"adam_eps": 0.0}, "adam_eps"),
        ({"momentum": 1.0}, "momentum"),
    ):
        with pytest.raises(ConfigError) as e:
            TrainConfig(**kw)
        assert e.value.field == name
    p = [torch.nn.Parameter(torch.zeros(2))]
    sgd = make_optimizer(TrainConfig(optimizer="sgd", momentum=0.5), p, 0.1)
    assert isinstance(sgd, torch.optim.SGD) and sgd.param_groups[0]["momentum"] == 0.5
    adam = make_optimizer(TrainConfig(adam_eps=1e-3), p, 0.1)
    assert isinstance(adam, torch.optim.AdamW) and adam.param_groups[0]["eps"] == 1e-3


@pytest.mark.slow
def test_loop_logs_eval_accuracy_and_the_clock_reads_it(tiny_model_dir, tmp_path):
    from rlvr_schedule.clocks import ProgressClock
    from rlvr_trainer.experiments.rundirs import read_run
    from rlvr_trainer.train import Trainer

    cfg = TrainConfig(
        model=str(tiny_model_dir),
        rollout="hf",
        batch=16,
        base_batch=16,
        max_samples=96,
        eval_every=32,
        eval_size=8,
        optimizer="sgd",
        base_lr=1e-3,
    )
    with Trainer(cfg, tmp_path / "r") as t:
        t.train()
    rows = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    at = [r["samples"] - r["batch"] for r in rows if "eval_accuracy" in r]
    assert at == [0, 16, 48, 80]  # before the first update and each crossing of a multiple of 32
    assert all(0 <= r["eval_accuracy"] <= 1 and r["eval_size"] == 8 for r in rows if "eval_accuracy" in r)
    clock = ProgressClock(metric="eval_accuracy").fit(read_run(tmp_path / "r"), None)
    assert clock.curve_[0].tolist() == at


@pytest.mark.slow
def test_a_resumed_run_evaluates_where_an_uninterrupted_one_does(tiny_model_dir, tmp_path):
    from rlvr_trainer.train import Trainer

    cfg = TrainConfig(
        model=str(tiny_model_dir),
        rollout="hf",
        batch=16,
        base_batch=16,
        max_samples=96,
        eval_every=32,
        eval_size=8,
    )

    def evals(d):
        rows = [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines()]
        return [(r["step"], r["eval_accuracy"]) for r in rows if "eval_accuracy" in r]

    with Trainer(cfg, tmp_path / "full") as t:
        t.train()
    with Trainer(cfg, tmp_path / "cut") as t:
        t.train(max_steps=2)  # checkpoint after update 2, the next eval before update 3
    with Trainer(cfg, tmp_path / "cut") as t:
        t.train(resume=True)
    assert evals(tmp_path / "cut") == evals(tmp_path / "full")
    assert [s for s, _ in evals(tmp_path / "full")] == [1, 2, 4, 6]
