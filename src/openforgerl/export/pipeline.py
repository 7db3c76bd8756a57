"""Call log -> reconstruction results -> export rows (the I/O lives here, not in trajectory/).

Which rollouts become rows is decided by `trajectory.trainable` (inside `reconstruct_samples`), the
rule the built-in trainer and the veRL loop share: only rollouts the orchestrator judged in the batch,
in a valid group, with a reward and no infra fault. Every row carries its rollout's status
(`status` in `parquet`, `extra_fields.termination_status` in `verl`/`jsonl`).

Images (`export/images.py`): rows hold references to the call log's blobs by default (`ImageMode.REF`),
the bytes inline with `ImageMode.INLINE` (`--inline-images`), or PIL images (`ImageMode.PIL`, veRL's
in-memory `AgentLoopOutput` form). Every sample's pad count is checked before a row is made.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from openforgerl.export.images import BlobReader, ImageMode, check_sample_images, export_multi_modal_data
from openforgerl.export.verl import classic_output, v1_outputs
from openforgerl.export.writers import write_jsonl, write_parquet
from openforgerl.records import RolloutRecord, Sample
from openforgerl.store.base import CallStore
from openforgerl.trajectory import ReconstructionOptions, ReconstructionResult, reconstruct_samples

SAMPLE_COLUMNS = tuple(Sample.model_fields)


class ExportFormat(StrEnum):
    VERL = "verl"  # Parquet of AgentLoopOutput rows (V1: all chains, final last; or --classic)
    PARQUET = "parquet"  # Parquet of full Sample records
    JSONL = "jsonl"  # JSON lines of AgentLoopOutput rows


def reconstruct_log(reader: CallStore, options: ReconstructionOptions) -> Iterator[ReconstructionResult]:
    """Every rollout in the log; rollouts with calls but no record get a bare record (never trained)."""
    rollouts = {r.rollout_id: r for r in reader.read_rollouts()}
    for rid in reader.read_rollout_ids_with_calls():
        rollouts.setdefault(rid, RolloutRecord(rollout_id=rid))
    for rollout in rollouts.values():
        yield reconstruct_samples(reader.read_calls(rollout.rollout_id), rollout, options=options)


def export_rows(
    results: Sequence[ReconstructionResult],
    fmt: ExportFormat,
    *,
    classic: bool,
    images: ImageMode = ImageMode.REF,
    read_blob: BlobReader | None = None,
    blob_store: str | None = None,
    image_token_id: int | None = None,
) -> list[dict[str, Any]]:
    """Rows of ``fmt``; image references resolved per ``images`` (``read_blob`` for inline/PIL).
    ``image_token_id``: the pad id to check counts with where a sample has no processor identity."""
    for r in results:
        for sample in r.samples:
            check_sample_images(sample, image_token_id)
    rows = _rows(results, fmt, classic=classic)
    for row in rows:
        if row.get("multi_modal_data"):
            row["multi_modal_data"] = export_multi_modal_data(
                row["multi_modal_data"], images, read_blob, blob_store
            )
    return rows


def _rows(
    results: Sequence[ReconstructionResult], fmt: ExportFormat, *, classic: bool
) -> list[dict[str, Any]]:
    if fmt is ExportFormat.PARQUET:
        return [s.model_dump() for r in results for s in r.samples]
    if classic:  # offline there is no input row to stand in for: a dropped rollout gives no row
        return [classic_output(r) for r in results if r.samples]
    return [row for r in results for row in v1_outputs(r)]


def write_rows(rows: list[dict[str, Any]], fmt: ExportFormat, out: Path) -> None:
    if fmt is ExportFormat.JSONL:
        write_jsonl(rows, out)
    elif fmt is ExportFormat.PARQUET:
        write_parquet(rows, out, columns=SAMPLE_COLUMNS)
    else:
        write_parquet(rows, out)
