"""A scheduled GRPO run in 2 processes on CPU (torch.distributed with gloo): the child of ``test_trl_ddp``.

    python -m torch.distributed.run --nproc_per_node 2 tests/trl/ddp_grpo.py MODEL_DIR OUT [CHECKPOINT]

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


if __name__ == "__main__":
    main()
