"""Where finished rollouts go besides the gateway: a results JSONL, one line per attempt.

The rollout record itself has one writer, the gateway (the orchestrator reports its verdict through
`POST /rollouts/{id}/outcome`); this sink only appends what the gateway stored, for humans and tools.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from openforgerl.records import RolloutRecord

__all__ = ["ResultSink"]


class ResultSink:
    """Append-only: one JSON line per rollout attempt, in completion order."""

    def __init__(self, jsonl: Path) -> None:
        self.jsonl = jsonl
        self._lock = asyncio.Lock()
        jsonl.parent.mkdir(parents=True, exist_ok=True)

    async def write(self, record: RolloutRecord) -> RolloutRecord:
        async with self._lock:
            await asyncio.to_thread(self._append, record.model_dump_json() + "\n")
        return record

    def _append(self, line: str) -> None:
        with self.jsonl.open("a") as fh:
            fh.write(line)
