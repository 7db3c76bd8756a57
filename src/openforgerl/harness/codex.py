"""Codex CLI (`@openai/codex`), headless via `codex exec`.

Quirks (measured on the pinned CLI):
- Always a custom `[model_providers.X]` entry with `wire_api="responses"`: the built-in `openai` provider
  switches to a WebSocket with `previous_response_id` deltas that a stateless gateway cannot record.
- Speaks OpenAI Responses, always SSE; re-sends the full history each call (one chain).
- 429 and 400 are fatal; 5xx and drops are retried (`request_max_retries`, `stream_max_retries`).
- A hang *before* response headers is never timed out by Codex: the orchestrator's wall clock must end it.
- `CODEX_HOME` must not be under /tmp (it warns it cannot create helper binaries there).
- Sub-agents carry `thread-id` / `x-codex-parent-thread-id` headers; the gateway records them.
- MCP servers (`[mcp_servers.X]`) start in the background, and the first request waits only
  `mcp_optional_startup_grace_ms` (1 s by default) for them: with a server 8 s late, the first request
  offered no task tool (a real model answers it without them; the scripted policy only recovered because it
  retries). `mcp_optional_startup_grace_ms = 0` waits each server's `startup_timeout_sec` (120 s here);
  `required = true` did not change the first request. MCP tools arrive as a
  `namespace` tool (`mcp__<server>`).
- At startup it tries to sync curated plugins from github.com / chatgpt.com; offline (sandbox) this fails
  fast and is harmless. `RUST_LOG` follows `$OPENFORGERL_CODEX_RUST_LOG` (default `error`) for debugging.
"""

from __future__ import annotations

import os
from pathlib import Path

from openforgerl.harness._common import base_env, toml_array, toml_inline, toml_str, with_hint
from openforgerl.harness.base import HarnessContext, HarnessLaunch
from openforgerl.harness.install import NpmPackage, install_npm
from openforgerl.records import WireProtocol

PACKAGE = NpmPackage("codex", "@openai/codex@0.171.0")
PROVIDER = "openforgerl"
KEY_ENV = "OPENFORGERL_API_KEY"


def config_toml(ctx: HarnessContext, stream_idle_timeout_ms: int = 300_000) -> str:
    lines = [
        f"model = {toml_str(ctx.model)}",
        f"model_provider = {toml_str(PROVIDER)}",
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        "check_for_update_on_startup = false",
        "mcp_optional_startup_grace_ms = 0",
        "",
        f"[model_providers.{PROVIDER}]",
        'name = "openforgerl gateway"',
        f"base_url = {toml_str(ctx.openai_base_url)}",
        f"env_key = {toml_str(KEY_ENV)}",
        'wire_api = "responses"',
        "request_max_retries = 4",
        "stream_max_retries = 5",
        f"stream_idle_timeout_ms = {stream_idle_timeout_ms}",
    ]
    for s in ctx.mcp_servers:
        lines += ["", f"[mcp_servers.{s.name}]", f"command = {toml_str(s.command)}"]
        lines += [f"args = {toml_array(list(s.args))}", f"env = {toml_inline(dict(s.env))}"]
        lines += ["startup_timeout_sec = 120", "tool_timeout_sec = 300"]
    return "\n".join(lines) + "\n"


class CodexHarness:
    name = "codex"
    version = "0.171.0"
    protocol = WireProtocol.RESPONSES
    lists_task_tools = True  # every request lists the task's tools (orchestrator checks the first)

    def install(self, cache_dir: Path) -> None:
        install_npm(PACKAGE, cache_dir)

    def launch(self, ctx: HarnessContext, cache_dir: Path) -> HarnessLaunch:
        codex_home = f"{ctx.home}/.codex"
        last = f"{ctx.home}/codex-last-message.txt"
        argv = [
            str(PACKAGE.bin(cache_dir, "codex")),
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "--json",
            "-C",
            ctx.workdir,
            "--output-last-message",
            last,
            with_hint(ctx),
        ]
        env = {
            **base_env(ctx),
            "CODEX_HOME": codex_home,
            KEY_ENV: ctx.api_key,
            "RUST_LOG": os.environ.get("OPENFORGERL_CODEX_RUST_LOG", "error"),
        }
        files = {f"{codex_home}/config.toml": config_toml(ctx).encode()}
        return HarnessLaunch(argv=argv, env=env, files=files, outputs=[last, f"{codex_home}/sessions"])
