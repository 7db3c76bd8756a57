"""Where finished rollouts go: the call store (`put_rollout`) and a results JSONL.

When the store is the one the gateway writes to, the gateway's own record of the rollout (opened,
tainted, policy versions, closed) is merged with ours; ours wins on every field we set.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from openforgerl.records import RolloutRecord
from openforgerl.store.base import CallStore

__all__ = ["ResultSink"]


class ResultSink:
    """Append-only: one JSON line per rollout attempt, in completion order."""

    def __init__(self, store: CallStore | None = None, jsonl: Path | None = None) -> None:
        self.store = store
        self.jsonl = jsonl
        self._lock = asyncio.Lock()
        if jsonl is not None:
            jsonl.parent.mkdir(parents=True, exist_ok=True)

    async def write(self, record: RolloutRecord) -> RolloutRecord:
        merged = await self._merge(record)
        if self.store is not None:
            await self.store.put_rollout(merged)
        if self.jsonl is not None:
            async with self._lock:
                await asyncio.to_thread(self._append, merged.model_dump_json() + "\n")
        return merged

    async def _merge(self, record: RolloutRecord) -> RolloutRecord:
        if self.store is None:
            return record
        existing = await self.store.get_rollout(record.rollout_id)
        if existing is None:
            return record
        versions = sorted(set(existing.policy_versions) | set(record.policy_versions))
        meta = {**existing.metadata, **record.metadata}
        return record.model_copy(update={"policy_versions": versions, "metadata": meta,
                                         "started_at": existing.started_at or record.started_at})

    def _append(self, line: str) -> None:
        assert self.jsonl is not None
        with self.jsonl.open("a") as fh:
            fh.write(line)
