"""Every real harness CLI inside the real local sandbox (bubblewrap, loopback-only network), driven by the
real orchestrator through the real gateway: verifier reward 1 and the scripted tool call trained (mask 1).

The sandbox has no route off the machine, so this also checks that no CLI needs the internet at startup.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness_e2e import (
    INSTRUCTION,
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
from openforgerl.orchestrator.task_protocol import TaskDefaults, Verdict
from openforgerl.records import RolloutStatus
from openforgerl.sandbox.base import Sandbox
from openforgerl.sandbox.local import LocalBackend
from openforgerl.store.sqlite import SQLiteCallStore
from openforgerl.trajectory.reconstruct import reconstruct_samples

pytestmark = [pytest.mark.harness, pytest.mark.timeout(600)]

NAMES = ["zero", "codex", "claude_code", "qwen_code", "opencode", "mini_swe_agent", "openclaw-completions"]


@dataclass
class ProofFileTask(TaskDefaults):
    """proof.txt must hold exactly `content` (a fresh value per test, so no stale file can pass)."""

    content: str
    task_id: str = "proof-file"
    budget_s: float = 240.0

    @property
    def instruction(self) -> str:
        return INSTRUCTION.format(content=self.content)

    def files(self) -> Mapping[str, bytes]:
        return {"README.md": b"Write proof.txt as asked.\n"}

    async def verify(self, sandbox: Sandbox) -> Verdict:
        try:
            text = (await sandbox.read_file("/workdir/proof.txt")).decode()
        except FileNotFoundError:
            return Verdict(0.0, {}, "proof.txt missing")
        return Verdict(float(text == self.content), {}, f"proof.txt = {text!r}")


@pytest.mark.parametrize("name", NAMES)
async def test_cli_in_sandbox_via_orchestrator(name: str, tmp_path: Path) -> None:
    tools = require_installed(name) if name != "zero" else tmp_path
    task = ProofFileTask(proof_content())
    engine = ScriptedEngine(proof_policy(task.content))
    store = SQLiteCallStore(tmp_path / "calls.db")
    gateway = await start_gateway(engine, store, call_deadline_s=60.0)
    backend = LocalBackend(root=tmp_path / "sbx")
    config = OrchestratorConfig(n=1, min_group_size=1, max_retries=0, model=MODEL_NAME, harness_cache=tools)
    try:
        batch = await run_batch([task], get_harness(name), gateway=gateway.access, backend=backend,
                                config=config)
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
