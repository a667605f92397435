"""Overhead of RlvrScheduleCallback on a tiny-model TRL GRPO run (CPU), against the same run without it.

A real ``GRPOTrainer`` on the committed tiny model of the reference trainer (``rlvr_trainer/tiny-qwen2``:
Qwen2, 2 layers, hidden 128, a 31-token arithmetic tokenizer), arithmetic prompts, logging every
update, so that the per-update training time is small and the callback's share as large as it gets.
Three arms run in turn, repeat by repeat (the order rotates): no callback; the callback with a
one-stage schedule (8 rollouts/update: both arms do the same training work while the callback
canonicalizes, records, watches and decides every update); the callback with the two-clock policy
held at 8 (the noise estimate, the failure forecast and the detectors run too).

Measures per arm, each printed as min / median / max over the repeats:

- the callback's own CPU time (the thread's CPU clock around each of its events) over the CPU time
  of the training (the process's, around ``trainer.train()``): what the callback costs, and
  insensitive to other jobs on a shared machine, which inflate wall clocks (its own wall time,
  ``overhead_s``, is printed too);
- CPU and wall time per update, and the paired ratio with / without of each repeat: the end-to-end
  view; the wall figure is as noisy as the machine.

Goal: at most 1 % of training time.

    python benchmarks/bench_trl_callback.py [--steps 60] [--repeats 5] [--write runs/bench_trl.md]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

ONE_STAGE = {"stages": [{"batch": 8, "lr": 1e-3}]}
#: the two-clock policy kept at 8 rollouts/update (no switch: both arms train alike) with everything on
TWO_CLOCK = {
    "type": "two_clock",
    "initial_batch": 8,
    "base_batch": 8,
    "base_lr": 1e-3,
    "constraints": {"max_batch": 8},
    "track_critical_batch": True,
}
ARMS = {"none": None, "static": ONE_STAGE, "two_clock": TWO_CLOCK}


def committed_model() -> Path:
    import rlvr_trainer

    return Path(rlvr_trainer.__file__).resolve().parent / "tiny-qwen2"


def prompts(n: int) -> list[str]:
    return [f"{(i * 7) % 10}+{(i * 3) % 10}=" for i in range(n)]


def right_sum(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
    """Verifiable reward: the completion starts with the sum."""
    out = []
    for p, c in zip(prompts, completions, strict=True):
        a, b = p.rstrip("=").split("+")
        out.append(float(str(c).strip().startswith(str(int(a) + int(b)))))
    return out


EVENTS = (
    "on_train_begin",
    "on_epoch_begin",
    "on_substep_end",
    "on_step_end",
    "on_log",
    "on_save",
    "on_epoch_end",
    "on_train_end",
)


def cpu_clocked(cb: Any) -> list[float]:
    """Wrap ``cb``'s event methods (on the instance) to sum the thread's CPU time they take."""
    spent = [0.0]
    for name in EVENTS:
        fn = getattr(cb, name)

        def timed(*args: Any, _fn: Any = fn, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return _fn(*args, **kwargs)
            finally:
                spent[0] += time.thread_time() - t0

        setattr(cb, name, timed)
    return spent


def one_run(out: Path, steps: int, schedule: Any) -> dict[str, float]:
    """Wall and CPU seconds of ``trainer.train()`` and the callback's own wall and CPU seconds."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from rlvr_schedule_adapters.trl import RlvrScheduleCallback

    model = committed_model()
    tok = AutoTokenizer.from_pretrained(str(model))
    tok.padding_side = "left"
    data = Dataset.from_dict({"prompt": prompts(4 * steps)})
    cbs = [RlvrScheduleCallback(schedule)] if schedule is not None else []
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
        model=str(model),
        reward_funcs=right_sum,
        args=args,
        train_dataset=data,
        processing_class=tok,
        callbacks=cbs,
    )
    spent = cpu_clocked(cbs[0]) if cbs else [0.0]
    t0, c0 = time.perf_counter(), time.process_time()
    trainer.train()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert trainer.state.global_step == steps
    if cbs:
        assert not cbs[0].errors, cbs[0].errors
    return {"wall": wall, "cpu": cpu, "own_wall": cbs[0].overhead_s if cbs else 0.0, "own_cpu": spent[0]}


def mmm(values: list[float], fmt: str) -> str:
    """min / median / max."""
    return " / ".join(format(v, fmt) for v in (min(values), statistics.median(values), max(values)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--write", type=Path, default=None, help="append the results as a markdown section")
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-trl-"))
    for name, sched in ARMS.items():  # warm-up: imports, first-step allocations
        one_run(tmp / f"warm-{name}", 3, sched)
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in ARMS}
    names = list(ARMS)
    for r in range(a.repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            runs[name].append(one_run(tmp / f"r{r}-{name}", a.steps, ARMS[name]))
    lines = [
        "| arm | CPU per update, ms | paired CPU ratio to no callback | wall per update, ms "
        "| callback's own CPU per update, ms | **own CPU / training CPU, %** | own wall / training wall, % |",
        "|---|---|---|---|---|---|---|",
    ]
    base = runs["none"]
    for name in names:
        rs = runs[name]
        cpu = [x["cpu"] / a.steps * 1e3 for x in rs]
        wall = [x["wall"] / a.steps * 1e3 for x in rs]
        if name == "none":
            lines.append(f"| no callback | {mmm(cpu, '.1f')} | - | {mmm(wall, '.1f')} | - | - | - |")
            continue
        ratio = [x["cpu"] / b["cpu"] for x, b in zip(rs, base, strict=True)]
        own_ms = [x["own_cpu"] / a.steps * 1e3 for x in rs]
        own_cpu = [100 * x["own_cpu"] / x["cpu"] for x in rs]
        own_wall = [100 * x["own_wall"] / x["wall"] for x in rs]
        lines.append(
            f"| callback, {name} | {mmm(cpu, '.1f')} | {mmm(ratio, '.3f')} | {mmm(wall, '.1f')} | "
            f"{mmm(own_ms, '.3f')} | **{mmm(own_cpu, '.2f')}** | {mmm(own_wall, '.2f')} |"
        )
    table = "\n".join(lines)
    print(table)
    if a.write:
        import torch
        import transformers
        import trl

        cmd = f"python benchmarks/bench_trl_callback.py --steps {a.steps} --repeats {a.repeats}"
        env = (
            f"{platform.machine()}, Python {platform.python_version()}, torch {torch.__version__}, "
            f"transformers {transformers.__version__}, trl {trl.__version__}"
        )
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        head = (
            f"\n### Run of {when}\n\n`{cmd}` ({env}). The committed tiny model (2 layers, hidden 128), "
            "8 completions per update (4 per micro-step x 2), max_completion_length 6; each cell min / median / "
            "max over the repeats.\n\n"
        )
        with open(a.write, "a") as f:
            f.write(head + table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
