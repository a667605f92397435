#!/usr/bin/env bash
# GRPO on Qwen2.5-Math-1.5B with verl 0.9.1 on one 8-GPU node; the rollout batch (prompts per
# step) and the actor LR follow examples/verl_qwen_math_two_clock.yaml.
#
#   MODEL=/path/to/Qwen2.5-Math-1.5B DATA=/path/to/gsm8k bash examples/verl_qwen_math_two_clock.sh
#   bash examples/verl_qwen_math_two_clock.sh --dry-run      # print the batch plan, run nothing
#
# DATA holds train.parquet / test.parquet as written by verl's examples/data_preprocess/gsm8k.py.
# Extra arguments are passed on (more Hydra overrides, or --dry-run). Records and decisions are
# appended to $RUN_DIR/schedule.jsonl; scheduler state goes beside each checkpoint.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-python3}"
MODEL="${MODEL:-Qwen/Qwen2.5-Math-1.5B}"
DATA="${DATA:-$HOME/data/gsm8k}"
RUN_DIR="${RUN_DIR:-runs/verl_qwen_math_two_clock}"
mkdir -p "$RUN_DIR"

exec "$PYTHON" -m rlvr_schedule_adapters.verl \
    --schedule "$HERE/verl_qwen_math_two_clock.yaml" \
    --jsonl "$RUN_DIR/schedule.jsonl" \
    algorithm.adv_estimator=grpo \
    algorithm.use_kl_in_reward=False \
    data.train_files="$DATA/train.parquet" \
    data.val_files="$DATA/test.parquet" \
    data.train_batch_size=128 \
    data.max_prompt_length=512 \
    data.max_response_length=1024 \
    actor_rollout_ref.model.path="$MODEL" \
    actor_rollout_ref.actor.optim.lr=1e-6 \
    actor_rollout_ref.actor.ppo_mini_batch_size=128 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
    actor_rollout_ref.actor.use_kl_loss=True \
    actor_rollout_ref.actor.kl_loss_coef=0.001 \
    actor_rollout_ref.actor.entropy_coeff=0 \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.n=8 \
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16 \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16 \
    trainer.use_v1=True \
    trainer.logger='["console"]' \
    trainer.project_name=rlvr_schedule \
    trainer.experiment_name=qwen_math_two_clock \
    trainer.default_local_dir="$RUN_DIR/checkpoints" \
    trainer.n_gpus_per_node=8 \
    trainer.nnodes=1 \
    trainer.save_freq=20 \
    trainer.test_freq=10 \
    trainer.total_epochs=15 \
    "$@"
