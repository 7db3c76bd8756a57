"""Claude Code (`@anthropic-ai/claude-code`), headless via `claude -p`.

Quirks (measured):
- Anthropic Messages, always SSE, `POST {ANTHROPIC_BASE_URL}/v1/messages?beta=true` plus a `HEAD` preflight.
- As root `--dangerously-skip-permissions` is refused unless `IS_SANDBOX=1`.
- Without `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` the first call comes 11 s late and a title side call
  is made; with it, 0.7 s and none.
- Sends `role:"system"` messages in the middle of `messages`; moves `cache_control` markers.
- 5xx/529/429 retried with backoff, 400 fatal. A stall *after* headers hangs indefinitely: the gateway's
  upstream deadline and the orchestrator's wall clock end it.
- Sub-agents: `x-claude-code-agent-id` / `x-claude-code-parent-agent-id` headers.
- `-p` waits 5 s for `--mcp-config` servers, then goes on without the slow ones (see `claude_env`).
- With a base URL that is not Anthropic's and no `ENABLE_TOOL_SEARCH`, every MCP tool is listed in each
  request (`mcp__<server>__<tool>`), not deferred behind its tool search (read in its binary).
"""

from __future__ import annotations

from pathlib import Path

from openforgerl.harness._common import base_env, json_bytes, mcp_json, with_hint
from openforgerl.harness.base import HarnessContext, HarnessLaunch
from openforgerl.harness.install import NpmPackage, install_npm
from openforgerl.records import WireProtocol

PACKAGE = NpmPackage("claude-code", "@anthropic-ai/claude-code@2.1.197")
MCP_START_MS = 120_000  # how long an MCP server may take to start before the session goes on without it


def claude_env(ctx: HarnessContext) -> dict[str, str]:
    return {
        "IS_SANDBOX": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CONFIG_DIR": f"{ctx.home}/.claude",
        "ANTHROPIC_BASE_URL": ctx.anthropic_base_url,
        "ANTHROPIC_API_KEY": ctx.api_key,
        "ANTHROPIC_MODEL": ctx.model,
        "ANTHROPIC_SMALL_FAST_MODEL": ctx.model,
        "CLAUDE_CODE_SUBAGENT_MODEL": ctx.model,
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        # `-p` waits MCP_CONNECT_TIMEOUT_MS (default 5 s, read in the binary) for the --mcp-config servers,
        # then goes on without the ones still starting (the model gets a `WaitForMcpServers` tool instead):
        # on a loaded box the task's tools were missing from a rollout's first request (a 0 the machine
        # earned; tests/harness/test_mcp_e2e.py starts a server 40 s late). Wait as long as a start may take.
        "MCP_CONNECTION_NONBLOCKING": "false",
        "MCP_CONNECT_TIMEOUT_MS": str(MCP_START_MS),
        "MCP_TIMEOUT": str(MCP_START_MS),
    }


class ClaudeCodeHarness:
    name = "claude_code"
    version = "2.1.197"
    protocol = WireProtocol.ANTHROPIC
    lists_task_tools = True  # every request lists the task's tools (orchestrator checks the first)

    def install(self, cache_dir: Path) -> None:
        install_npm(PACKAGE, cache_dir)

    def launch(self, ctx: HarnessContext, cache_dir: Path) -> HarnessLaunch:
        argv = [
            str(PACKAGE.bin(cache_dir, "claude")),
            "-p",
            with_hint(ctx),
            "--dangerously-skip-permissions",
            "--model",
            ctx.model,
            "--output-format",
            "stream-json",
            "--verbose",
        ]
        files: dict[str, bytes] = {}
        if ctx.mcp_servers:
            path = f"{ctx.home}/mcp.json"
            files[path] = json_bytes({"mcpServers": mcp_json(ctx.mcp_servers)})
            argv += ["--mcp-config", path, "--strict-mcp-config"]
        env = {**base_env(ctx), **claude_env(ctx)}
        return HarnessLaunch(argv=argv, env=env, files=files, outputs=[f"{ctx.home}/.claude/projects"])
