"""A stdio MCP server that forwards each tool call to the rollout's tool service.

A thin bridge: `tools/list` answers the tools it was built with, `tools/call` is forwarded over loopback
HTTP (`tool_client.call_tool`, URL from `OPENFORGERL_CLAW_URL`). Tool errors (bad arguments, unknown ids,
injected transient failures) come back as `is_error` results so the model sees them and can recover;
only an unreachable service is reported as a hard error.

`python -m openforgerl.env.mcp_server --tools FILE` serves the tools a JSON list of OpenAI function
schemas describes (a tau2 task's tools, an imported task's upstream endpoints: computed on the host and
laid out in the workdir); an environment with its own tool table builds the server from it
(`build_server`, e.g. `openforgerl.envs.claw.mcp_server`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from openforgerl.env.tool_client import ServiceUnreachable, call_tool

__all__ = ["ListedTool", "SchemaTool", "build_server", "main", "serve"]


class ListedTool(Protocol):
    """What the server lists of a tool: a name, a description and the JSON schema of its arguments."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def input_schema(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class SchemaTool:
    """A tool described by an OpenAI function schema."""

    name: str
    description: str
    parameters: dict[str, Any]

    @classmethod
    def of(cls, schema: dict[str, Any]) -> SchemaTool:
        fn = schema.get("function") or schema
        return cls(str(fn["name"]), str(fn.get("description") or ""), dict(fn.get("parameters") or {}))

    def input_schema(self) -> dict[str, Any]:
        return self.parameters


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


def build_server(tools: Sequence[ListedTool]) -> Server[Any]:
    listed = [
        types.Tool(name=t.name, description=t.description, input_schema=t.input_schema()) for t in tools
    ]
    allowed = {t.name for t in tools}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in allowed:
            return _text(f"unknown tool {params.name!r}", is_error=True)
        return await _forward(params.name, dict(params.arguments or {}))

    return Server("openforgerl-claw", version="0.1.0", on_list_tools=list_tools, on_call_tool=call)


async def serve(tools: Sequence[ListedTool]) -> None:
    """Serve `tools` over stdio until the client closes the stream."""
    server = build_server(tools)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m openforgerl.env.mcp_server")
    ap.add_argument("--tools", type=Path, required=True, help="JSON list of OpenAI function schemas")
    ns = ap.parse_args(argv)
    anyio.run(serve, [SchemaTool.of(s) for s in json.loads(ns.tools.read_text())])


if __name__ == "__main__":
    main()
