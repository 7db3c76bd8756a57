"""Engine faults under every real harness CLI: the rollout is infra and its harness ends at the taint.

Two faults per CLI, both persistent so no retry can save the run: every engine call answers 5xx, or every
stream stalls after its first chunks (non-streaming mini-swe-agent: every call hangs before headers). The
gateway's per-call deadline turns a stall into an error the harness sees, and its first infra error taints
the rollout. Each CLI runs as in training: in the real sandbox, driven by the real orchestrator, which ends a
tainted rollout's harness on the gateway's word (`rollout.end_at_taint`) instead of letting a CLI that retries
forever run to its budget. The rollout is dropped (never reward 0) and reconstruction keeps none of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness_e2e import proof_content, require_installed

from openforgerl.engines.scripted import MODEL_NAME, Faults, ScriptedEngine
from openforgerl.gateway.server import start_gateway
from openforgerl.harness.registry import get_harness
from openforgerl.harness.scripted_policy import proof_policy
from openforgerl.orchestrator.batch import run_batch
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.sandbox.base import Sandbox, SandboxSpec
from openforgerl.sandbox.local import LocalBackend
from openforgerl.store.sqlite import SQLiteCallStore
from openforgerl.testing.tasks import ProofFileTask
from openforgerl.trajectory.reconstruct import reconstruct_samples

pytestmark = [pytest.mark.harness, pytest.mark.timeout(400)]

HARNESSES = [
    "codex",
    "claude_code",
    "qwen_code",
    "opencode",
    "mini_swe_agent",
    "openclaw-completions",
    "openclaw-responses",
    "openclaw-messages",
    "zero",
]
# The budget is only the cap a broken taint watch would run into: the harness is cut at the first infra
# error, which comes 1-17 s after the start here (a stall is an error at the 5 s call deadline). OpenClaw
# needs 12-19 s idle to make its first call, and 42 s to over 120 s inside the sandbox on this box at load
# 40-120 (its SQLite state is slow there): its cap is the in-sandbox end-to-end test's.
BUDGET_S = 45.0
SLOW_START = {"openclaw": 240.0}
CALL_DEADLINE_S = 5.0


def faults(kind: str) -> Faults:
    if kind == "5xx":
        return Faults(http_errors=10_000, http_status=503)
    return Faults(stall_streams=10_000, stall_after=2, hang_before_headers=10_000)


class ProofAtClose:
    """The real local backend; each sandbox's `proof.txt` is read just before it closes. A tainted rollout is
    never verified, so this is how the test sees what the CLI left in its workdir."""

    def __init__(self, backend: LocalBackend) -> None:
        self.backend = backend
        self.proofs: list[bytes | None] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)

    async def open_sandbox(self, spec: SandboxSpec) -> Sandbox:
        sandbox = await self.backend.open_sandbox(spec)
        close = sandbox.aclose

        async def aclose() -> None:
            try:
                self.proofs.append(await sandbox.read_file("/workdir/proof.txt"))
            except FileNotFoundError:
                self.proofs.append(None)
            await close()

        sandbox.aclose = aclose  # type: ignore[method-assign]
        return sandbox


@pytest.mark.parametrize("kind", ["5xx", "stall"])
@pytest.mark.parametrize("name", HARNESSES)
async def test_engine_fault_ends_run_as_infra(name: str, kind: str, tmp_path: Path) -> None:
    tools = require_installed(name) if name != "zero" else tmp_path
    budget = SLOW_START.get(name.split("-")[0], BUDGET_S)
    task = ProofFileTask(proof_content(), exact=True, budget_s=budget)
    engine = ScriptedEngine(proof_policy(task.expected), faults=faults(kind))
    store = SQLiteCallStore(tmp_path / "calls.db")
    gateway = await start_gateway(engine, store, call_deadline_s=CALL_DEADLINE_S)
    backend = ProofAtClose(LocalBackend(root=tmp_path / "sbx"))
    config = OrchestratorConfig(
        group_size=1, min_group_size=1, retries=0, model=MODEL_NAME, harness_cache=tools
    )
    adapter = get_harness(name, **({"wall_clock_s": 30.0} if name == "zero" else {}))
    try:
        [record] = (
            await run_batch(
                [task],
                adapter,
                gateway=gateway.access,
                backend=backend,  # type: ignore[arg-type]
                config=config,
            )
        ).records
        calls = await store.list_calls(record.rollout_id)
    finally:
        await gateway.aclose()
        await backend.aclose()
        await store.aclose()
    meta = record.metadata
    describe = (
        f"status={record.status} calls={len(calls)} errors={[c.error for c in calls if c.error]} "
        f"timings={meta.get('timings')} rc={meta.get('harness_returncode')} "
        f"ended={meta.get('harness_ended')} "
        f"error={meta.get('error')}\n"
        f"stdout={meta.get('harness_stdout_tail', '')[-3000:]}\n"
        f"stderr={meta.get('harness_stderr_tail', '')[-3000:]}"
    )
    # ended before its budget: cut at the taint, or the CLI gave up by itself (never the budget's kill)
    assert meta.get("harness_timed_out") is False and meta["timings"]["harness_s"] < budget, describe
    assert calls and any(c.is_infra_error for c in calls), describe
    assert record.infra_tainted and record.status is not None and record.status.is_infra, describe
    assert record.reward is None and not record.in_batch, describe
    result = reconstruct_samples(calls, record)
    assert result.samples == () and result.dropped_reason is not None, describe
    assert backend.proofs == [None], describe  # no engine answer ever reached the CLI
