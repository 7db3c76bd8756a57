"""Every real harness CLI inside the real local sandbox (bubblewrap, loopback-only network), driven by the
real orchestrator through the real gateway: verifier reward 1 and the scripted tool call trained (mask 1).

The sandbox has no route off the machine, so this also checks that no CLI needs the internet at startup.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_e2e import (
    contains,
    masked_runs,
    proof_content,
    require_installed,
    tool_call_completions,
)

from openforgerl.engines.scripted import MODEL_NAME, ScriptedEngine
from openforgerl.gateway.server import start_gateway
from openforgerl.harness.registry import get_harness
from openforgerl.harness.scripted_policy import proof_policy
from openforgerl.orchestrator.batch import run_batch
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.records import RolloutStatus
from openforgerl.sandbox.local import LocalBackend
from openforgerl.store.sqlite import SQLiteCallStore
from openforgerl.testing.tasks import ProofFileTask
from openforgerl.trajectory.reconstruct import reconstruct_samples

pytestmark = [pytest.mark.harness, pytest.mark.timeout(600)]

NAMES = ["zero", "codex", "claude_code", "qwen_code", "opencode", "mini_swe_agent", "openclaw-completions"]


@pytest.mark.parametrize("name", NAMES)
async def test_cli_in_sandbox_via_orchestrator(name: str, tmp_path: Path) -> None:
    tools = require_installed(name) if name != "zero" else tmp_path
    task = ProofFileTask(proof_content(), exact=True, budget_s=240.0)
    engine = ScriptedEngine(proof_policy(task.expected))
    store = SQLiteCallStore(tmp_path / "calls.db")
    gateway = await start_gateway(engine, store, call_deadline_s=60.0)
    backend = LocalBackend(root=tmp_path / "sbx")
    config = OrchestratorConfig(
        group_size=1, min_group_size=1, retries=0, model=MODEL_NAME, harness_cache=tools
    )
    try:
        batch = await run_batch(
            [task], get_harness(name), gateway=gateway.access, backend=backend, config=config
        )
        [record] = batch.records
        calls = await store.list_calls(record.rollout_id)
    finally:
        await gateway.aclose()
        await backend.aclose()
        await store.aclose()
    assert record.status == RolloutStatus.OK and record.reward == 1.0, (record, record.metadata)
    result = reconstruct_samples(calls, record)
    runs = [r for s in result.samples for r in masked_runs(s)]
    assert all(any(contains(r, c.ids) for r in runs) for c in tool_call_completions(engine)), result.metrics
    assert tool_call_completions(engine)
