"""One finished rollout -> what our veRL agent loop returns (pure; rows are plain dicts).

Built on ``openforgerl.export`` (``v1_outputs`` / ``classic_output``), which gives rows with exactly
``AgentLoopOutput``'s fields. Added here, for rows that leave a training run:

- a rollout the orchestrator kept out of the batch (infra fault after retries, or a timeout under
  ``timeout_policy="drop"``) is dropped even when reconstruction alone would train it;
- on the V1 path veRL passes ``global_steps`` (the step whose weights served the rollout); it becomes
  ``min_global_steps``/``max_global_steps``, the tags V1's staleness filter reads. Our gateway's own
  policy version knows nothing of veRL's weight updates, so it stays in ``policy_version_*`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openforgerl.export.verl import classic_output, v1_outputs
from openforgerl.records import CallRecord, RolloutRecord
from openforgerl.trajectory import (
    ReconstructionOptions,
    ReconstructionResult,
    RolloutMetrics,
    reconstruct_samples,
)


def drop_reason(record: RolloutRecord) -> str | None:
    """Why the orchestrator kept this rollout out of the batch (None: it is in)."""
    if record.metadata.get("in_batch", True):
        return None
    reason = str(record.metadata.get("drop_reason") or "not_in_batch")
    if record.status is not None:
        reason = f"{reason}:{record.status.value}"
    error = str(record.metadata.get("error") or "")
    return f"{reason} ({error[:200]})" if error else reason


def reconstruct(record: RolloutRecord, calls: Sequence[CallRecord],
                options: ReconstructionOptions) -> ReconstructionResult:
    """Samples of one rollout; none (with the reason) when the orchestrator dropped it."""
    reason = drop_reason(record)
    if reason is None:
        return reconstruct_samples(calls, record, options=options)
    metrics = RolloutMetrics(rollout_id=record.rollout_id, harness=record.harness, calls=len(calls),
                             dropped_reason=f"orchestrator:{reason}")
    return ReconstructionResult(record.rollout_id, (), metrics, f"orchestrator:{reason}")


def _with_steps(row: dict[str, Any], global_steps: int | None) -> dict[str, Any]:
    if global_steps is not None:
        row["extra_fields"].update(min_global_steps=int(global_steps), max_global_steps=int(global_steps))
    return row


def v1_rows(result: ReconstructionResult, *, global_steps: int | None = None) -> list[dict[str, Any]]:
    """V1 form: every chain, final chain last; ``[]`` when dropped (V1 stores nothing: a real drop)."""
    return [_with_steps(row, global_steps) for row in v1_outputs(result)]


def classic_row(result: ReconstructionResult, *, pad_token_id: int = 0,
                global_steps: int | None = None) -> dict[str, Any]:
    """Classic form: the final chain, or an all-zero-mask placeholder flagged ``dropped``."""
    return _with_steps(classic_output(result, placeholder_token_id=pad_token_id), global_steps)


def is_dropped_row(row: dict[str, Any]) -> bool:
    """A classic placeholder: trains nothing and must stay out of GRPO statistics."""
    return bool(row["extra_fields"].get("dropped")) or not any(row["response_mask"])
