"""A harness that asks the model before the task's tools reached it (its MCP server slow or crashed) is an
infra fault (`infra_error:harness_start`, dropped and retried), never a 0 trained as the model's failure.
Only the first answered request counts: it is the harness's own, sent before the policy decided anything;
what comes later the agent can change (it has a shell and can kill its tool server to dodge a 0)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from openforgerl.engines.chat_format import format_tool_call
from openforgerl.orchestrator.classify import first_prompt_lacks_task_tools, offered_tool_names
from openforgerl.records import CallError, CallErrorKind, CallRecord, RolloutStatus, WireProtocol

SUITE = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/claw/suite/tasks"
EVAL_TESTS = str(Path(__file__).resolve().parents[1] / "eval")
TASK_TOOLS = ["write_file", "todo_add", "mail_send"]


def _call(index: int, tools: list[dict[str, Any]], side: bool = False, error: bool = False) -> CallRecord:
    err = CallError(kind=CallErrorKind.CLIENT_BAD_REQUEST, message="bad", status=400) if error else None
    return CallRecord(
        rollout_id="r",
        index=index,
        protocol=WireProtocol.CHAT,
        request={"tools": tools},
        side_call=side,
        error=err,
    )


CHAT = [
    {"type": "function", "function": {"name": "mcp__claw__todo_add"}},
    {"type": "function", "function": {"name": "Bash"}},
]
BARE = [{"type": "function", "function": {"name": "Bash"}}]


def test_offered_tool_names_in_each_protocol() -> None:
    assert offered_tool_names({"tools": CHAT}) == ["mcp__claw__todo_add", "Bash"]
    responses = [
        {"type": "function", "name": "exec_command"},
        {"type": "namespace", "name": "mcp__claw", "tools": [{"type": "function", "name": "todo_add"}]},
        {"type": "web_search"},
    ]
    assert offered_tool_names({"tools": responses}) == ["exec_command", "todo_add"]
    assert offered_tool_names({"tools": [{"name": "Write", "input_schema": {}}]}) == ["Write"]
    assert offered_tool_names({"tools": "junk"}) == [] and offered_tool_names({}) == []


def test_the_first_prompt_without_the_task_tools_is_flagged() -> None:
    assert first_prompt_lacks_task_tools([_call(0, BARE), _call(1, CHAT)], TASK_TOOLS)
    assert not first_prompt_lacks_task_tools([_call(0, CHAT), _call(1, BARE)], TASK_TOOLS)
    opencode = [{"type": "function", "function": {"name": "claw_todo_add"}}]
    assert not first_prompt_lacks_task_tools([_call(0, opencode)], TASK_TOOLS)
    # by index, not arrival order; a side call (a title) and a refused request
    # are not the model's first prompt
    assert first_prompt_lacks_task_tools([_call(1, CHAT), _call(0, BARE)], TASK_TOOLS)
    assert not first_prompt_lacks_task_tools([_call(0, [], side=True), _call(1, CHAT)], TASK_TOOLS)
    assert not first_prompt_lacks_task_tools([_call(0, BARE, error=True), _call(1, CHAT)], TASK_TOOLS)
    # no task tools, no calls: nothing to miss; a name that only contains a task tool's is not it
    assert not first_prompt_lacks_task_tools([_call(0, BARE)], [])
    assert not first_prompt_lacks_task_tools([], TASK_TOOLS)
    assert first_prompt_lacks_task_tools([_call(0, [{"name": "todo_add_v2"}])], TASK_TOOLS)


def test_later_prompts_without_the_tools_are_the_agents_doing() -> None:
    """The agent killed its tool server after the first answer: the rollout is judged as usual."""
    assert not first_prompt_lacks_task_tools([_call(0, CHAT), _call(1, BARE), _call(2, BARE)], TASK_TOOLS)


# -- end to end: the real orchestrator, bubblewrap, the Claw service, the real Codex CLI ---------------------


class _ToolServer:
    """The task, with its MCP server's command replaced: the double is the server's start (a crash), never
    the orchestrator, the harness or the check under test."""

    def __init__(self, runtime: Any, command: str) -> None:
        self._runtime, self._command = runtime, command

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)

    def mcp_servers(self) -> list[Any]:
        from openforgerl.env.contract import McpServer

        return [McpServer(s.name, self._command, [], dict(s.env)) for s in self._runtime.mcp_servers()]


def _kill_tool_server_policy(turn: Any) -> str:
    """The policy's first action kills the task's MCP server (the agent has a shell); then it gives up."""
    from openforgerl.harness.scripted_policy import SHELL_TOOLS, tool_names

    if not turn.tools:
        return "Todo"
    if any(m.get("role") == "tool" for m in turn.messages):
        return "I could not do it."
    shell = next(n for n in SHELL_TOOLS if n in tool_names(turn.tools))
    kill = (
        "for p in /proc/[0-9]*; do grep -qa envs.claw.mcp_server $p/cmdline 2>/dev/null && "
        "kill -9 ${p#/proc/}; done; echo killed"
    )
    return format_tool_call(shell, {SHELL_TOOLS[shell]: kill})


async def _one(tmp_path: Path, runtime: Any, policy: Any) -> Any:
    from openforgerl.engines.scripted import MODEL_NAME, ScriptedEngine
    from openforgerl.gateway.server import start_gateway
    from openforgerl.harness.install import tools_dir
    from openforgerl.harness.registry import get_harness
    from openforgerl.orchestrator.batch import run_batch
    from openforgerl.orchestrator.config import OrchestratorConfig
    from openforgerl.sandbox.local import LocalBackend
    from openforgerl.store.sqlite import SQLiteCallStore

    store = SQLiteCallStore(tmp_path / "calls.db")
    gateway = await start_gateway(ScriptedEngine(policy), store, call_deadline_s=60.0)
    backend = LocalBackend(root=tmp_path / "sbx")
    config = OrchestratorConfig(
        group_size=1, min_group_size=1, retries=0, model=MODEL_NAME, harness_cache=tools_dir()
    )
    try:
        batch = await run_batch(
            [runtime], get_harness("codex"), gateway=gateway.access, backend=backend, config=config
        )
    finally:
        await gateway.aclose()
        await backend.aclose()
        await store.aclose()
    [record] = batch.records
    return record


@pytest.mark.harness
@pytest.mark.timeout(600)
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
async def test_codex_without_its_tool_server_is_infra_and_an_agent_that_kills_it_is_not(
    tmp_path: Path,
) -> None:
    sys.path.insert(0, EVAL_TESTS)
    from test_eval_real_clis import _require_installed

    from openforgerl.envs.claw.oracle_policy import oracle_policy
    from openforgerl.tasks.loader import load_runtime

    _require_installed("codex")
    runtime = load_runtime(SUITE / "easy-todo-add-01")
    solved = await _one(tmp_path / "ok", runtime, oracle_policy([runtime], success_rate=1.0))
    assert solved.status == RolloutStatus.OK and solved.reward == 1.0, solved
    # the MCP server dies at start: Codex goes on and asks the model with no task tool
    crashed = await _one(
        tmp_path / "crash", _ToolServer(runtime, "/bin/false"), oracle_policy([runtime], success_rate=1.0)
    )
    assert crashed.status == RolloutStatus.INFRA_HARNESS_START, crashed
    assert "none of the task's tools" in crashed.metadata["error"]
    assert crashed.in_batch is False
    # the agent kills the same server itself after the first answer: its own 0, trained as such
    killed = await _one(tmp_path / "kill", runtime, _kill_tool_server_policy)
    assert killed.status in (RolloutStatus.OK, RolloutStatus.AGENT_FAILED) and killed.reward == 0.0, killed
