"""The harness contract: how to run one unmodified agent CLI inside a sandbox.

An adapter knows three things about its CLI: how to install it (pinned, cached), how to write its
config so that it talks to our gateway (base URL, key, model, MCP tools, no telemetry), and the
headless command line for one task instruction. It never patches the harness.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from openforgerl.env.contract import McpServer
from openforgerl.records import WireProtocol


@dataclass(frozen=True)
class HarnessContext:
    """Everything an adapter needs to configure one run. Paths are inside the sandbox."""

    instruction: str
    openai_base_url: str  # .../r/<rollout>/v1, reachable inside the sandbox
    anthropic_base_url: str  # .../r/<rollout>
    api_key: str
    model: str
    workdir: str = "/workdir"
    home: str = "/workdir/.home"  # per-rollout HOME for the CLI's own state
    mcp_servers: Sequence[McpServer] = ()
    shell_tools_hint: str = ""  # how to use the task's tools from a shell, for shell-only harnesses
    tools: Sequence[Mapping[str, object]] = ()  # OpenAI function tools, for direct-tool harnesses
    tool_service_url: str = ""  # where direct-tool harnesses POST `/tools/{name}` calls (the task's service)
    max_turns: int | None = None  # the task's own turn cap; an adapter with a turn limit takes the lower


@dataclass(frozen=True)
class HarnessLaunch:
    """The files to write and the command to run for one rollout."""

    argv: Sequence[str]
    env: Mapping[str, str]
    files: Mapping[str, bytes] = field(default_factory=dict)  # path inside sandbox -> content
    outputs: Sequence[str] = ()  # files (inside sandbox) worth keeping after the run


class HarnessAdapter(Protocol):
    """An adapter may also set `lists_task_tools = True`: its every request lists the tools of the task's MCP
    servers, so a first prompt without them is the servers' failure, not the model's
    (`orchestrator/classify.first_prompt_lacks_task_tools`). Not Qwen Code or OpenClaw (each defers MCP
    tools behind its own `tool_search`), nor `zero` (its tools come in its config, no server to wait for),
    nor shell-only or GUI harnesses."""

    name: str
    version: str
    protocol: WireProtocol

    def install(self, cache_dir: Path) -> None:
        """Install the pinned CLI under cache_dir (idempotent; a no-op when already there)."""
        ...

    def launch(self, ctx: HarnessContext, cache_dir: Path) -> HarnessLaunch:
        """Config files and command line for one headless run."""
        ...
