"""A real gateway (scripted engine: the only double, for the model's decisions), real bubblewrap
sandboxes and the real orchestrator (`run_batch`), as the suite's rollout tests need them. The
orchestrator and attack suites each built this; `open_rollout_env` is the one copy."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openforgerl.engines.scripted import Faults, ScriptedEngine, Turn
from openforgerl.gateway.server import RunningGateway, start_gateway
from openforgerl.orchestrator.batch import BatchResult, run_batch
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.orchestrator.results import ResultSink
from openforgerl.sandbox.local import LocalBackend
from openforgerl.store.sqlite import SQLiteCallStore


@dataclass
class RolloutEnv:
    gateway: RunningGateway
    engine: ScriptedEngine
    store: SQLiteCallStore
    backend: LocalBackend
    results: Path

    async def run(self, tasks: list[Any], harness: Any, **config: Any) -> BatchResult:
        """One rollout per task by default (group_size=1, no retries); `config`
        overrides OrchestratorConfig."""
        cfg = OrchestratorConfig(**{"group_size": 1, "min_group_size": 1, "retries": 0, **config})
        return await run_batch(
            tasks,
            harness,
            gateway=self.gateway.access,
            backend=self.backend,
            config=cfg,
            sink=ResultSink(self.results),
        )


def answer_done(turn: Turn) -> str:
    return "done"


@asynccontextmanager
async def open_rollout_env(
    root: Path,
    policy: Callable[[Turn], str] = answer_done,
    *,
    faults: Faults | None = None,
    ro_binds: Sequence[Path] = (),
    **gateway_options: Any,
) -> AsyncIterator[RolloutEnv]:
    """Gateway + store + sandboxes under `root`, closed in reverse order."""
    store = SQLiteCallStore(root / "calls.db")
    engine = ScriptedEngine(policy, faults=faults)
    gateway = await start_gateway(engine, store, **gateway_options)
    backend = LocalBackend(root=root / "sbx", ro_binds=list(ro_binds))
    try:
        yield RolloutEnv(gateway, engine, store, backend, root / "results.jsonl")
    finally:
        for closer in (backend, gateway, store):
            await closer.aclose()
