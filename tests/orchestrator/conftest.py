"""A real gateway (scripted engine: the only double) + real bubblewrap sandboxes + run_batch."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from orch_helpers import AGENT

from openforgerl.engines.scripted import Faults, ScriptedEngine, Turn
from openforgerl.gateway.server import RunningGateway, start_gateway
from openforgerl.orchestrator.batch import BatchResult, run_batch
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.orchestrator.results import ResultSink
from openforgerl.sandbox.local import LocalBackend
from openforgerl.store.sqlite import SQLiteCallStore


@dataclass
class Env:
    gateway: RunningGateway
    engine: ScriptedEngine
    store: SQLiteCallStore
    backend: LocalBackend
    results: Path

    async def run(self, tasks: list[Any], harness: Any, **config: Any) -> BatchResult:
        cfg = OrchestratorConfig(**{"n": 1, "min_group_size": 1, "max_retries": 0, **config})
        sink = ResultSink(self.results)
        return await run_batch(tasks, harness, gateway=self.gateway.access, backend=self.backend,
                               config=cfg, sink=sink)


def magic_policy(turn: Turn) -> str:
    return "The magic word is abracadabra."


@pytest.fixture
async def make_env(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    closers: list[Any] = []

    async def make(policy: Callable[[Turn], str] = magic_policy, faults: Faults | None = None,
                   **gw_kw: Any) -> Env:
        store = SQLiteCallStore(tmp_path / "calls.db")
        engine = ScriptedEngine(policy, faults=faults)
        gateway = await start_gateway(engine, store, **gw_kw)
        backend = LocalBackend(root=tmp_path / "sbx", ro_binds=[AGENT.parent])  # the test harness
        closers.extend([store, gateway, backend])
        return Env(gateway, engine, store, backend, tmp_path / "results.jsonl")

    yield make
    for c in reversed(closers):
        await c.aclose()
