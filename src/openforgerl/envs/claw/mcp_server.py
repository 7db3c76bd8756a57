"""stdio MCP server exposing the Claw tools (`python -m openforgerl.envs.claw.mcp_server --tools a,b`).

A thin bridge: `tools/list` comes from the tool registry, `tools/call` is forwarded to the rollout's
Claw service over loopback HTTP (URL from `OPENFORGERL_CLAW_URL`). Tool errors (bad arguments,
unknown ids, injected transient failures) come back as `is_error` results so the model sees them and
can recover; only an unreachable service is reported as a hard error.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from openforgerl.env.tool_client import ServiceUnreachable, call_tool
from openforgerl.envs.claw.tools import TOOLS, ToolSpec, tools_for

__all__ = ["build_server", "main"]


def _text(text: str, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


async def _forward(name: str, args: dict[str, Any]) -> types.CallToolResult:
    try:
        status, body = await anyio.to_thread.run_sync(lambda: call_tool(name, args))
    except ServiceUnreachable as exc:
        return _text(f"tool service unreachable: {exc}", is_error=True)
    if status != 200:
        error = body.get("error") if isinstance(body, dict) else body
        return _text(f"error ({status}): {error}", is_error=True)
    return _text(json.dumps(body.get("result"), indent=2))


def build_server(tools: Sequence[ToolSpec]) -> Server[Any]:
    listed = [types.Tool(name=t.name, description=t.description, input_schema=t.input_schema()) for t in tools]
    allowed = {t.name for t in tools}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in allowed:
            return _text(f"unknown tool {params.name!r}", is_error=True)
        return await _forward(params.name, dict(params.arguments or {}))

    return Server("openforgerl-claw", version="0.1.0", on_list_tools=list_tools, on_call_tool=call)


async def _serve(tools: Sequence[ToolSpec]) -> None:
    server = build_server(tools)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m openforgerl.envs.claw.mcp_server")
    ap.add_argument("--tools", default="", help="comma-separated tool names (default: all)")
    ns = ap.parse_args(argv)
    names = [n for n in ns.tools.split(",") if n]
    anyio.run(_serve, tools_for(names=names) if names else TOOLS)


if __name__ == "__main__":
    main()
