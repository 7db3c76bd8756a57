"""Small helpers shared by the adapters: config serialisation and the environment every CLI gets."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from openforgerl.env.contract import McpServer
from openforgerl.harness.base import HarnessContext

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"

# Telemetry, update checks and error reporting off for every CLI (unknown names are ignored by the others).
QUIET_ENV: Mapping[str, str] = {
    "DO_NOT_TRACK": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "NPM_CONFIG_UPDATE_NOTIFIER": "false",
    "CI": "1",
    "TERM": "dumb",
    "NO_COLOR": "1",
}


def base_env(ctx: HarnessContext, *path_dirs: Path | str) -> dict[str, str]:
    """HOME in the per-rollout home, PATH with the CLI's own bin dirs first, quiet switches on."""
    path = ":".join([*(str(p) for p in path_dirs), SYSTEM_PATH])
    return {**QUIET_ENV, "HOME": ctx.home, "PATH": path, "LANG": "C.UTF-8"}


def json_bytes(obj: object) -> bytes:
    return (json.dumps(obj, indent=2) + "\n").encode()


def toml_str(value: str) -> str:
    """A TOML basic string (JSON escapes are valid TOML escapes for the characters we emit)."""
    return json.dumps(value, ensure_ascii=False)


def toml_inline(mapping: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{toml_str(k)} = {toml_str(v)}" for k, v in mapping.items()) + "}"


def toml_array(items: Sequence[str]) -> str:
    return "[" + ", ".join(toml_str(i) for i in items) + "]"


def mcp_json(servers: Sequence[McpServer]) -> dict[str, dict[str, object]]:
    """The `mcpServers` shape shared by Claude Code and Qwen Code (stdio servers)."""
    return {s.name: {"command": s.command, "args": list(s.args), "env": dict(s.env)} for s in servers}


def with_hint(ctx: HarnessContext) -> str:
    """The instruction, plus the shell hint for task tools when the harness gets no MCP servers."""
    if ctx.mcp_servers or not ctx.shell_tools_hint:
        return ctx.instruction
    return f"{ctx.instruction}\n\n{ctx.shell_tools_hint}"
