#!/usr/bin/env bash
# OpenRLHF 0.11.2 GRPO on a math dataset under the two-clock rollout-batch schedule.
#
# Needs GPUs (OpenRLHF trains with DeepSpeed on CUDA and generates with vLLM); on this project's
# CPU machines only the adapter's tests run (nox -s openrlhf). Set MODEL, DATA (JSONL with
# "prompt" and "answer"), REWARD_PY (an OpenRLHF reward_func file) and GPUS to your set-up.
#
# The launcher patches OpenRLHF's PPOTrainer / PolicyModelActor Ray actors, checks the set-up
# against the schedule (warnings at start), then runs openrlhf.cli.train_ppo_ray with the rest of
# the command line. The schedule's stage 0 batch should equal --train.batch_size (the LR schedule
# length and the dataset plan are computed from the command line).
set -euo pipefail

MODEL=${MODEL:-Qwen/Qwen2.5-Math-1.5B}
DATA=${DATA:-./data/math_train.jsonl}
REWARD_PY=${REWARD_PY:-./reward_math.py}
GPUS=${GPUS:-8}
GROUP=8                       # rollouts per prompt (GRPO group)
OUT=${OUT:-./runs/openrlhf_qwen_math_two_clock}
mkdir -p "$OUT"

# Two-clock schedule: start at 256 rollouts per update (32 prompts x 8) and grow the batch by the
# default factor 1.68 at the held LR before the failure clock runs out (every key not set here is
# PolicyConfig's default). Batches must be whole groups and split over GPUS x micro-batch 4:
# divisor = GPUS x 4.
# changed: initial_batch base_batch hysteresis_samples max_stages constraints
cat > "$OUT/schedule.yaml" <<YAML
type: two_clock
initial_batch: 256
base_lr: 1.0e-6
base_batch: 256
lr_rule: sqrt
hysteresis_samples: 768
max_stages: 4
failure_signal: entropy
constraints: {group_size: ${GROUP}, divisor: $((GPUS * 4)), max_batch: 2048}
YAML

python -m rlvr_schedule_adapters.openrlhf --schedule "$OUT/schedule.yaml" \
  --actor.model_name_or_path "$MODEL" \
  --actor.num_nodes 1 --actor.num_gpus_per_node "$GPUS" \
  --ref.num_nodes 1 --ref.num_gpus_per_node "$GPUS" \
  --vllm.num_engines "$GPUS" --vllm.tensor_parallel_size 1 --vllm.gpu_memory_utilization 0.5 \
  --train.colocate_all --vllm.enable_sleep --ds.enable_sleep \
  --data.prompt_dataset "$DATA" --data.input_key prompt --data.label_key answer --data.apply_chat_template \
  --reward.remote_url "$REWARD_PY" \
  --algo.advantage.estimator group_norm --algo.kl.use_loss --algo.kl.estimator k3 --algo.kl.init_coef 1e-3 \
  --actor.entropy_coef 0 \
  --rollout.n_samples_per_prompt "$GROUP" \
  --rollout.batch_size 32 --train.batch_size 256 \
  --rollout.micro_batch_size 8 --train.micro_batch_size 4 \
  --rollout.max_new_tokens 2048 --data.max_len 3072 \
  --actor.adam.lr 1e-6 --actor.lr_scheduler constant \
  --ds.zero_stage 2 --ds.param_dtype bf16 \
  --ckpt.path "$OUT/ckpt" --ckpt.save_steps 20 --ckpt.load_enable \
  --logger.tensorboard_dir "$OUT/tb"
# --actor.entropy_coef 0 makes OpenRLHF log entropy_loss (the policy entropy) without changing the
# loss: the failure clock forecasts collapse from it. After the run:
#   rlvr-schedule report "$OUT/tb"   (reads the TensorBoard scalars, rlvr/* included)
