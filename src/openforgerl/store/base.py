"""The call-log contract: a durable, append-only store of CallRecords and RolloutRecords.

The gateway appends; everything downstream reads. Implementations must make an appended call
durable against a crash of the writing process once `append_call` has returned.
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

    async def put_rollout(self, rollout: RolloutRecord) -> None:
        """Insert or replace a rollout's record."""
        ...

    async def get_rollout(self, rollout_id: str) -> RolloutRecord | None: ...

    async def list_rollouts(self) -> list[RolloutRecord]: ...

    async def list_calls(self, rollout_id: str) -> list[CallRecord]: ...

    async def aclose(self) -> None: ...
