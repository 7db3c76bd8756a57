"""One finished rollout -> what our veRL agent loop returns (pure; rows are plain dicts).

Built on ``openforgerl.export`` (``v1_outputs`` / ``classic_output``), which gives rows with exactly
``AgentLoopOutput``'s fields. What becomes a row is decided by the one rule export and the built-in
trainer use too, ``trajectory.trainable`` (via ``reconstruct_samples``): a rollout the orchestrator
kept out of the batch (infra fault after retries, a timeout under ``timeout_policy="drop"``, a group
below its minimum size), or that it never judged, gives no samples. Added here, for rows that leave
a training run: on the V1 path veRL passes ``global_steps`` (the step whose weights served the
rollout); it becomes ``min_global_steps``/``max_global_steps``, the tags V1's staleness filter reads.
Our gateway's own policy version knows nothing of veRL's weight updates, so it stays in
``policy_version_*`` only. Images: the rows veRL gets hold PIL images in ``multi_modal_data["images"]``
(what its Qwen-VL processing consumes), loaded from the worker's call-log blobs (``with_pil_images``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openforgerl.export.images import BlobReader, ImageMode, check_sample_images, export_multi_modal_data
from openforgerl.export.verl import classic_output, v1_outputs
from openforgerl.records import CallRecord, RolloutRecord
from openforgerl.trajectory import ReconstructionOptions, ReconstructionResult, reconstruct_samples


def rollout_rows(
    record: RolloutRecord,
    calls: Sequence[CallRecord],
    *,
    mode: str,
    options: ReconstructionOptions,
    global_steps: int | None = None,
    pad_token_id: int = 0,
) -> list[dict[str, Any]] | dict[str, Any]:
    """A finished rollout as the agent loop returns it, in plain dicts: V1 list or one classic row."""
    result = reconstruct(record, calls, options)
    if mode == "v1":
        return v1_rows(result, global_steps=global_steps)
    return classic_row(result, pad_token_id=pad_token_id, global_steps=global_steps)


def reconstruct(
    record: RolloutRecord, calls: Sequence[CallRecord], options: ReconstructionOptions
) -> ReconstructionResult:
    """Samples of one rollout; none (with the reason) when `trainable` says no; pad counts checked."""
    result = reconstruct_samples(calls, record, options=options)
    for sample in result.samples:
        check_sample_images(sample, options.image_token_id)
    return result


def with_pil_images(
    rows: list[dict[str, Any]] | dict[str, Any], read_blob: BlobReader
) -> list[dict[str, Any]] | dict[str, Any]:
    """Rows whose image references became PIL images (veRL's ``AgentLoopOutput.multi_modal_data``)."""
    for row in rows if isinstance(rows, list) else [rows]:
        if row.get("multi_modal_data"):
            row["multi_modal_data"] = export_multi_modal_data(
                row["multi_modal_data"], ImageMode.PIL, read_blob
            )
    return rows


def _with_steps(row: dict[str, Any], global_steps: int | None) -> dict[str, Any]:
    if global_steps is not None:
        row["extra_fields"].update(min_global_steps=int(global_steps), max_global_steps=int(global_steps))
    return row


def v1_rows(result: ReconstructionResult, *, global_steps: int | None = None) -> list[dict[str, Any]]:
    """V1 form: every chain, final chain last; ``[]`` when dropped (V1 stores nothing: a real drop)."""
    return [_with_steps(row, global_steps) for row in v1_outputs(result)]


def classic_row(
    result: ReconstructionResult, *, pad_token_id: int = 0, global_steps: int | None = None
) -> dict[str, Any]:
    """Classic form: the final chain, or an all-zero-mask placeholder flagged ``dropped``."""
    return _with_steps(classic_output(result, placeholder_token_id=pad_token_id), global_steps)


def is_dropped_row(row: dict[str, Any]) -> bool:
    """A classic placeholder: trains nothing and must stay out of GRPO statistics."""
    return bool(row["extra_fields"].get("dropped")) or not any(row["response_mask"])
