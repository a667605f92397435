"""A scheduled GRPO run that can be SIGKILLed and resumed: the child of ``test_trl_kill_resume``.

    python tests/trl/killable_grpo.py OUT [--resume]

Every update's completions are counted at the reward function and appended to ``OUT/measured.jsonl``
(``{"step", "completions"}``, flushed per update); the schedule's records and decisions go to
``OUT/schedule.jsonl`` (a JSONL sink). A checkpoint is written after every update, so a kill often lands
in the middle of one; ``--resume`` starts from the last *complete* checkpoint and prints the ones it
skipped.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trl_harness import Measured, grpo_args, make_tiny_model, prompts

#: Three stages whose second switch (decided after update 5, 12 micro-steps into the epoch) waits one
#: update for an aligned boundary: a checkpoint-5 holds a stage in effect (16) and one pending (32).
THREE_STAGES = {
    "stages": [
        {"batch": 8, "lr": 1e-3, "until_samples": 24},
        {"batch": 16, "lr": 7e-4, "until_samples": 48},
        {"batch": 32, "lr": 5e-4},
    ]
}
STEPS = 9


def scheduled_run(out: Path, *, resume: bool = False, steps: int = STEPS) -> Any:
    """Train (or resume) the scheduled run under ``out``; return the trainer."""
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    from rlvr_schedule.plugins import PluginHost
    from rlvr_schedule.plugins.sinks import JsonlSink
    from rlvr_schedule_adapters.trl import RlvrScheduleCallback, last_complete_checkpoint

    out.mkdir(parents=True, exist_ok=True)
    for log in (out / "measured.jsonl", out / "schedule.jsonl"):
        if log.exists() and not log.read_bytes().endswith(b"\n"):
            with log.open("ab") as f:
                f.write(b"\n")  # end a line cut by the kill, so the next one starts whole
    model = out / "model"
    tok = make_tiny_model(model) if not (model / "tokenizer.json").exists() else None
    if tok is None:
        from transformers import PreTrainedTokenizerFast

        tok = PreTrainedTokenizerFast.from_pretrained(model)
    m = Measured()

    class Writer(TrainerCallback):
        def on_train_begin(self, args, state, control, optimizer=None, **kwargs):
            getattr(optimizer, "optimizer", optimizer).register_step_pre_hook(m.on_step)

        def on_step_end(self, args, state, control, **kwargs):
            with (out / "measured.jsonl").open("a") as f:
                f.write(json.dumps({"step": state.global_step, "completions": m.completions[-1]}) + "\n")

    host = PluginHost()
    host.register(JsonlSink(out / "schedule.jsonl"))
    callback = RlvrScheduleCallback(THREE_STAGES, plugins=host, name="killable", strict=True)
    checkpoint = None
    if resume:
        choice = last_complete_checkpoint(out / "run")
        for name, why in choice.skipped:
            print(f"skipped {name}: {why}", flush=True)
        checkpoint = str(choice.path) if choice.path else None
        print(f"resume from {checkpoint}", flush=True)
    trainer = GRPOTrainer(
        model=str(model),
        reward_funcs=m.reward,
        args=grpo_args(
            out / "run",
            max_steps=steps,
            save_strategy="steps",
            save_steps=1,
            restore_callback_states_from_checkpoint=True,
        ),
        train_dataset=prompts(64),
        processing_class=tok,
        callbacks=[callback, Writer()],
    )
    trainer.train(resume_from_checkpoint=checkpoint)
    return trainer


def last_per_step(path: Path, kind: str | None = None, offset: int = 0) -> dict[int, dict[str, Any]]:
    """The last complete JSONL row per step (a resumed run re-does the updates after its checkpoint),
    from byte ``offset`` on (the rows a later child appended)."""
    rows: dict[int, dict[str, Any]] = {}
    if path.exists():
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
        for line in text.splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a line cut by the kill
            if kind is None or row.get("kind") == kind:
                rows[int(row["step"])] = row
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--resume", action="store_true")
    a = ap.parse_args()
    scheduled_run(a.out, resume=a.resume)
