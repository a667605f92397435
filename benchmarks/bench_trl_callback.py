"""Overhead of RlvrScheduleCallback on a tiny-model TRL GRPO run (CPU), against the same run without it.

Two measures: (1) the callback's own time, summed by the callback around each of its events
(``overhead_s``) over the run's wall time: precise, insensitive to machine noise; (2) A/B wall time
per update of runs with and without the callback, interleaved, median over repeats: the end-to-end
view, noisy on a shared machine. The schedule holds one stage (8 rollouts/update) so that both arms
do the same training work while the callback still canonicalizes, records and decides every update.
Goal: < 1 % of training time.

    python benchmarks/bench_trl_callback.py [--steps 40] [--repeats 3] [--write benchmarks/TRL_RESULTS.md]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import trl_grpo_cpu as ex

ONE_STAGE = {"stages": [{"batch": 8, "lr": 1e-3}]}


def one_run(model_dir: Path, tok: Any, out: Path, steps: int, with_callback: bool) -> tuple[float, float]:
    """(wall seconds of trainer.train(), callback seconds) for one run."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from rlvr_schedule_adapters.trl import RlvrScheduleCallback

    data = Dataset.from_dict(
        {"prompt": [f"w{i % 20} w{(i * 7) % 20} w{(i * 3) % 20}" for i in range(4 * steps)]}
    )
    cbs = [RlvrScheduleCallback(ONE_STAGE)] if with_callback else []
    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=4,
        num_generations=4,
        steps_per_generation=2,
        gradient_accumulation_steps=2,
        max_completion_length=6,
        max_steps=steps,
        learning_rate=1e-3,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        beta=0.0,
        report_to=[],
        disable_tqdm=True,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=ex.repeat_first_word,
        args=args,
        train_dataset=data,
        processing_class=tok,
        callbacks=cbs,
    )
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    assert trainer.state.global_step == steps
    return wall, (cbs[0].overhead_s if cbs else 0.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--write", type=Path, default=None, help="append the results as a markdown section")
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-trl-"))
    tok = ex.make_tiny_model(tmp / "model")
    one_run(tmp / "model", tok, tmp / "warm", 3, True)  # warm-up: imports, first-step allocations
    walls: dict[bool, list[float]] = {True: [], False: []}
    own: list[float] = []
    for r in range(a.repeats):
        for arm in (False, True) if r % 2 == 0 else (True, False):
            wall, cb_s = one_run(tmp / "model", tok, tmp / f"r{r}{arm}", a.steps, arm)
            walls[arm].append(wall)
            if arm:
                own.append(cb_s / wall)
    per_off = statistics.median(walls[False]) / a.steps
    per_on = statistics.median(walls[True]) / a.steps
    own_ms = statistics.median(own) * per_on * 1e3
    lines = [
        "| measure | value |",
        "|---|---|",
        f"| updates per run x repeats | {a.steps} x {a.repeats} (interleaved) |",
        f"| wall time per update, without callback (median) | {per_off * 1e3:.1f} ms |",
        f"| wall time per update, with callback (median) | {per_on * 1e3:.1f} ms |",
        f"| A/B difference (noisy) | {(per_on / per_off - 1) * 100:+.2f} % |",
        f"| callback's own time per update (median) | {own_ms:.3f} ms |",
        (
            f"| callback's own time / training time (median; max) | {statistics.median(own) * 100:.3f} %; "
            f"{max(own) * 100:.3f} % |"
        ),
    ]
    table = "\n".join(lines)
    print(table)
    if a.write:
        import torch
        import transformers
        import trl

        cmd = f"python benchmarks/bench_trl_callback.py --steps {a.steps} --repeats {a.repeats}"
        env = (
            f"{platform.machine()}, {platform.python_version()}, torch {torch.__version__}, "
            f"transformers {transformers.__version__}, trl {trl.__version__}; CPU shared with other jobs"
        )
        setup = (
            "Tiny Qwen2 (1 layer, hidden 64), 8 completions per update (4 per micro-step x 2), "
            "max_completion_length 6."
        )
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        head = f"\n## Run of {when}\n\n`{cmd}` on this machine ({env}). {setup}\n\n"
        with open(a.write, "a") as f:
            f.write(head + table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
