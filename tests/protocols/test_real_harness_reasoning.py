"""Real Codex CLI and Claude Code accept our reasoning events and echo them so the calls merge.

The model (scripted policy) thinks before each answer. Codex must get the reasoning back to us through
`encrypted_content` and Claude Code through its thinking block, so the second prompt extends the first
prompt plus the sampled tokens: one chain, merge rate 1. Needs the CLIs (scripts/install_harnesses.sh).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "harness"))

from harness_e2e import proof_content, require_installed, run_rollout

from openforgerl.engines.chat_format import ChatFormat
from openforgerl.engines.scripted import ScriptedEngine
from openforgerl.gateway.server import start_gateway
from openforgerl.harness.registry import get_harness
from openforgerl.harness.scripted_policy import proof_policy
from openforgerl.store.sqlite import SQLiteCallStore

pytestmark = [pytest.mark.harness, pytest.mark.timeout(600)]


def thinking(policy: Callable[[Any], str]) -> Callable[[Any], str]:
    def think_first(turn: Any) -> str:
        text = policy(turn)
        return (
            text
            if not turn.tools
            else f"<think>\nStep {turn.call_index}: decide what to do.\n</think>\n\n{text}"
        )

    return think_first


@pytest.mark.parametrize("name", ["codex", "claude_code"])
async def test_reasoning_round_trips_through_the_real_cli(name: str, tmp_path: Path) -> None:
    tools = require_installed(name)
    content = proof_content()
    engine = ScriptedEngine(thinking(proof_policy(content)))
    store = SQLiteCallStore(tmp_path / "calls.db")
    gw = await start_gateway(engine, store, call_deadline_s=60.0)
    try:
        out = await run_rollout(gw, get_harness(name), tools, tmp_path, content, budget_s=240.0)
    finally:
        await gw.aclose()
        await store.aclose()
    assert out.file_text() == content, out.describe()
    main = [c for c in out.calls if not c.side_call]
    assert len(main) >= 2 and all(c.error is None for c in main)
    first, second = main[0], main[1]
    assert "<think>" in ChatFormat.load().decode(first.completion_token_ids)
    head = first.prompt_token_ids + first.completion_token_ids
    assert second.prompt_token_ids[: len(head)] == head, "the reasoning did not come back token for token"
