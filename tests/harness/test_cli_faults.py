"""Engine faults under every real harness CLI: the run ends within its budget and the rollout is infra.

Two faults per CLI, both persistent so no retry can save the run: every engine call answers 5xx, or every
stream stalls after its first chunks (non-streaming mini-swe-agent: every call hangs before headers). The
gateway's per-call deadline turns a stall into an error the harness sees; the wall-clock budget ends CLIs
that retry forever. Either way the gateway taints the rollout and reconstruction drops it (never reward 0).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_e2e import proof_content, require_installed, run_rollout

from openforgerl.engines.scripted import Faults
from openforgerl.harness.registry import get_harness
from openforgerl.harness.scripted_policy import proof_policy

pytestmark = [pytest.mark.harness, pytest.mark.timeout(300)]

HARNESSES = ["codex", "claude_code", "qwen_code", "opencode", "mini_swe_agent", "openclaw-completions",
             "openclaw-responses", "openclaw-messages", "zero"]
BUDGET_S = 45.0
SLOW_START = {"openclaw": 120.0}  # OpenClaw needs 12-19 s idle (up to a minute on a loaded box) to start
SLACK_S = 15.0  # process-tree kill and store reads after the budget


def faults(kind: str) -> Faults:
    if kind == "5xx":
        return Faults(http_errors=10_000, http_status=503)
    return Faults(stall_streams=10_000, stall_after=2, hang_before_headers=10_000)


@pytest.mark.parametrize("kind", ["5xx", "stall"])
@pytest.mark.parametrize("name", HARNESSES)
async def test_engine_fault_ends_run_as_infra(name: str, kind: str, make_gateway, tmp_path: Path) -> None:
    tools = require_installed(name) if name != "zero" else tmp_path
    content = proof_content()
    gw, _ = await make_gateway(proof_policy(content), faults=faults(kind), call_deadline_s=5.0)
    adapter = get_harness(name, **({"wall_clock_s": 30.0} if name == "zero" else {}))
    budget = SLOW_START.get(name.split("-")[0], BUDGET_S)
    out = await run_rollout(gw, adapter, tools, tmp_path, content, budget_s=budget)
    assert out.run.duration_s < budget + SLACK_S, out.describe()
    assert out.calls and any(c.is_infra_error for c in out.calls), out.describe()
    assert out.rollout.infra_tainted and out.rollout.status is not None and out.rollout.status.is_infra
    assert out.result.samples == () and out.result.dropped_reason is not None
    assert out.file_text() is None
