"""`ToolWorldRuntime`: a `tool-world` task folder as the orchestrator's `TaskRuntime`.

Inside the sandbox: `/workdir/.world/{world,state,faults}.json` for the service, removed once it has
read them and answers (`service_started`), so the agent sees neither the faults to come nor a file the
service would read again; the service on 127.0.0.1:`PORT` (its own network namespace per sandbox).
The harness reaches the tools as function tools (`zero`) or through one stdio MCP server
(`env/mcp_server.py`, their schemas in `/workdir/.world-tools.json`).

`verify` reads the service's state and audit apart from the agent (`env.tool_service.read_state`) and
judges them with the task's `tests/checks.toml`, which no sandbox sees, as synthesis judged the gold
calls and the no-op on the same world (`synth/filters.py`). A service that no longer answers is the
agent's outcome; one that never started is infra.
"""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from openforgerl.env.checks.evaluate import Evidence, evaluate
from openforgerl.env.checks.spec import load_spec
from openforgerl.env.contract import McpServer, TaskDefaults, Verdict
from openforgerl.env.errors import TaskFormatError
from openforgerl.env.tool_client import URL_ENV
from openforgerl.env.tool_service import function_tools, read_state, wait_for_service
from openforgerl.synth.toolenv import ToolEnv, env_from_document
from openforgerl.tasks import Task

__all__ = ["KIND", "ToolWorldRuntime", "check_task"]

KIND = "tool-world"
PORT = 7718
URL = f"http://127.0.0.1:{PORT}"
INSIDE = "/workdir"
DIR = ".world"
TOOLS = ".world-tools.json"
# The gold replay of `tasks validate`: each call through the service's public route, an injected
# transient fault (a 5xx) retried once, as synthesis replayed it. argv: url, the calls as JSON.
_REPLAY = (
    "import json, sys\n"
    "from openforgerl.env.tool_client import call_tool\n"
    "for a in json.loads(sys.argv[2]):\n"
    "    status, _ = call_tool(a['tool'], a['args'], url=sys.argv[1])\n"
    "    if status >= 500:\n"
    "        status, _ = call_tool(a['tool'], a['args'], url=sys.argv[1])\n"
    "    print(a['tool'], status)\n"
)


def _world(task: Task) -> ToolEnv:
    path = task.root / "environment" / "world.json"
    try:
        return env_from_document(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:  # DocumentError is a ValueError
        raise TaskFormatError(path, "", f"not a tool world: {exc}") from None


def check_task(task: Task) -> None:
    """The family's load-time check: the world reads, and the checks the verdict comes from exist."""
    _world(task)
    if not (task.root / "tests" / "checks.toml").is_file():
        raise TaskFormatError(
            task.root / "tests" / "checks.toml", "", "missing: a tool-world task is judged by its checks"
        )


def _state(task: Task) -> dict[str, Any]:
    """The world's state at the start: one fixture file per service (`environment/fixtures/<s>.json`)."""
    folder = task.root / "environment" / "fixtures"
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


class ToolWorldRuntime(TaskDefaults):
    """One task of a tool world; a fresh token per runtime reads the service's state."""

    def __init__(self, task: Task, *, python: str | None = None, **_: Any) -> None:
        self.task, self.task_id, self.instruction = task, task.task_id, task.instruction
        self.budget_s = task.budget_s
        self.python = python or sys.executable
        self.world = _world(task)
        self.token = secrets.token_hex(16)
        self.tool_service_url = URL  # where direct-tool harnesses (`zero`) POST `/tools/<name>`
        self.metadata: dict[str, Any] = {"split": task.meta.split, "difficulty": task.meta.difficulty}

    def _tools(self) -> list[dict[str, Any]]:
        # Every tool of the world: the service answers each (as synthesis's session did when it chose the
        # gold), so the harness is offered no less and the agent can reach no more.
        return function_tools(self.world.tools)

    def files(self) -> Mapping[str, bytes]:
        doc = (self.task.root / "environment" / "world.json").read_bytes()
        faults = [f.model_dump() for f in self.task.meta.faults]
        return {
            f"{DIR}/world.json": doc,
            f"{DIR}/state.json": json.dumps(_state(self.task)).encode(),
            f"{DIR}/faults.json": json.dumps(faults).encode(),
            TOOLS: json.dumps(self._tools()).encode(),
        }

    def service_argv(self) -> Sequence[str]:
        module = "openforgerl.envs.toolworld.service"
        return [self.python, "-I", "-m", module, str(PORT), self.token, f"{INSIDE}/{DIR}"]

    async def service_started(self, sandbox: Any) -> None:
        await wait_for_service(sandbox, URL, self.token, python=self.python)
        gone = await sandbox.exec(["rm", "-rf", "--", f"{INSIDE}/{DIR}"], timeout_s=30)
        if gone.returncode != 0:
            raise RuntimeError(f"could not remove the world's files: {gone.stderr.decode(errors='replace')}")

    def mcp_servers(self) -> Sequence[McpServer]:
        args = ["-I", "-m", "openforgerl.env.mcp_server", "--tools", f"{INSIDE}/{TOOLS}"]
        return [McpServer(self.world.name or "world", self.python, args, {URL_ENV: URL})]

    def function_tools(self) -> Sequence[Mapping[str, Any]]:
        return self._tools()

    async def verify(self, sandbox: Any) -> Verdict:
        seen = await read_state(sandbox, URL, self.token, python=self.python)
        spec = load_spec(self.task.root / "tests" / "checks.toml")
        outcome = evaluate(spec, Evidence(seen["state"], seen["audit"], None))
        return Verdict(outcome.reward, outcome.components(), outcome.log())

    async def run_oracle(self, sandbox: Any) -> str:
        """Replay `solution/actions.json` through the service; "" when every call was made."""
        actions = (self.task.root / "solution" / "actions.json").read_text()
        argv = [self.python, "-I", "-c", _REPLAY, URL, actions]
        res = await sandbox.exec(argv, timeout_s=120)
        return "" if res.returncode == 0 else f"oracle failed: {res.stderr.decode(errors='replace')[-500:]}"
