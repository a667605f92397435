"""The product's reader against records copied by hand from the raw logs.

Each row below was written by reading the raw file (``zcat FILE | sed -n 'Np'``), not by running the
reader: the raw line number, the optimizer step and rollouts the log's own header and dicts imply,
and the reward, entropy and LR as printed. One table per format; the reader must agree with every
row. The rollouts a record covers (40 and 8 in ``runs/ORIGIN.md``) are checked from the header too.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest

from benchmarks.fixtures.real_runs import ROOT, RUNS, load_real, read_options
from rlvr_schedule.errors import IngestWarning
from rlvr_schedule.ingest import ReadOptions, detect_format, load_run

RAW = ROOT / "raw"
FORMATS = ROOT.parent / "formats"

# (file, options, raw line, step, samples, reward, entropy, lr); None = not logged in that record
REFERENCE = [
    # TRL console, Qwen2.5-7B exp1a: header "Total train batch size ... = 8" (line 125), "Total
    # optimization steps = 200" (line 127), 40 dicts then the summary (line 372): one dict every 5
    # steps. The first dict sits after the tqdm bars of line 130 (\r), the next six are buffered
    # after the same bar (lines 131-136); the last five follow the final bar (lines 367-371).
    ("trl_exp1a_rho3p00_seed44.log.gz", None, 130, 5, 40, 0.85, 0.15785073898732663, 4e-05),
    ("trl_exp1a_rho3p00_seed44.log.gz", None, 131, 10, 80, 0.875, 0.15832917280495168, 9e-05),
    (
        "trl_exp1a_rho3p00_seed44.log.gz",
        None,
        371,
        200,
        1600,
        0.95,
        0.038617853075265884,
        5.263157894736843e-07,
    ),
    # TRL console, Qwen3.5-9B gates: string values ('0.125'), header batch 4 (line 19), 200 steps,
    # one dict a step (epoch '0.0005352' x 1,869 steps per epoch = step 1)
    ("trl_gates_gate1_adq_seed42.log.gz", None, 40, 1, 4, 0.125, None, 0.0),
    ("trl_gates_gate1_adq_seed42.log.gz", None, 41, 2, 8, 0.25, None, 1e-05),
    ("trl_gates_gate1_adq_seed42.log.gz", None, 239, 200, 800, 0.875, None, 5.263e-07),
    # verl console (Ray prefixes, colour codes): train_batch_size 256 (line 83) x n 1 (line 217);
    # actor/lr(1e-4):0.010 = 1e-6; entropy as actor/entropy_loss. This verl counts from step:0
    # (line 251, a training step), so step N is update N + 1.
    ("verl_gsm8k_qwen05b_ppo_resp512.log.gz", None, 252, 1, 512, 0.004, 0.481, 1e-06),
    ("verl_gsm8k_qwen05b_ppo_resp512.log.gz", None, 253, 2, 768, 0.016, 0.458, 1e-06),
    ("verl_gsm8k_qwen05b_ppo_resp512.log.gz", None, 1989, 434, 435 * 256, 0.707, 0.066, 1e-06),
    # JSON lines (metrics file, no batch logged: --batch 256, --alias mean_reward=reward_mean)
    ("grpotrait_lr1e4.jsonl.gz", "grpotrait_lr1e4", 1, 1, 256, 0.1172, None, None),
    ("grpotrait_lr1e4.jsonl.gz", "grpotrait_lr1e4", 20, 20, 20 * 256, 0.543, None, None),
]


def _quiet(fn, *a, **kw):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **kw)


@pytest.mark.parametrize(("file", "opts", "line", "step", "samples", "reward", "entropy", "lr"), REFERENCE)
def test_record_matches_the_hand_copied_reference(
    file: str,
    opts: str | None,
    line: int,
    step: int,
    samples: int,
    reward: float,
    entropy: float | None,
    lr: float | None,
) -> None:
    path = RAW / file
    options = read_options(opts) if opts else None
    run = _quiet(load_run, path, options=options)
    stream_lines = {r.step: r for r in run.records}
    rec = stream_lines[step]
    assert rec.samples == samples
    assert rec.reward_mean == pytest.approx(reward)
    if entropy is None:
        assert math.isnan(rec.entropy)
    else:
        assert rec.entropy == pytest.approx(entropy)
    if lr is not None:
        assert rec.lr == pytest.approx(lr)
    # the record came from that raw line
    raw_line = _raw_line(path, line)
    assert repr(reward).rstrip("0") in raw_line or f"{reward}" in raw_line or f"'{reward}'" in raw_line


def _raw_line(path: Path, n: int) -> str:
    import gzip

    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as fh:
        for i, text in enumerate(fh, start=1):
            if i == n:
                return text
    raise AssertionError(f"{path} has no line {n}")


def test_rollouts_per_record_are_the_40_and_8_of_origin() -> None:
    """exp1a/exp2: 8 completions a step (header) x a dict every 5 steps = 40 a record, read natively.
    gates/w1t/w7/w8: the header says 4 (TRL < 0.15 counts prompts there: 4 prompts x 2 generations;
    the logged mean reward moves in steps of 1/8), so the native read gives 4 a record and the
    calibration passes --batch 8, as RUNS.json says and why."""
    exp1a = _quiet(load_run, RAW / "trl_exp1a_rho3p00_seed44.log.gz")
    assert exp1a.batch == 8 and exp1a.meta["logging_interval"] == 5
    assert {b.samples - a.samples for a, b in zip(exp1a.records, exp1a.records[1:], strict=False)} == {40}
    gate = _quiet(load_run, RAW / "trl_gates_gate1_adq_seed42.log.gz")
    assert gate.batch == 4 and "Total train batch size 4" in gate.meta["batch_source"]
    assert load_real("trl_gates_gate1_adq_seed42").batch == 8
    rewards = {round(r.reward_mean * 8, 6) for r in gate.records}
    assert all(x == int(x) for x in rewards)  # multiples of 1/8: 8 completions a step


@pytest.mark.parametrize("name", sorted(n for n in RUNS if n.startswith("trl_")))
def test_full_trl_logs_read_every_dict(name: str) -> None:
    """No record lost: the dicts the file holds (grep) are the records read (the issue's buffered
    dicts and dicts after the last bar were read as 'logged again' and dropped)."""
    import gzip

    text = gzip.open(RAW / f"{name}.log.gz", "rt", encoding="utf-8").read()
    n_dicts = text.count("{'loss'")
    run = load_real(name)
    assert len(run.records) == n_dicts and run.meta["dropped"] == 0


def test_unsloth_log_two_runs_nan_and_a_dict_broken_over_two_lines() -> None:
    """A new public source (johnson7788/RLDecisionAgent), read as published: Unsloth's banner gives
    the batch; the file's first run (lines 163-412) is dropped with a warning naming its lines; a
    dict broken over lines 626-627 is read; 27 dicts for 50 steps fit no interval and say so."""
    path = FORMATS / "unsloth_console" / "train_grpo.log.gz"
    assert detect_format(path) == "trl-console"
    with pytest.warns(IngestWarning) as rec:
        run = load_run(path)
    msgs = " ".join(str(w.message) for w in rec)
    assert "2 training runs" in msgs and "lines 163-412" in msgs and "20 metrics dict(s)" in msgs
    assert "do not fit" in msgs
    assert run.batch == 4 and "Total batch size (4 x 1 x 1) = 4" in run.meta["batch_source"]
    assert len(run.records) == 27 and run.meta["runs_dropped"] == 1
    # hand-copied: line 517 reward 3.0, lr 0.0, grad_norm 0.5666718482971191; line 626-627 reward -4.875
    assert run.records[0].reward_mean == 3.0 and run.records[0].lr == 0.0
    assert run.records[0].grad_norm == pytest.approx(0.5666718482971191)
    assert run.records[-1].reward_mean == -4.875 and run.records[-1].lr == pytest.approx(
        1.1111111111111112e-07
    )
    first = _quiet(load_run, path, options=ReadOptions(logging_steps=1))
    assert len(first.records) == 27
