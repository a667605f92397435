"""Write this folder's logs with TRL's, transformers' and wandb's own loggers (run once, here).

A host that logs its own metrics through ``Trainer.log`` often hands it numpy and torch scalars
(``np.float32`` from a numpy reduction, ``np.int64`` counts, 0-dim tensors, bf16 under mixed
precision). transformers' console printer formats Python floats only (``f"{v:.4g}"``) and prints
every other value with ``repr``, so numpy >= 2 and torch leave ``np.float32(...)``,
``np.int64(...)`` and ``tensor(..., dtype=torch.bfloat16)`` in the console log; W&B converts them.
This is such a host: the tiny GRPO run of ``examples/trl_grpo_cpu.py`` (8 updates of 8 completions,
``logging_steps=2``, console at log level info, ``report_to="wandb"`` offline), with a trainer that
hands some of its metrics to the loggers as numpy/torch scalars (the values the Trainer logs,
converted on their way to the loggers; ``trainer_state.json`` keeps the floats).

    env WANDB_MODE=offline WANDB_DIR=OUT PYTHONPATH=src:examples \\
        python tests/data/real/formats/trl_numpy_torch/make_logs.py OUT > OUT/train.log 2>&1
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

for _k, _v in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
               "OMP_NUM_THREADS": "1", "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true"}.items():
    os.environ.setdefault(_k, _v)


def main(out: Path) -> None:
    import numpy as np
    import torch
    from trl import GRPOConfig, GRPOTrainer
    from trl_grpo_cpu import make_tiny_model, prompt_dataset, repeat_first_word

    def as_host_values(logs):  # type: ignore[no-untyped-def]
        """The metrics as a host hands them on: a numpy reduction, a counter, tensors."""
        if "reward" in logs:
            logs["reward"] = np.float32(logs["reward"])
            logs["num_tokens"] = np.int64(logs["num_tokens"])
            logs["entropy"] = torch.tensor(logs["entropy"])
            logs["grad_norm"] = torch.tensor(logs["grad_norm"], dtype=torch.bfloat16)

    tok = make_tiny_model(out / "tiny-model")
    args = GRPOConfig(
        output_dir=str(out / "run"), per_device_train_batch_size=4, num_generations=4,
        gradient_accumulation_steps=2, max_completion_length=6, max_steps=8, learning_rate=1e-3,
        lr_scheduler_type="cosine", warmup_steps=2, logging_steps=2, save_strategy="no",
        use_cpu=True, bf16=False, beta=0.0, report_to=["wandb"], run_name="trl-numpy-torch",
        disable_tqdm=False, log_level="info", seed=0,
    )
    trainer = GRPOTrainer(model=str(out / "tiny-model"), reward_funcs=repeat_first_word, args=args,
                          train_dataset=prompt_dataset(32), processing_class=tok)
    on_log = trainer.callback_handler.on_log

    def host_on_log(args, state, control, logs):  # type: ignore[no-untyped-def]
        as_host_values(logs)  # what the loggers (console, W&B) receive
        return on_log(args, state, control, logs)

    trainer.callback_handler.on_log = host_on_log
    trainer.train()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
