"""The call-log contract: a durable, append-only store of CallRecords and RolloutRecords.

The gateway appends; everything downstream reads. Calls are never replaced: an index is written
once (indices come from `lease_indices`). Implementations must make an appended call
durable against a crash of the writing process once `append_call` has returned.

Blobs (a call's images) are content-addressed: `sha256` is the hex digest of `data`, each distinct
blob is stored once, and `put_blob` returns only once the blob is durable, so a record written after
it can never point at a missing blob (the gateway awaits the put before the call's record).
"""

from __future__ import annotations

from typing import Protocol

from openforgerl.records import CallRecord, RolloutRecord


class CallStore(Protocol):
    """Swappable storage for the call log (SQLite is the embedded default)."""

    async def append_call(self, record: CallRecord) -> None:
        """Persist one finished call; returns once it is durable."""
        ...

    async def append_call_json(self, rollout_id: str, index: int, body: bytes) -> None:
        """`append_call` for a record already serialised (`CallRecord`'s JSON, e.g. from
        `gateway.recording.record_json`): the gateway's hot path."""
        ...

    def append_call_nowait(self, record: CallRecord) -> None:
        """Persist one finished call without awaiting (durable when it returns)."""
        ...

    async def lease_indices(self, rollout_id: str, count: int) -> tuple[int, int]:
        """Reserve call indices `[start, stop)` for `rollout_id` that no writer of this store (in
        any process) has used or will be given: a finished call is never overwritten."""
        ...

    async def put_rollout(self, rollout: RolloutRecord) -> None:
        """Insert or replace a rollout's record."""
        ...

    async def get_rollout(self, rollout_id: str) -> RolloutRecord | None: ...

    async def list_rollouts(self) -> list[RolloutRecord]: ...

    async def list_calls(self, rollout_id: str) -> list[CallRecord]: ...

    async def put_blob(self, sha256: str, data: bytes, media_type: str) -> None:
        """Store `data` under its `sha256` (hex) unless already there; durable once it returns."""
        ...

    async def get_blob(self, sha256: str) -> bytes | None: ...

    def read_blob(self, sha256: str) -> bytes | None:
        """`get_blob` without an event loop (export, CLI)."""
        ...

    async def aclose(self) -> None: ...
