"""Samples -> veRL ``AgentLoopOutput`` rows (plain dicts with exactly veRL's field names).

veRL contract (checked against verl 0.9.1
``verl/experimental/agent_loop/agent_loop.py``):

- **V1 list form** (``trainer.use_v1``): an agent loop may return ``list[AgentLoopOutput]``; the
  last one is the session's final output (its reward is copied to the others and only it enters
  GRPO group statistics). We return every chain with the main agent's final chain last, and ``[]``
  for a dropped (infra-tainted) rollout, which V1 treats as a real drop.
- **Classic form**: exactly one output per input row, no drop. We return the final chain; a dropped
  rollout becomes a placeholder row with an all-zero mask and ``extra_fields.dropped = True`` so a
  mask-aware advantage estimator can keep it out of group statistics (veRL alone would count its
  score). Non-final chains cannot travel on this path; their count is in
  ``extra_fields.chains_not_exported``.

``extra_fields`` (copied by veRL into ``non_tensor_batch``) always carries the same keys, so rows of
a batch union cleanly: ``group_uid`` (our GRPO group; not ``uid``, which veRL's trainer sets itself and
would refuse to union with a different value), ``rollout_id``, ``chain_index``, ``is_final_chain``,
``loss_weight`` (1/chains of the rollout), ``harness``, ``task_id``, ``agent_id``, policy version
min/max (also as ``min_global_steps``/``max_global_steps``, the keys V1's staleness filter reads),
``termination_status``, ``dropped``/``drop_reason``, ``chains_in_rollout``, ``chains_not_exported``,
``call_indices``, ``started_by``, the truncation counts, ``reward_components`` and an empty
``reward_extra_info`` (V1 copies the final output's ``reward_extra_info`` to the others and raises
if it is missing when ``reward_score`` is set; the classic batcher reads its keys from row 0, so it
stays empty and uniform).
"""

from __future__ import annotations

from typing import Any

from openforgerl.records import Sample
from openforgerl.trajectory.reconstruct import ReconstructionResult

AGENT_LOOP_FIELDS = (
    "prompt_ids",
    "response_ids",
    "response_mask",
    "response_logprobs",
    "multi_modal_data",
    "reward_score",
    "num_turns",
    "extra_fields",
)


def agent_loop_output(
    sample: Sample, *, chains_in_rollout: int, chains_not_exported: int = 0
) -> dict[str, Any]:
    """One sample as an ``AgentLoopOutput``-shaped dict."""
    return {
        "prompt_ids": list(sample.prompt_ids),
        "response_ids": list(sample.response_ids),
        "response_mask": list(sample.response_mask),
        "response_logprobs": list(sample.response_logprobs),
        "multi_modal_data": dict(sample.multi_modal_data),
        "reward_score": sample.reward_score,
        "num_turns": sample.num_turns,
        "extra_fields": _extra_fields(sample, chains_in_rollout, chains_not_exported),
    }


def v1_outputs(result: ReconstructionResult) -> list[dict[str, Any]]:
    """veRL V1 list form: all chains, final chain last; ``[]`` when the rollout is dropped."""
    n = len(result.samples)
    return [agent_loop_output(s, chains_in_rollout=n) for s in result.samples]


def classic_output(result: ReconstructionResult, *, placeholder_token_id: int = 0) -> dict[str, Any]:
    """veRL classic form: the final chain, or a flagged all-zero-mask placeholder when dropped."""
    final = result.final_sample
    if final is None:
        return _placeholder(result, placeholder_token_id)
    n = len(result.samples)
    return agent_loop_output(final, chains_in_rollout=n, chains_not_exported=n - 1)


def _extra_fields(sample: Sample, chains_in_rollout: int, chains_not_exported: int) -> dict[str, Any]:
    extra = sample.extra_fields
    return {
        "group_uid": sample.group_id,
        "rollout_id": sample.rollout_id,
        "chain_index": sample.chain_index,
        "is_final_chain": sample.is_final_chain,
        "loss_weight": sample.weight,
        "harness": sample.harness,
        "task_id": sample.task_id,
        "agent_id": sample.agent_id,
        "policy_version_min": sample.policy_version_min,
        "policy_version_max": sample.policy_version_max,
        "min_global_steps": sample.policy_version_min,
        "max_global_steps": sample.policy_version_max,
        "termination_status": sample.status,
        "dropped": False,
        "drop_reason": None,
        "chains_in_rollout": chains_in_rollout,
        "chains_not_exported": chains_not_exported,
        "call_indices": list(extra.get("call_indices", [])),
        "started_by": extra.get("started_by"),
        "prompt_tokens_truncated": int(extra.get("prompt_tokens_truncated", 0)),
        "sampled_tokens_truncated": int(extra.get("sampled_tokens_truncated", 0)),
        "reward_components": dict(extra.get("reward_components", {})),
        "reward_extra_info": {},
    }


def _placeholder(result: ReconstructionResult, token_id: int) -> dict[str, Any]:
    placeholder = Sample(
        prompt_ids=[token_id],
        response_ids=[token_id],
        response_mask=[0],
        response_logprobs=[0.0],
        reward_score=0.0,
        rollout_id=result.rollout_id,
        harness=result.metrics.harness,
        weight=0.0,
    )
    row = agent_loop_output(placeholder, chains_in_rollout=0)
    row["extra_fields"].update(dropped=True, drop_reason=result.dropped_reason)
    return row
