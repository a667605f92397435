"""Test helpers shared by the trainer tests (in-process and over Ray); importable by Ray workers
(the Ray test puts this folder and ``stubs/`` on the workers' PYTHONPATH)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rlvr_schedule_adapters.openrlhf import ARGS_ATTR
from rlvr_schedule_adapters.openrlhf.actors import RlvrPolicyModelActor, RlvrPPOTrainer

#: Stage 0: 8 rollouts per update until 16 rollouts; then 16 with twice the LR.
SPEC = {
    "type": "static",
    "constraints": {"group_size": 4},
    "stages": [
        {"batch": 8, "lr": 1e-3, "until_samples": 16},
        {"batch": 16, "lr": 2e-3, "until_samples": None},
    ],
}


class TinyPolicyModelActor(RlvrPolicyModelActor):
    """The scheduled policy actor with a tiny CPU engine instead of ``init_model_from_pretrained``
    (which builds a CUDA device mesh)."""

    def init_tiny(self, args: Any) -> None:
        from openrlhf_tiny_engine import build_policy

        self.strategy, engine, self.actor_optim, self.actor_scheduler = build_policy(args)
        self.actor = SimpleNamespace(model=engine)

    def tiny_state(self) -> dict:
        return {
            "gas": int(self.actor.model.gradient_accumulation_steps()),
            "accumulated_gradient": int(self.strategy.accumulated_gradient),
            "train_batch": int(self.strategy.args.train.batch_size),
            "base_lrs": [float(b) for b in self.actor_scheduler.base_lrs],
        }


def make_trainer(args: Any, group: Any, spec: Any = SPEC) -> RlvrPPOTrainer:
    """The scheduled trainer (plain class behind the Ray actor) without its heavy ``__init__``
    (tokenizer, datasets, vLLM); everything save_logs_and_checkpoints and init_checkpoint_states use."""
    setattr(args, ARGS_ATTR, {"schedule": spec})
    t = object.__new__(RlvrPPOTrainer)
    t.args, t.strategy = args, SimpleNamespace(args=args)
    t.wandb_logger = t.tensorboard_logger = None
    t.best_eval_metric_key, t.best_eval_metric_value, t._latest_eval_metric_value = "", float("-inf"), None
    t.actor_model_group, t.critic_model_group = group, None
    t._rlvr_setup()
    return t


def run_steps(
    t: RlvrPPOTrainer, steps: int, *, start: int = 1, reward: float = 0.5
) -> list[tuple[dict, dict]]:
    """What PPOTrainer.fit does after each train_step: logs and client_states to save_logs_and_checkpoints."""
    out = []
    for step in range(start, start + steps):
        a = t.args
        logs = {
            "rollout/num_samples": float(a.rollout.batch_size * a.rollout.n_samples_per_prompt),
            "rollout/reward_mean": reward,
            "actor_lr": 1e-3,
            "kl": 0.0,
            "generated_samples": ["x", 1.0],
        }
        client_states = {
            "episode": 0,
            "global_step": step,
            "total_consumed_prompts": 0,
            "data_loader_state_dict": {},
        }
        t.save_logs_and_checkpoints(step, logs, client_states)
        out.append((logs, client_states))
    return out
