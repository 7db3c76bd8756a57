"""Outputs shaped like a real model's, through every real CLI: the history each harness echoes back still
continues the chain (gateway/verbatim.py).

Before the gateway put the model's own text back, each of these shapes broke every harness's chain on the
next call, `zero` included (`prefix_mismatch:sampled`): a reasoning block, tool-call JSON without the
template's spacing, trailing whitespace. The chat template re-renders the echoed, parsed message in its
canonical spelling, which is not what the model sampled. The policy here emits one shape per turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness_e2e import proof_content, require_installed, run_rollout, sampled_in_samples

from openforgerl.harness.registry import get_harness
from openforgerl.harness.scripted_policy import SHELL_TOOLS, first_call, tool_names

pytestmark = [pytest.mark.harness, pytest.mark.timeout(600)]
BUDGET_S = 240.0


def _shell(tools: list[dict[str, Any]], command: str) -> tuple[str, str]:
    name = next(n for n in SHELL_TOOLS if n in tool_names(tools))
    return name, json.dumps({"name": name, "arguments": {SHELL_TOOLS[name]: command}}, separators=(",", ":"))


def real_shaped_policy(content: str) -> Any:
    """Turn 1: reasoning closed by `</think>`, then the write; turn 2: compact tool-call JSON; turn 3:
    text with trailing spaces around the call; last: reasoning without an opening tag, then the answer."""

    def policy(turn: Any) -> str:
        if not turn.tools:
            return "Write proof file"
        done = sum(1 for m in turn.messages if m.get("role") == "tool")
        if done == 0:
            return "The user wants a file; the shell can write it.\n</think>\n\n" + first_call(
                turn.tools, "proof.txt", content
            )
        if done == 1:
            return "<tool_call>" + _shell(turn.tools, "cat proof.txt")[1] + "</tool_call>"
        if done == 2:
            return (
                "Let me list the folder.  \n\n<tool_call>\n"
                + _shell(turn.tools, "ls")[1]
                + "\n</tool_call>\n"
            )
        return "It is there.</think>Done: wrote the file."

    return policy


@pytest.mark.parametrize("name", ["codex", "claude_code", "qwen_code", "opencode", "zero"])
async def test_real_shaped_outputs_merge_in_every_harness(name: str, make_gateway, tmp_path: Path) -> None:
    tools = require_installed(name)
    content = proof_content()
    gw, engine = await make_gateway(real_shaped_policy(content))
    out = await run_rollout(gw, get_harness(name), tools, tmp_path, content, budget_s=BUDGET_S)
    assert out.file_text() == content, out.describe()
    metrics = out.result.metrics
    assert metrics.trainable_calls >= 4, out.describe()
    assert metrics.merge_rate == 1.0 and not metrics.break_causes, metrics
    assert all(sampled_in_samples(c, out) for c in engine.produced if c.parsed.tool_calls)
    rewritten = [c for c in out.calls[1:] if c.engine_request is not None and not c.side_call]
    assert rewritten, "the echoed turns should reach the engine as sampled"


async def test_without_verbatim_history_the_template_rewrites_the_model(make_gateway, tmp_path: Path) -> None:
    """The cause, shown: the same rollout with the rewrite off breaks on each re-rendered turn."""
    content = proof_content()
    gw, _ = await make_gateway(real_shaped_policy(content), verbatim_history=False)
    out = await run_rollout(gw, get_harness("zero"), tmp_path, tmp_path, content, budget_s=BUDGET_S)
    assert out.file_text() == content, out.describe()
    assert out.result.metrics.break_causes.get("prefix_mismatch:sampled", 0) >= 2, out.result.metrics
