"""Verifiable rewards (math-verify) and task sources."""

from __future__ import annotations

import json

import pytest

from rlvr_schedule.errors import IngestError
from rlvr_trainer.tasks import ArithmeticTask, FileTask, load_problems, math_reward


@pytest.mark.parametrize(
    "completion,gold,expected",
    [
        ("\\boxed{19}", "19", 1.0),
        ("so the answer is \\boxed{19}.", "19", 1.0),
        ("\\boxed{18}", "19", 0.0),
        ("19", "19", 0.0),  # no \boxed{}: not accepted
        ("\\boxed{\\frac{1}{2}}", "0.5", 1.0),  # math-verify compares values, not strings
        ("\\boxed{-13}", "-13", 1.0),
        ("\\boxed{1(", "1", 0.0),  # malformed
    ],
)
def test_math_reward(completion, gold, expected):
    assert math_reward(completion, gold) == expected


def test_arithmetic_is_deterministic_and_mixes_levels():
    task = ArithmeticTask(seed=3)
    assert task.problem(17) == ArithmeticTask(seed=3).problem(17)
    probs = [task.problem(i) for i in range(400)]
    assert {p.level for p in probs} == {0, 1, 2, 3, 4}
    for p in probs[:50]:
        a = p.prompt[:-1]
        assert p.prompt.endswith("=") and str(eval(a)) == p.answer  # noqa: S307 - our own digits
        assert math_reward(p.solution, p.answer) == 1.0
    easy = ArithmeticTask(seed=3, max_level=0)
    assert all(easy.problem(i).level == 0 for i in range(100))


def test_load_problems_gsm8k_and_math(tmp_path):
    p = tmp_path / "mix.jsonl"
    rows = [
        {"question": "What is 2+3?", "answer": "2+3=5\n#### 5"},
        {"problem": "Half of 1?", "solution": "It is $\\boxed{\\frac{1}{2}}$."},
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    probs = load_problems(p)
    assert [q.answer for q in probs] == ["5", "\\frac{1}{2}"]
    assert "\\boxed{}" in probs[0].prompt and "What is 2+3?" in probs[0].prompt
    assert math_reward("\\boxed{0.5}", probs[1].answer) == 1.0
    task = FileTask(probs, seed=1)
    assert {task.problem(i).answer for i in range(4)} == {"5", "\\frac{1}{2}"}


def test_load_problems_errors_name_file_line_field(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text(
        json.dumps({"question": "ok?", "answer": "1"}) + "\n" + json.dumps({"question": "no answer"}) + "\n"
    )
    with pytest.raises(IngestError, match=r"bad.jsonl:2.*field 'answer'"):
        load_problems(p)
    p.write_text("{not json\n")
    with pytest.raises(IngestError, match=r"bad.jsonl:1.*invalid JSON"):
        load_problems(p)
    p.write_text(json.dumps({"answer": "3"}) + "\n")
    with pytest.raises(IngestError, match=r"bad.jsonl:1.*field 'prompt'"):
        load_problems(p)


def _fuzz_cases(n: int, seed: int = 0):
    """Completions around one or more ``\\boxed{}`` with integer-ish bodies and arithmetic junk."""
    import random

    rng = random.Random(seed)
    junk = "0123456789+-*=() QA:"
    bodies = [
        "19",
        "-13",
        "007",
        "7",
        "-0",
        "0",
        " 19 ",
        "1 9",
        "19.0",
        "+19",
        "19}",
        "{19}",
        "1(",
        "",
        "\\frac{1}{2}",
        "0.5",
        "12+7",
        "--3",
        "3-",
        "20-1",
    ]
    golds = ["19", "-13", "7", "0", "0.5", "\\frac{1}{2}", "12", "-3"]
    for _ in range(n):
        body = (
            rng.choice(bodies)
            if rng.random() < 0.6
            else "".join(rng.choice("0123456789-") for _ in range(rng.randint(1, 4)))
        )
        pre = "".join(rng.choice(junk) for _ in range(rng.randint(0, 6)))
        post = "".join(rng.choice(junk) for _ in range(rng.randint(0, 4)))
        text = f"{pre}\\boxed{{{body}}}{post}"
        if rng.random() < 0.15:
            text += f"\\boxed{{{rng.choice(bodies)}}}"
        yield text, rng.choice(golds)


def test_exact_match_agrees_with_math_verify():
    from rlvr_trainer.tasks import exact_reward, verify_reward

    decided = 0
    for text, gold in _fuzz_cases(600):
        fast = exact_reward(text, gold)
        if fast is not None:
            decided += 1
            assert fast == verify_reward(text, gold), (text, gold)
    assert decided > 150  # the fast path decides the plain answers (208 of these 600)
    # the arithmetic task's own completions: solutions and near misses
    task = ArithmeticTask(seed=5)
    for i in range(200):
        p = task.problem(i)
        for text in (p.solution, f"\\boxed{{{int(p.answer) + 1}}}", p.prompt + p.solution):
            assert exact_reward(text, p.answer) == verify_reward(text, p.answer), (text, p.answer)
