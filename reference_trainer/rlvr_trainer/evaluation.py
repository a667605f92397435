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
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from rlvr_trainer.config import TrainConfig
from rlvr_trainer.tasks import ArithmeticTask, FileTask, Problem, Task, load_problems, score

__all__ = ["EVAL_SEED", "HeldOutEval", "heldout_problems", "training_task"]

#: The held-out set's seed: one set for every run, whatever its training seed.
EVAL_SEED = 1_000_000


def training_task(cfg: TrainConfig) -> Task:
    """The task a run trains on: without the held-out prompts when it evaluates on them."""
    split = "train" if cfg.eval_every else "all"
    if cfg.task == "arithmetic":
        return ArithmeticTask(seed=cfg.seed, max_level=cfg.task_max_level, split=split)
    return FileTask(load_problems(cfg.task), seed=cfg.seed, split=split)


def heldout_problems(cfg: TrainConfig) -> list[Problem]:
    """The ``cfg.eval_size`` held-out problems, drawn from the task's own mix (arithmetic: i.i.d.
    draws, so a prompt can repeat; a file: the first ``eval_size`` of its held-out part, in a
    fixed shuffled order)."""
    if cfg.task == "arithmetic":
        task: Task = ArithmeticTask(seed=EVAL_SEED, max_level=cfg.task_max_level, split="heldout")
        return [task.problem(i) for i in range(cfg.eval_size)]
    ft = FileTask(load_problems(cfg.task), seed=EVAL_SEED, split="heldout")
    return [ft.problem(i) for i in range(min(cfg.eval_size, len(ft.problems)))]


class HeldOutEval:
    """Greedy accuracy of the policy on ``problems``, every ``every`` rollouts.

    ``due(samples, batch)``: an evaluation comes before the first update and before each update
    whose rollouts cross a multiple of ``every`` -- a rule of the sample count alone, so a resumed
    run evaluates where an uninterrupted one would, at any batch schedule.
    """

    def __init__(self, problems: Sequence[Problem], every: int) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1 rollout, got {every}")
        if not problems:
            raise ValueError("the held-out set is empty")
        self.problems, self.every = list(problems), int(every)

    def due(self, samples: int, batch: int) -> bool:
        return samples == 0 or samples // self.every != (samples + batch) // self.every

    def __call__(self, engine: Any, *, step: int) -> dict[str, float]:
        """Answer every held-out prompt once at temperature 0 with ``engine`` (any rollout engine:
        vLLM or HF); returns the record fields."""
        t0 = time.perf_counter()
        groups = engine.generate([p.prompt for p in self.problems], 1, step=step, temperature=0.0)
        right = score([g[0].text for g in groups], [p.answer for p in self.problems])
        return {
            "eval_accuracy": sum(right) / len(right),
            "eval_s": time.perf_counter() - t0,
            "eval_size": float(len(right)),
        }

    @classmethod
    def from_config(cls, cfg: TrainConfig) -> HeldOutEval | None:
        """None when ``cfg.eval_every`` is 0 (no evaluation)."""
        return cls(heldout_problems(cfg), cfg.eval_every) if cfg.eval_every else None
