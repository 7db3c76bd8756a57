"""Shared fixtures for the attack suite: a real gateway (scripted engine: the only double), real
bubblewrap sandboxes and the real orchestrator (`run_batch`). The harness is a shell script — the
attacker — run exactly as a harness CLI would be (`attacker()` in the attack tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from openforgerl.engines.scripted import ScriptedEngine, Turn
from openforgerl.gateway.server import RunningGateway, start_gateway
from openforgerl.orchestrator.batch import BatchResult, run_batch
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.orchestrator.results import ResultSink
from openforgerl.sandbox.local import LocalBackend
from openforgerl.store.sqlite import SQLiteCallStore

SUITE = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/suites/claw"


@dataclass
class AttackEnv:
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


def _policy(turn: Turn) -> str:
    return "done"


@pytest.fixture
async def attack_env(tmp_path: Path) -> AsyncIterator[AttackEnv]:
    store = SQLiteCallStore(tmp_path / "calls.db")
    engine = ScriptedEngine(_policy)
    gateway = await start_gateway(engine, store)
    backend = LocalBackend(root=tmp_path / "sbx")
    env = AttackEnv(gateway, engine, store, backend, tmp_path / "results.jsonl")
    yield env
    for closer in (backend, gateway, store):
        await closer.aclose()


@pytest.fixture
def claw_task() -> Callable[[str], Any]:
    """A real task of the built-in suite, as the orchestrator runs it (service + checks verifier)."""
    from openforgerl.envs.runtime import load_runtime

    return lambda name: load_runtime(SUITE / name)
