"""Shared helpers for gateway tests (imported by name; conftest.py holds the fixtures)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from openforgerl.engines.openai_compat import OpenAICompatEngine
from openforgerl.engines.scripted import Completion, ScriptedEngine
from openforgerl.gateway.server import RunningGateway, start_gateway
from openforgerl.records import CallRecord
from openforgerl.store.sqlite import SQLiteCallStore

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run a shell command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
        },
    }
]


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


def serve_local_engine(tmp_path_factory: Any, model: str) -> Any:
    """A real local engine process for `model` (module fixtures yield its URL, then close it)."""
    import asyncio

    from openforgerl.engines.local.process import LocalEngineProcess

    proc = asyncio.run(
        LocalEngineProcess.start(model, tmp_path_factory.mktemp(model) / "engine.log", threads=1)
    )
    yield proc.url
    proc.close()


@asynccontextmanager
async def gateway_over(
    engine_url: str, tmp_path: Any
) -> AsyncIterator[tuple[RunningGateway, SQLiteCallStore]]:
    """A gateway in front of the engine at `engine_url`, recording into `tmp_path/calls.db`."""
    store = SQLiteCallStore(tmp_path / "calls.db")
    engine = OpenAICompatEngine(engine_url + "/v1")
    gw = await start_gateway(engine, store)
    try:
        yield gw, store
    finally:
        await gw.aclose()
        await engine.aclose()
        await store.aclose()
