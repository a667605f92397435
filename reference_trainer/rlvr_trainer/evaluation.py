"""Progress as practitioners measure it: accuracy on a fixed held-out prompt set.

The training reward is read on the prompts being trained on, sampled at temperature 1: it mixes
what the policy learned with the luck of each batch's prompts and samples. The progress clock
reads this instead: every ``eval_every`` rollouts the policy answers the same ``eval_size``
held-out prompts greedily (one completion each, temperature 0), and the share it gets right is
logged as ``eval_accuracy`` in that update's record, with ``eval_s`` (its wall time) and
``eval_size``. Like the training reward it is measured before the update, so it sits at the
rollouts the policy had been trained on.

The held-out prompts never reach training: the task is split by a hash of the prompt text
(:func:`rlvr_trainer.tasks.heldout`); the training task draws from the other side of the split.
The set is the same for every run and seed (its own seed, ``EVAL_SEED``), so curves compare.

Opt-in, for experiments that read a rate off the curve (``eval_spacing="log"``): evaluations at
0 and at ``eval_every x 2^(k/2)`` rollouts (log-spaced: as many points in the first doubling as in
the last), plus one at the budget's end (``eval_final_*`` in the last record); ``eval_distinct``
keeps each held-out prompt once (i.i.d. draws repeat the few one-digit prompts: 64 draws hold 32
distinct prompts, so one prompt flipping moved accuracy by 0.11). The ``content`` task always
reads distinct prompts; the ``short-answer`` task reads its exact expected reward instead
(:class:`ExactEval`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from rlvr_trainer.config import TrainConfig
from rlvr_trainer.tasks import (
    CONTENT,
    SHORT_ANSWER,
    ArithmeticTask,
    FileTask,
    Problem,
    ShortAnswerTask,
    Task,
    distinct_problems,
    load_problems,
    reward_for,
    score,
)

__all__ = [
    "EVAL_SEED",
    "HeldOutEval",
    "ExactEval",
    "heldout_problems",
    "training_task",
    "log_points",
    "make_evaluator",
]

#: The held-out set's seed: one set for every run, whatever its training seed.
EVAL_SEED = 1_000_000


def training_task(cfg: TrainConfig) -> Task:
    """The task a run trains on: without the held-out prompts when it evaluates on them."""
    split = "train" if cfg.eval_every else "all"
    if cfg.task in ("arithmetic", CONTENT):
        return ArithmeticTask(seed=cfg.seed, max_level=cfg.task_max_level, split=split)
    if cfg.task == SHORT_ANSWER:
        return ShortAnswerTask(seed=cfg.seed, max_level=cfg.task_max_level, split=split)
    return FileTask(load_problems(cfg.task), seed=cfg.seed, split=split)


def heldout_problems(cfg: TrainConfig) -> list[Problem]:
    """The ``cfg.eval_size`` held-out problems, drawn from the task's own mix (arithmetic: i.i.d.
    draws, so a prompt can repeat; a file: the first ``eval_size`` of its held-out part, in a
    fixed shuffled order). Distinct prompts (each once, drawn from the mix until ``eval_size``
    or the held-out set runs out) with ``cfg.eval_distinct`` and on the content and short-answer
    tasks."""
    if cfg.task == SHORT_ANSWER:
        return list(distinct_problems(cfg.task_max_level, "heldout"))[: cfg.eval_size]
    if cfg.task in ("arithmetic", CONTENT):
        task: Task = ArithmeticTask(seed=EVAL_SEED, max_level=cfg.task_max_level, split="heldout")
        if not (cfg.eval_distinct or cfg.task == CONTENT):
            return [task.problem(i) for i in range(cfg.eval_size)]
        n = min(cfg.eval_size, len(distinct_problems(cfg.task_max_level, "heldout")))
        seen: dict[str, Problem] = {}
        i = 0
        while len(seen) < n:
            p = task.problem(i)
            seen.setdefault(p.prompt, p)
            i += 1
        return list(seen.values())
    ft = FileTask(load_problems(cfg.task), seed=EVAL_SEED, split="heldout")
    return [ft.problem(i) for i in range(min(cfg.eval_size, len(ft.problems)))]


def log_points(first: int, budget: int) -> list[int]:
    """0, then ``round(first x 2^(k/2))`` for k = 0, 1, ... up to ``budget``, then ``budget``:
    the rollout counts a log-spaced evaluation reads (every factor sqrt 2)."""
    if first < 1 or budget < 1:
        raise ValueError(f"first and budget must be >= 1 rollout, got {first}, {budget}")
    pts, k = [0], 0
    while (p := round(first * 2 ** (k / 2))) < budget:
        if p > pts[-1]:
            pts.append(p)
        k += 1
    return [*pts, budget]


class HeldOutEval:
    """Greedy accuracy of the policy on ``problems``, every ``every`` rollouts.

    ``due(samples, batch)``: an evaluation comes before the first update and before each update
    whose rollouts cross a multiple of ``every`` (with ``points``: one of those rollout counts) --
    a rule of the sample count alone, so a resumed run evaluates where an uninterrupted one would,
    at any batch schedule. ``final``: also evaluate after the update that reaches the budget.
    """

    def __init__(
        self,
        problems: Sequence[Problem],
        every: int,
        *,
        points: Sequence[int] | None = None,
        final: bool = False,
        reward: Any = None,
    ) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1 rollout, got {every}")
        if not problems:
            raise ValueError("the held-out set is empty")
        self.problems, self.every = list(problems), int(every)
        self.points = sorted(set(points)) if points is not None else None
        self.final, self.reward = final, reward

    def due(self, samples: int, batch: int) -> bool:
        if samples == 0:
            return True
        if self.points is not None:
            return any(samples < p <= samples + batch for p in self.points)
        return samples // self.every != (samples + batch) // self.every

    def __call__(self, engine: Any, *, step: int) -> dict[str, float]:
        """Answer every held-out prompt once at temperature 0 with ``engine`` (any rollout engine:
        vLLM or HF); returns the record fields."""
        t0 = time.perf_counter()
        groups = engine.generate([p.prompt for p in self.problems], 1, step=step, temperature=0.0)
        right = score([g[0].text for g in groups], [p.answer for p in self.problems], self.reward)
        return {
            "eval_accuracy": sum(right) / len(right),
            "eval_s": time.perf_counter() - t0,
            "eval_size": float(len(right)),
        }

    @classmethod
    def from_config(cls, cfg: TrainConfig) -> HeldOutEval | None:
        """None when ``cfg.eval_every`` is 0 (no evaluation)."""
        if not cfg.eval_every:
            return None
        log = cfg.eval_spacing == "log"
        return cls(
            heldout_problems(cfg),
            cfg.eval_every,
            points=log_points(cfg.eval_every, cfg.max_samples)[:-1] if log else None,  # the end: final
            final=log,
            reward=reward_for(cfg.task),
        )


class ExactEval(HeldOutEval):
    """The short-answer task's progress: the policy's exact expected reward, not a sample of it.

    Its reward is 1 for one completion only (the answer's tokens, then end of sequence), so the
    expected reward of a prompt is that sequence's probability under the sampling temperature,
    read off one teacher-forced forward pass: over all distinct prompts of the task
    (``eval_accuracy``, what training optimises) and over the distinct held-out ones
    (``eval_heldout``). No sampling noise: a run's curve moves only when the policy does.
    """

    def __init__(self, cfg: TrainConfig, model: Any, tokenizer: Any, **kw: Any) -> None:
        everything = distinct_problems(cfg.task_max_level, "all")
        super().__init__(everything, cfg.eval_every, **kw)
        self.model, self.tokenizer = model, tokenizer
        self.temperature = cfg.temperature or 1.0
        held = set(p.prompt for p in distinct_problems(cfg.task_max_level, "heldout"))
        self.is_heldout = [p.prompt in held for p in everything]

    def probabilities(self) -> list[float]:
        """Each prompt's probability of its answer then EOS, at the sampling temperature."""
        import torch

        tok, model = self.tokenizer, self.model
        pad = tok.pad_token_id
        seqs, starts = [], []
        for p in self.problems:
            pi = tok(p.prompt, add_special_tokens=False)["input_ids"]
            ai = tok(p.answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            seqs.append(pi + ai)
            starts.append(len(pi))
        width = max(map(len, seqs))
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        attn = torch.zeros_like(ids)
        mask = torch.zeros((len(seqs), width - 1))
        for i, (s, n) in enumerate(zip(seqs, starts, strict=True)):
            ids[i, : len(s)] = torch.tensor(s)
            attn[i, : len(s)] = 1
            mask[i, n - 1 : len(s) - 1] = 1.0
        dev = next(model.parameters()).device
        out = []
        with torch.no_grad():
            for lo in range(0, len(seqs), 256):
                x, a = ids[lo : lo + 256].to(dev), attn[lo : lo + 256].to(dev)
                logits = model(input_ids=x, attention_mask=a).logits[:, :-1].float() / self.temperature
                lp = torch.log_softmax(logits, dim=-1).gather(-1, x[:, 1:].unsqueeze(-1)).squeeze(-1)
                m = mask[lo : lo + 256].to(dev)
                out.extend(torch.exp((lp * m).sum(dim=1)).cpu().tolist())
        return out

    def __call__(self, engine: Any, *, step: int) -> dict[str, float]:
        t0 = time.perf_counter()
        prob = self.probabilities()
        held = [q for q, h in zip(prob, self.is_heldout, strict=True) if h]
        return {
            "eval_accuracy": sum(prob) / len(prob),
            "eval_heldout": sum(held) / max(len(held), 1),
            "eval_s": time.perf_counter() - t0,
            "eval_size": float(len(prob)),
        }


def make_evaluator(cfg: TrainConfig, model: Any = None, tokenizer: Any = None) -> HeldOutEval | None:
    """The run's evaluation: :class:`ExactEval` on the short-answer task (needs the trained
    ``model`` and its ``tokenizer``), else :meth:`HeldOutEval.from_config`."""
    if cfg.task != SHORT_ANSWER or not cfg.eval_every:
        return HeldOutEval.from_config(cfg)
    log = cfg.eval_spacing == "log"
    return ExactEval(
        cfg,
        model,
        tokenizer,
        points=log_points(cfg.eval_every, cfg.max_samples)[:-1] if log else None,  # the end: final
        final=log,
    )
