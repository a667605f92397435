"""The one value parser of the console readers: numpy and torch reprs mixed with the older forms."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvr_schedule.ingest import load_run
from rlvr_schedule.ingest.console import parse_verl_step_line
from rlvr_schedule.ingest.values import parse_mapping, parse_value, split_top

# How hosts print a float x (the torch forms as torch prints them: 4 decimals unless more needed).
FORMS = {
    "plain": repr,
    "3 decimals": lambda x: f"{x:.3f}",
    "np.float64": lambda x: repr(np.float64(x)),
    "np.float32": lambda x: repr(np.float32(x)),
    "tensor": lambda x: f"tensor({x:.4f})",
    "tensor cuda": lambda x: f"tensor({x:.4f}, device='cuda:0')",
    "tensor bf16": lambda x: f"tensor({x:.4f}, dtype=torch.bfloat16)",
    "tensor grad": lambda x: f"tensor({x:.4f}, device='cuda:0', grad_fn=<MeanBackward0>)",
}


def _expected(form: str, x: float) -> float:
    return float(FORMS[form](x).split("(")[-1].split(",")[0].rstrip(")"))


@pytest.mark.parametrize(
    "text,value",
    [
        ("np.float64(0.41)", 0.41),
        ("np.int64(3)", 3.0),
        ("np.float32(0.5)", 0.5),
        ("numpy.float64(-1.5e-06)", -1.5e-06),
        ("tensor(0.4100)", 0.41),
        ("tensor(0.4100, device='cuda:0')", 0.41),
        ("tensor(0.4102, dtype=torch.bfloat16)", 0.4102),
        ("tensor(-2., device='cuda:0', grad_fn=<MeanBackward0>)", -2.0),
        ("tensor([0.2500])", 0.25),
        ("np.float64(nan)", math.nan),
        ("np.float64(-inf)", -math.inf),
        ("'0.125'", 0.125),
        ("0.010", 0.01),
        ("nan", math.nan),
    ],
)
def test_one_printed_value(text: str, value: float) -> None:
    got = parse_value(text)
    assert isinstance(got, float)
    assert (math.isnan(got) and math.isnan(value)) or got == pytest.approx(value)


def test_booleans_text_and_code_stay_what_they_are() -> None:
    assert parse_value("np.True_") is True and parse_value("np.False_") is False
    assert parse_value("Qwen/Qwen2.5-0.5B") == "Qwen/Qwen2.5-0.5B"
    assert parse_value("__import__('os').getcwd()") == "__import__('os').getcwd()"  # never run
    assert parse_mapping("{'a': os.system('x')}") is None


def test_split_top_keeps_brackets_and_quotes_whole() -> None:
    line = "a:tensor(1., device='cuda:0') - b:np.float64(2.0) - c:x - y"
    assert split_top(line, " - ") == ["a:tensor(1., device='cuda:0')", "b:np.float64(2.0)", "c:x", "y"]
    assert split_top("k:it's - v:1", " - ") == ["k:it's", "v:1"]  # an unclosed quote is text


finite = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False).map(lambda x: round(x, 6))
entries = st.lists(st.tuples(st.sampled_from(sorted(FORMS)), finite), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=entries, step=st.integers(min_value=0, max_value=10_000))
def test_mixed_forms_in_verl_lines_and_trl_dicts(entries: list[tuple[str, float]], step: int) -> None:
    keys = [f"m{i}/{form.replace(' ', '_')}" for i, (form, _) in enumerate(entries)]
    texts = [FORMS[form](x) for form, x in entries]
    want = [_expected(form, x) for form, x in entries]
    got_step, verl = parse_verl_step_line(
        f"step:{step} - " + " - ".join(f"{k}:{t}" for k, t in zip(keys, texts, strict=True))
    )
    assert got_step == step and list(verl) == keys
    assert [verl[k] for k in keys] == pytest.approx(want, rel=1e-6, abs=1e-6)
    trl = parse_mapping("{" + ", ".join(f"'{k}': {t}" for k, t in zip(keys, texts, strict=True)) + "}")
    assert trl is not None and [trl[k] for k in keys] == pytest.approx(want, rel=1e-6, abs=1e-6)


def test_numpy_and_torch_reprs_read_in_both_console_formats(tmp_path: Path) -> None:
    verl = tmp_path / "verl.log"
    verl.write_text(
        "data.train_batch_size=16 actor_rollout_ref.rollout.n=4\n"
        + "".join(
            f"(TaskRunner pid=7) step:{s} - actor/pg_loss:np.float64(-0.0{s}) - "
            f"actor/lr:np.float64(1e-06) - critic/score/mean:{repr(np.float32(s / 10))} - "
            f"actor/entropy:tensor({1 - s / 10:.4f}, device='cuda:0')\n"
            for s in range(1, 6)
        ),
        encoding="utf-8",
    )
    run = load_run(verl)
    assert run.batch == 64 and [r.reward_mean for r in run.records] == pytest.approx(
        [0.1, 0.2, 0.3, 0.4, 0.5]
    )
    assert [r.entropy for r in run.records] == pytest.approx([0.9, 0.8, 0.7, 0.6, 0.5])
    assert all(r.lr == pytest.approx(1e-6) for r in run.records)
    trl = tmp_path / "trl.log"
    trl.write_text(
        "  Total train batch size (w. parallel, distributed & accumulation) = 8\n"
        + "".join(
            f"{{'loss': tensor(0.0{s}00, device='cuda:0', grad_fn=<MeanBackward0>), "
            f"'reward': {repr(np.float64(s / 8))}, 'learning_rate': np.float32(1e-05), "
            f"'step': {repr(np.int64(s))}, 'epoch': tensor({s / 4:.4f}, dtype=torch.bfloat16)}}\n"
            for s in range(1, 5)
        ),
        encoding="utf-8",
    )
    run = load_run(trl)
    assert [r.step for r in run.records] == [1, 2, 3, 4] and run.batch == 8
    assert [r.reward_mean for r in run.records] == pytest.approx([0.125, 0.25, 0.375, 0.5])
    assert run.records[0].lr == pytest.approx(1e-5)
