"""Every real harness CLI, end to end through the real gateway, against a scripted policy.

The policy solves "write proof.txt with this content" with one call of the harness's own shell tool, then
answers. Checks: the file holds the content (reward 1), the gateway recorded the calls, and the scripted
tool calls come back as mask-1 tokens in the reconstructed samples.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_e2e import (
    proof_content,
    record_figures,
    require_installed,
    run_rollout,
    sampled_in_samples,
    tool_call_completions,
)

from openforgerl.harness.registry import get_harness
from openforgerl.harness.scripted_policy import proof_policy

pytestmark = [pytest.mark.harness, pytest.mark.timeout(600)]

CASES = [
    pytest.param("codex", {}, id="codex"),
    pytest.param("claude_code", {}, id="claude_code"),
    pytest.param("claude_code", {"prefer": "write"}, id="claude_code-Write"),
    pytest.param("qwen_code", {}, id="qwen_code"),
    pytest.param("opencode", {}, id="opencode"),
    pytest.param("mini_swe_agent", {}, id="mini_swe_agent"),
    pytest.param("openclaw-completions", {}, id="openclaw-completions"),
    pytest.param("openclaw-responses", {}, id="openclaw-responses"),
    pytest.param("openclaw-messages", {}, id="openclaw-messages"),
]
BUDGET_S = 240.0


@pytest.mark.parametrize(("name", "policy_opts"), CASES)
async def test_cli_solves_proof_task(
    name: str, policy_opts: dict[str, str], make_gateway, tmp_path: Path
) -> None:
    tools = require_installed(name)
    content = proof_content()
    gw, engine = await make_gateway(proof_policy(content, **policy_opts))
    adapter = get_harness(name)
    out = await run_rollout(gw, adapter, tools, tmp_path, content, budget_s=BUDGET_S)
    record_figures(name, adapter, out)
    assert out.file_text() == content, out.describe()
    assert not out.run.timed_out, out.describe()
    assert out.rollout.reward == 1.0 and out.result.samples, out.result.metrics
    calls = tool_call_completions(engine)
    assert calls and all(sampled_in_samples(c, out) for c in calls), out.result.metrics
    assert out.result.final_sample is not None and out.result.final_sample.reward_score == 1.0
