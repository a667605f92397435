"""Prompts and verifiable rewards.

Two sources: a procedurally generated arithmetic task (offline, an easy-to-hard mix, problem ``i``
is a pure function of ``(seed, i)`` so a resumed run sees the same prompts), and GSM8K/MATH-style
records from local JSONL or parquet files. Both are scored by math-verify on the completion's
``\\boxed{}`` answer: reward 1 when it matches the gold answer, else 0.
"""

from __future__ import annotations

import json
import random
import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from rlvr_schedule.errors import IngestError

__all__ = [
    "Problem",
    "Task",
    "ArithmeticTask",
    "FileTask",
    "load_problems",
    "math_reward",
    "exact_reward",
    "verify_reward",
    "score",
    "SPLITS",
    "heldout",
    "TASK_NAMES",
    "SHORT_ANSWER",
    "CONTENT",
    "ShortAnswerTask",
    "distinct_problems",
    "bare_reward",
    "content_reward",
    "reward_for",
]

#: ``"all"``: every prompt; ``"train"``: prompts outside the held-out set; ``"heldout"``: inside it.
SPLITS = ("all", "train", "heldout")
#: One prompt in ``HELDOUT_MOD`` (by a hash of its text) is held out of training for evaluation.
HELDOUT_MOD = 10


def heldout(prompt: str) -> bool:
    """Whether ``prompt`` belongs to the held-out set: a hash of its text, so the training and
    held-out prompts are disjoint by construction, whatever the seeds and indices (the arithmetic
    task has only ~1,000 distinct prompts at its default levels, so a separate seed alone would
    repeat training prompts)."""
    return zlib.crc32(prompt.encode()) % HELDOUT_MOD == 0


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")


MATH_PROMPT = "{question}\nPlease reason step by step, and put your final answer within \\boxed{{}}."


@dataclass(frozen=True)
class Problem:
    prompt: str
    answer: str  # gold answer, as math-verify should parse it
    solution: str = ""  # a reference completion (used by the warm start)
    level: int = 0


class Task(Protocol):
    """Problem ``i`` of a task; deterministic so that resumed runs see the same prompts."""

    def problem(self, index: int) -> Problem: ...


#: (weight, description, generator) for each difficulty level of the arithmetic task.
_LEVELS = (
    (0.30, "1-digit + 1-digit", lambda r: (r.randint(0, 9), "+", r.randint(0, 9))),
    (0.25, "2-digit + 1-digit", lambda r: (r.randint(10, 99), "+", r.randint(0, 9))),
    (0.20, "2-digit + 2-digit", lambda r: (r.randint(10, 99), "+", r.randint(10, 99))),
    (0.15, "2-digit - 2-digit", lambda r: (r.randint(10, 99), "-", r.randint(10, 99))),
    (0.10, "1-digit * 2-digit", lambda r: (r.randint(2, 9), "*", r.randint(10, 99))),
)


def arithmetic_problem(rng: random.Random, *, max_level: int | None = None) -> Problem:
    """One ``a op b=`` problem, level drawn from the easy-to-hard mix."""
    levels = _LEVELS if max_level is None else _LEVELS[: max_level + 1]
    level = rng.choices(range(len(levels)), weights=[w for w, _, _ in levels])[0]
    a, op, b = levels[level][2](rng)
    value = a + b if op == "+" else a - b if op == "-" else a * b
    return Problem(prompt=f"{a}{op}{b}=", answer=str(value), solution=f"\\boxed{{{value}}}", level=level)


@dataclass(frozen=True)
class ArithmeticTask:
    """Generated arithmetic; ``max_level`` restricts the mix (0 = one-digit sums only).

    ``split``: ``"train"`` redraws (from the same seeded stream) any prompt of the held-out set,
    ``"heldout"`` keeps only those (:func:`heldout`); the level mix stays the task's."""

    seed: int = 0
    max_level: int | None = None
    split: str = "all"

    def __post_init__(self) -> None:
        _check_split(self.split)

    def problem(self, index: int) -> Problem:
        rng = random.Random(self.seed * 1_000_003 + index)
        while True:
            p = arithmetic_problem(rng, max_level=self.max_level)
            if self.split == "all" or heldout(p.prompt) == (self.split == "heldout"):
                return p


@dataclass
class FileTask:
    """Problems from a local file, cycled in a seed-fixed shuffled order."""

    problems: Sequence[Problem]
    seed: int = 0
    split: str = "all"  # as ArithmeticTask's: a hash of the prompt text splits the file

    def __post_init__(self) -> None:
        _check_split(self.split)
        if self.split != "all":
            self.problems = [p for p in self.problems if heldout(p.prompt) == (self.split == "heldout")]
            if not self.problems:
                raise ValueError(f"no problem of the file falls in the {self.split!r} split")
        self._order = list(range(len(self.problems)))
        random.Random(self.seed).shuffle(self._order)

    def problem(self, index: int) -> Problem:
        return self.problems[self._order[index % len(self._order)]]


