"""Write the TRL/transformers logs this folder holds, with TRL's own loggers (run once, here).

No public excerpt of a TRL GRPO console log with its ``***** Running training *****`` header, of a
GRPO ``trainer_state.json`` or of TRL's TensorBoard tags was found, so these files were written by
TRL's own loggers on the example's tiny model (``examples/trl_grpo_cpu.py``): GRPOTrainer on CPU,
24 optimizer updates of 8 completions (reward slowed to 0.3 s a call so tqdm redraws each step) (4 per device x 2 accumulation, 4 per prompt), LR 1e-3 with a
6-step linear warm-up then cosine decay, ``logging_steps=2``, console at log level info, TensorBoard on.

    env PYTHONPATH=src:adapters:examples python tests/data/real/formats/trl_local/make_trl_logs.py OUT > OUT/train.log 2>&1
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

for _k, _v in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
               "OMP_NUM_THREADS": "1"}.items():
    os.environ.setdefault(_k, _v)


def main(out: Path) -> None:
    import time

    from trl import GRPOConfig, GRPOTrainer
    from trl_grpo_cpu import make_tiny_model, prompt_dataset, repeat_first_word

    def slow_reward(*args, **kwargs):
        time.sleep(0.3)  # a step as slow as a real one, so tqdm redraws its bar at every step
        return repeat_first_word(*args, **kwargs)

    model_dir = out / "tiny-model"
    tok = make_tiny_model(model_dir)
    args = GRPOConfig(
        output_dir=str(out / "run"), per_device_train_batch_size=4, num_generations=4,
        gradient_accumulation_steps=2, max_completion_length=6, max_steps=24, learning_rate=1e-3,
        lr_scheduler_type="cosine", warmup_steps=6, logging_steps=2, save_strategy="no",
        use_cpu=True, bf16=False, beta=0.0, report_to=["tensorboard"],
        disable_tqdm=False, log_level="info", seed=0,
    )
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=slow_reward, args=args,
                          train_dataset=prompt_dataset(64), processing_class=tok)
    trainer.train()
    trainer.save_state()  # run/trainer_state.json


if __name__ == "__main__":
    main(Path(sys.argv[1]))
