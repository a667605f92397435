"""A scheduled GRPO run in 2 processes on CPU (torch.distributed with gloo): the child of ``test_trl_ddp``.

    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/trl/ddp_grpo.py MODEL_DIR OUT [CHECKPOINT]

Each rank writes ``OUT/rank<r>.json``: the records its callback fed the schedule (samples, batch,
grad_norm_micro), its decisions, and per update the completions its reward function scored (count,
prompts, texts), the LR ``step()`` used and the accumulation it ran. The run saves a checkpoint after
every update (with the callback's state); with CHECKPOINT it resumes from there.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trl_harness import Measured, _Probe, grpo_args, prompts  # noqa: E402

#: batch 16 = 4 per device x 2 ranks x GA 2, then 32 (GA 4) once 48 rollouts are done
SCHEDULE = {"stages": [{"batch": 16, "lr": 1e-3, "until_samples": 48}, {"batch": 32, "lr": 5e-4}]}
STEPS = 6


def main() -> None:
    from transformers import PreTrainedTokenizerFast
    from trl import GRPOTrainer

    from rlvr_schedule.plugins import PluginHost, hookimpl
    from rlvr_schedule_adapters.trl import RlvrScheduleCallback, find_callback

    model_dir, out = sys.argv[1], Path(sys.argv[2])
    resume = sys.argv[3] if len(sys.argv) > 3 else None
    rank = int(os.environ.get("RANK", "0"))
    tok = PreTrainedTokenizerFast.from_pretrained(model_dir)
    records = []

    class Keep:
        @hookimpl
        def rlvr_schedule_on_record(self, record):
            records.append(
                {
                    "samples": record.samples,
                    "batch": record.batch,
                    "grad_norm_micro": record.grad_norm_micro,
                    "micro_batch": record.micro_batch,
                }
            )

    host = PluginHost(load_entrypoints=False, strict=True)
    host.register(Keep())
    cb = RlvrScheduleCallback(SCHEDULE, plugins=host, strict=True)
    m = Measured()
    trainer = GRPOTrainer(
        model=model_dir,
        reward_funcs=m.reward,
        processing_class=tok,
        args=grpo_args(
            out / "trainer",
            max_steps=STEPS,
            ddp_backend="gloo",
            save_strategy="steps",
            save_steps=1,
            restore_callback_states_from_checkpoint=True,
        ),
        train_dataset=prompts(128),
        callbacks=[cb, _Probe(m)],
    )
    trainer.train(resume_from_checkpoint=resume)
    cb = find_callback(trainer)  # a restored checkpoint's callback state makes a new instance
    (out / f"rank{rank}.json").write_text(
        json.dumps(
            {
                "world": int(trainer.args.world_size),
                "records": records,
                "decisions": [d.to_dict() for d in cb.decisions],
                "completions": m.completions,
                "lr": m.lr,
                "prompts": m.prompts,
                "texts": m.texts,
                "ga": m.ga,
                "errors": cb.errors,
            }
        )
    )
    # This frame outlives the call: an ImportError that vLLM keeps from a lazy import inside
    # train() holds it in its traceback. Its locals must not keep the trainer (whose DDP wrapper
    # holds the process group), or destroy_process_group() cannot free the group.
    del trainer, cb


def _gloo_threads() -> list[str]:
    """This process's gloo threads (Linux thread names; empty where /proc is missing)."""
    names = []
    for task in Path("/proc/self/task").glob("*/comm"):
        try:
            name = task.read_text().strip()
        except OSError:  # the thread ended meanwhile
            continue
        if "gloo" in name:
            names.append(name)
    return names


def run() -> None:
    """``main`` then ``destroy_process_group()``, also when ``main`` raised.

    Without it the gloo group lives until the interpreter finalizes. Gloo's worker thread drops
    the last collective's work (its tensors hold Python references) just after the collective
    returned; when that happens during finalization, the thread's GIL acquire exits the thread
    inside a ``noexcept`` destructor: "terminate called without an active exception", SIGABRT.
    Freeing the group joins gloo's threads while the interpreter is alive; a rank whose gloo
    threads survive it fails here instead of aborting at random at exit.
    """
    import torch.distributed as dist

    try:
        main()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    left = _gloo_threads()
    if left:
        raise RuntimeError(f"gloo threads still running after destroy_process_group(): {left}")


if __name__ == "__main__":
    run()