_QUESTION_KEYS = ("prompt", "question", "problem")
_ANSWER_KEYS = ("answer", "solution", "ground_truth")


def _gold(text: str) -> str:
    """Gold answer from a GSM8K (``#### 42``) or MATH (``\\boxed{..}``) solution, else the text."""
    if "####" in text:
        return text.rsplit("####", 1)[1].strip().replace(",", "")
    boxed = _last_boxed(text)
    return boxed if boxed is not None else text.strip()


def _last_boxed(text: str) -> str | None:
    i = text.rfind("\\boxed{")
    if i < 0:
        return None
    depth, j = 0, i + len("\\boxed{")
    for k in range(j, len(text)):
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            if depth == 0:
                return text[j:k]
            depth -= 1
    return None


def _row_to_problem(row: dict, source: str, line: int | None) -> Problem:
    if not isinstance(row, dict):
        raise IngestError("expected a JSON object", source=source, line=line)
    q = next((row[k] for k in _QUESTION_KEYS if k in row), None)
    a = next((row[k] for k in _ANSWER_KEYS if k in row), None)
    if not isinstance(q, str) or not q.strip():
        raise IngestError(
            f"missing question text (one of {_QUESTION_KEYS})",
            source=source,
            line=line,
            field=next((k for k in _QUESTION_KEYS if k in row), _QUESTION_KEYS[0]),
        )
    if a is None or (isinstance(a, str) and not a.strip()):
        raise IngestError(
            f"missing gold answer (one of {_ANSWER_KEYS})",
            source=source,
            line=line,
            field=next((k for k in _ANSWER_KEYS if k in row), _ANSWER_KEYS[0]),
        )
    return Problem(prompt=MATH_PROMPT.format(question=q.strip()), answer=_gold(str(a)))


def load_problems(path: str | Path) -> list[Problem]:
    """GSM8K/MATH-style records from ``.jsonl`` or ``.parquet`` (fields question/problem/prompt and
    answer/solution); errors name the file, line and field."""
    path = Path(path)
    out: list[Problem] = []
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        for i, row in enumerate(pq.read_table(path).to_pylist()):
            out.append(_row_to_problem(row, str(path), i + 1))
    else:
        with open(path, encoding="utf-8") as fh:
            for i, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise IngestError(f"invalid JSON ({exc.msg})", source=str(path), line=i) from None
                out.append(_row_to_problem(row, str(path), i))
    if not out:
        raise IngestError("no problems", source=str(path))
    return out


_BOXED = re.compile(r"\\boxed\{")
_INT = re.compile(r"-?[0-9]+")


def exact_reward(completion: str, gold: str) -> float | None:
    """The reward when it is decidable without the verifier, else None.

    Only for a completion with exactly one ``\\boxed{..}`` (balanced): 1.0 when its content
    equals ``gold`` as a string, and the integer comparison when both are integers (GSM8K golds
    and the arithmetic task). Everything else (``\\frac``, decimals, expressions, several boxes)
    goes to math-verify, which compares values. tests/trainer/test_tasks.py checks the two agree.
    """
    if completion.count("\\boxed{") != 1:
        return None
    ans = _last_boxed(completion)
    if ans is None:
        return None
    a, g = ans.strip(), gold.strip()
    if a and a == g:
        return 1.0
    if _INT.fullmatch(a) and _INT.fullmatch(g):
        return 1.0 if int(a) == int(g) else 0.0
    return None


def verify_reward(completion: str, gold: str) -> float:
    """math-verify (sympy) alone: 1.0 when it finds the completion's answer equal to ``gold``."""
    from math_verify import parse, verify

    try:
        return 1.0 if verify(parse(f"${gold}$"), parse(completion)) else 0.0
    except Exception:  # the verifier's own parse/timeout failures count as wrong answers
        return 0.0


@lru_cache(maxsize=65536)
def math_reward(completion: str, gold: str) -> float:
    """1.0 when the completion's ``\\boxed{}`` answer equals ``gold``, else 0.0.

    A completion without ``\\boxed{}`` scores 0 and a plain boxed answer is matched exactly
    (:func:`exact_reward`), both without the verifier; the rest is math-verify's call (sympy,
    milliseconds each). Cached: small policies repeat completions a lot.
    """
    if not _BOXED.search(completion):
        return 0.0
    fast = exact_reward(completion, gold)
    return fast if fast is not None else verify_reward(completion, gold)


