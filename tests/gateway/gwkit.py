"""Shared helpers for gateway tests (imported by name; conftest.py holds the fixtures)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openforgerl.engines.scripted import Completion, ScriptedEngine
from openforgerl.gateway.server import RunningGateway
from openforgerl.records import CallRecord
from openforgerl.store.sqlite import SQLiteCallStore

TOOLS = [{"type": "function", "function": {
    "name": "bash", "description": "run a shell command",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}}]


@dataclass
class Setup:
    gateway: RunningGateway
    engine: ScriptedEngine
    store: SQLiteCallStore

    async def rollout(self, **spec: Any) -> dict[str, str]:
        return await self.gateway.open_rollout(**spec)

    async def records(self, rollout_id: str) -> list[CallRecord]:
        return await self.store.list_calls(rollout_id)


def assert_exact(records: list[CallRecord], produced: list[Completion]) -> None:
    """Every recorded id and logprob is exactly what the engine produced, call by call."""
    assert len(records) == len(produced)
    for rec, done in zip(records, produced, strict=True):
        assert rec.prompt_token_ids == done.prompt_ids
        assert rec.completion_token_ids == done.ids
        assert rec.completion_logprobs == done.logprobs
        assert rec.finish_reason == done.finish_reason
        assert rec.error is None
