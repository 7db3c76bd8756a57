"""The call-log contract: a durable, append-only store of CallRecords and RolloutRecords.

The gateway appends; everything downstream reads. Calls are never replaced: an index is written
once (indices come from `lease_indices`). A call arrives as its stored JSON, written by the one
record encoder (`records.encode_record`, which the gateway's `recording.record_json` uses): the
store never encodes a record itself. Online readers are async; offline tools (export, CLI) use the
synchronous `read_*` ones, with no event loop.

Blobs (a call's images) are content-addressed: `sha256` is the hex digest of `data`, each distinct
blob is stored once, and `put_blob` returns only once the blob is durable, so a record written after
it can never point at a missing blob (the gateway awaits the put before the call's record).
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Awaitable, Generator
from dataclasses import dataclass
from typing import Protocol, TypeVar

from openforgerl.records import CallRecord, RolloutRecord


class CallStore(Protocol):
    """Swappable storage for the call log (SQLite is the embedded default)."""

    def append_call(self, rollout_id: str, index: int, body: bytes) -> Awaitable[None]:
        """Persist one finished call, `body` being its stored JSON (`record_json`, or
        `CallRecord.stored_json()`). Durable once the returned awaitable is done. A caller that
        cannot await (a cancelled call) may drop it: the call must then still be durable against a
        crash of the writing process once this returns (the embedded store journals it here)."""
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

    def read_rollouts(self) -> list[RolloutRecord]:
        """`list_rollouts` without an event loop (export, CLI)."""
        ...

    def read_calls(self, rollout_id: str) -> list[CallRecord]:
        """`list_calls` without an event loop."""
        ...

    def read_rollout_ids_with_calls(self) -> list[str]:
        """Every rollout id some call names, in first-call order (a rollout may have calls but no record)."""
        ...

    async def put_blob(self, sha256: str, data: bytes, media_type: str) -> None:
        """Store `data` under its `sha256` (hex) unless already there; durable once it returns."""
        ...

    async def get_blob(self, sha256: str) -> bytes | None: ...

    def read_blob(self, sha256: str) -> bytes | None:
        """`get_blob` without an event loop (export, CLI)."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class FlowState:
    """Whether the gateway replicas sharing a store admit calls, and the policy version they stamp;
    `seq` orders the changes (a replica applies a newer one only). Kept by stores that several
    processes share (PostgreSQL: `set_flow`, `watch_flow`); the embedded store has none."""

    seq: int
    paused: bool
    policy_version: int

    def payload(self) -> str:
        return f"{self.seq}:{int(self.paused)}:{self.policy_version}"

    @classmethod
    def parse(cls, payload: str) -> FlowState | None:
        """The state a notification carries, or None when it is not one (anyone may NOTIFY)."""
        try:
            seq, paused, version = (int(part) for part in payload.split(":"))
        except ValueError:
            return None
        return cls(seq, bool(paused), version)


class _Appended:
    """An awaitable that is already done: what an append returns once its call is durable (no future to
    make)."""

    def __await__(self) -> Generator[None, None, None]:
        yield from ()


APPENDED = _Appended()


def can_wait() -> bool:
    """A running loop whose current task is not being cancelled (so the caller can await a commit)."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop in this thread
        return False
    return task is not None and not task.cancelling()


_Job = TypeVar("_Job")


def drain(jobs: queue.SimpleQueue[_Job | None], first: _Job, limit: int = 4096) -> tuple[list[_Job], bool]:
    """`first` and whatever else is already queued (at most `limit` in all: one transaction's batch), and
    whether the stop sentinel (None) came among them."""
    batch = [first]
    while len(batch) < limit:
        try:
            more = jobs.get_nowait()
        except queue.Empty:
            return batch, False
        if more is None:
            return batch, True
        batch.append(more)
    return batch, False
