#!/usr/bin/env bash
# GRPO with veRL (0.9.x) on our Claw tasks, each prompt row run as an openforgerl rollout inside a real
# harness (default: zero) against veRL's own vLLM servers. Needs a GPU node with veRL + vLLM (>= 0.10.2,
# for return_token_ids) + openforgerl installed. Not run on the CPU-only dev machine (see the docstring of
# src/openforgerl/train/verl/agent_loop.py for what was).
#
#   python examples/verl/build_dataset.py --out "$DATA"      # once
#   MODE=v1 bash examples/verl/run_grpo.sh                   # V1 trainer (veRL's default), drops are real
#   MODE=classic bash examples/verl/run_grpo.sh              # legacy trainer + mask-aware estimator
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DATA="${DATA:-$HOME/data/openforgerl-verl}"
MODEL="${MODEL:-Qwen/Qwen3-0.6B}"
MODE="${MODE:-v1}"
NGPUS="${NGPUS:-1}"

if [ "$MODE" = classic ]; then
  USE_V1=false; ADV=openforgerl_grpo   # dropped rollouts are zero-mask placeholders, kept out of group stats
else
  USE_V1=true; ADV=grpo                # dropped rollouts are returned as [] (V1 stores nothing)
fi
# Imported by `import verl` in every process (driver, TaskRunner, workers): registers the agent loop
# and the openforgerl_grpo advantage estimator.
export VERL_USE_EXTERNAL_MODULES=openforgerl.train.verl.agent_loop

ARGS=(
  trainer.use_v1="$USE_V1"
  algorithm.adv_estimator="$ADV"
  algorithm.use_kl_in_reward=false
  data.train_files="$DATA/train.parquet"
  data.val_files="$DATA/val.parquet"
  data.return_raw_chat=true
  data.train_batch_size=16
  data.max_prompt_length=4096
  data.max_response_length=8192
  actor_rollout_ref.model.path="$MODEL"
  actor_rollout_ref.actor.optim.lr=1e-6
  actor_rollout_ref.actor.ppo_mini_batch_size=16
  actor_rollout_ref.actor.use_kl_loss=false
  actor_rollout_ref.rollout.name=vllm
  actor_rollout_ref.rollout.mode=async
  actor_rollout_ref.rollout.n=8
  actor_rollout_ref.rollout.calculate_log_probs=true
  actor_rollout_ref.rollout.tensor_model_parallel_size=1
  actor_rollout_ref.rollout.gpu_memory_utilization=0.5
  actor_rollout_ref.rollout.agent.num_workers=4
  actor_rollout_ref.rollout.agent.default_agent_loop=openforgerl
  actor_rollout_ref.rollout.agent.agent_loop_config_path="$HERE/agent_loop.yaml"
  ++actor_rollout_ref.rollout.engine_kwargs.vllm.enable_auto_tool_choice=true
  ++actor_rollout_ref.rollout.engine_kwargs.vllm.tool_call_parser=hermes
  ++ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES="$VERL_USE_EXTERNAL_MODULES"
  trainer.n_gpus_per_node="$NGPUS"
  trainer.nnodes=1
  trainer.total_epochs=5
  trainer.test_freq=5
  trainer.save_freq=-1
  trainer.logger='["console"]'
  trainer.project_name=openforgerl
  trainer.experiment_name="claw-zero-$MODE"
)

# DRY_RUN=1 prints the overrides (one per line) instead of launching: tests/train/test_verl_agent_loop.py
# composes them with veRL's own Hydra config to check every key exists.
if [ "${DRY_RUN:-0}" = 1 ]; then printf '%s\n' "${ARGS[@]}" "$@"; exit 0; fi
exec python -m verl.trainer.main_ppo "${ARGS[@]}" "$@"