def score(
    completions: Iterable[str], golds: Iterable[str], reward: Callable[[str, str], float] | None = None
) -> list[float]:
    """Rewards of ``completions`` against ``golds`` (``reward``: :func:`math_reward` by default)."""
    fn = reward or math_reward
    return [fn(c, g) for c, g in zip(completions, golds, strict=True)]


# --- the opt-in tasks of the noise-scale experiment -------------------------------------------
#: ``short-answer``: the arithmetic sums enumerated as a finite set of distinct prompts, answered
#: bare in 1-3 tokens; reward 1 only for the exact answer string, so the expected reward over all
#: prompts is computable exactly (:class:`rlvr_trainer.evaluation.ExactEval`).
SHORT_ANSWER = "short-answer"
#: ``content``: the arithmetic task with a reward on the answer's value alone, boxed or bare: the
#: embedded model already writes an answer after ``=``, so the reward measures content, not format.
CONTENT = "content"
#: Task names the trainer knows (anything else is a path to a GSM8K/MATH file).
TASK_NAMES = ("arithmetic", SHORT_ANSWER, CONTENT)

#: Operand ranges of each arithmetic level, in ``_LEVELS``' order (for enumerating its prompts).
_LEVEL_RANGES = (
    (range(0, 10), "+", range(0, 10)),
    (range(10, 100), "+", range(0, 10)),
    (range(10, 100), "+", range(10, 100)),
    (range(10, 100), "-", range(10, 100)),
    (range(2, 10), "*", range(10, 100)),
)


@lru_cache(maxsize=16)
def distinct_problems(max_level: int | None, split: str = "all") -> tuple[Problem, ...]:
    """Every distinct ``a op b=`` prompt of levels ``0..max_level`` (None: all five) in ``split``,
    in a fixed order; the answer is the bare value (``solution`` too). Levels 0-1: 1,000 prompts
    with answers 0-108 (1-3 characters, one token each in the embedded tokenizer)."""
    _check_split(split)
    top = len(_LEVEL_RANGES) - 1 if max_level is None else max_level
    if not 0 <= top < len(_LEVEL_RANGES):
        raise ValueError(f"max_level must be in 0..{len(_LEVEL_RANGES) - 1} or None, got {max_level!r}")
    out = []
    for level, (ra, op, rb) in enumerate(_LEVEL_RANGES[: top + 1]):
        for a in ra:
            for b in rb:
                v = a + b if op == "+" else a - b if op == "-" else a * b
                prompt = f"{a}{op}{b}="
                if split == "all" or heldout(prompt) == (split == "heldout"):
                    out.append(Problem(prompt=prompt, answer=str(v), solution=str(v), level=level))
    return tuple(out)


@dataclass(frozen=True)
class ShortAnswerTask:
    """Prompts drawn uniformly from the distinct prompts of levels ``0..max_level`` in ``split``
    (problem ``i`` a pure function of ``(seed, i)``, as :class:`ArithmeticTask`'s)."""

    seed: int = 0
    max_level: int | None = 1
    split: str = "all"

    def __post_init__(self) -> None:
        _check_split(self.split)

    def problem(self, index: int) -> Problem:
        pool = distinct_problems(self.max_level, self.split)
        return pool[random.Random(self.seed * 1_000_003 + index).randrange(len(pool))]


def bare_reward(completion: str, gold: str) -> float:
    """1.0 when the completion is exactly the gold answer's text (no spaces, no box), else 0.0.

    With the character tokenizer this is the event "the answer's tokens, then end of sequence"
    (up to the never-trained special tokens, which decoding drops), whose probability the exact
    evaluation computes."""
    return 1.0 if completion == gold else 0.0


def content_reward(completion: str, gold: str) -> float:
    """1.0 when the completion's answer has the gold value, boxed or bare: the content of a single
    ``\\boxed{..}`` when there is one, else the whole completion; integers compared by value."""
    n = completion.count("\\boxed{")
    if n > 1:
        return 0.0
    ans = _last_boxed(completion) if n == 1 else completion
    if ans is None:
        return 0.0
    a, g = ans.strip(), gold.strip()
    if _INT.fullmatch(a) and _INT.fullmatch(g):
        return 1.0 if int(a) == int(g) else 0.0
    return 1.0 if a and a == g else 0.0


def reward_for(task: str) -> Callable[[str, str], float]:
    """The reward function of a task name (:data:`TASK_NAMES`; a file or ``arithmetic``:
    :func:`math_reward`, the boxed answer)."""
    return {SHORT_ANSWER: bare_reward, CONTENT: content_reward}.get(task, math_reward)
