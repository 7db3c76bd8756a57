#!/usr/bin/env bash
# GRPO with veRL (0.9.x) on our Claw tasks, each prompt row run as an openforgerl rollout inside a real
# harness (default: zero) against veRL's own vLLM servers. Needs a GPU node with veRL + vLLM (>= 0.10.2,
# for return_token_ids) + openforgerl installed. Not run on the CPU-only dev machine (see the docstring of
# src/openforgerl/compose/verl_loop.py for what was).
#
#   python examples/verl/build_dataset.py --out "$DATA"      # once
#   bash examples/verl/run_grpo.sh                           # classic trainer + mask-aware estimator
#   MODE=v1 bash examples/verl/run_grpo.sh                   # V1 trainer: needs veRL's TransferQueue
#                                                            # (pip install 'verl[verl-core]' or TransferQueue)
#   HARNESS=codex bash examples/verl/run_grpo.sh             # lengths sized for that harness's prompt
#
# MODE defaults to classic because veRL 0.9.1's V1 trainer imports TransferQueue, which plain `pip install
# verl` does not bring. Qwen3 is served with the same parsers our local engine imitates
# (--reasoning-parser qwen3 --tool-call-parser hermes); set REASONING_PARSER= for a model without thinking.
#
# Prompt/response lengths: rollout.prompt_length bounds a chain's whole prompt — the harness's own system
# prompt and tool definitions come first. Measured first-call prompts (Qwen3 tokenizer, our Claw tasks):
# zero ~1.5k tokens, Qwen Code ~8.9k, Codex ~14k, Claude Code ~29k. The default fits Claude Code and Codex;
# HARNESS=zero shrinks it.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DATA="${DATA:-$HOME/data/openforgerl-verl}"
MODEL="${MODEL:-Qwen/Qwen3-0.6B}"
MODE="${MODE:-classic}"
NGPUS="${NGPUS:-1}"
HARNESS="${HARNESS:-any}"
REASONING_PARSER="${REASONING_PARSER-qwen3}"
case "$HARNESS" in
  zero)      PROMPT_LEN=4096;  RESPONSE_LEN=8192 ;;
  qwen_code) PROMPT_LEN=16384; RESPONSE_LEN=16384 ;;
  codex)     PROMPT_LEN=20480; RESPONSE_LEN=16384 ;;
  *)         PROMPT_LEN=36864; RESPONSE_LEN=16384 ;;   # claude_code, opencode, openclaw, mixes
esac

if [ "$MODE" = classic ]; then
  USE_V1=false; ADV=openforgerl_grpo   # dropped rollouts are zero-mask placeholders, kept out of group stats
else
  USE_V1=true; ADV=grpo                # dropped rollouts are returned as [] (V1 stores nothing)
fi
# Imported by `import verl` in every process (driver, TaskRunner, workers): registers the agent loop
# and the openforgerl_grpo advantage estimator.
export VERL_USE_EXTERNAL_MODULES=openforgerl.compose.verl_loop

ARGS=(
  trainer.use_v1="$USE_V1"
  algorithm.adv_estimator="$ADV"
  algorithm.use_kl_in_reward=false
  data.train_files="$DATA/train.parquet"
  data.val_files="$DATA/val.parquet"
  data.return_raw_chat=true
  data.train_batch_size=16
  data.max_prompt_length="$PROMPT_LEN"
  data.max_response_length="$RESPONSE_LEN"
  actor_rollout_ref.rollout.prompt_length="$PROMPT_LEN"
  actor_rollout_ref.rollout.response_length="$RESPONSE_LEN"
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
  ${REASONING_PARSER:+++actor_rollout_ref.rollout.engine_kwargs.vllm.reasoning_parser=$REASONING_PARSER}
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
