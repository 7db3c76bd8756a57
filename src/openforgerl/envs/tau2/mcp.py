"""`python -m openforgerl.envs.tau2.mcp --tools FILE`: a stdio MCP server for one tau2 task's tools.

The tool list is the file the runtime lays out in the workdir (upstream's OpenAI schemas, computed on the
host), and each call is forwarded to the rollout's tau2 service like a Claw tool (`envs.mcp_server`):
same client, same error results, so MCP-capable CLIs reach tau2 tools the way they reach Claw tools.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp.server.stdio import stdio_server

from openforgerl.envs.claw.mcp_server import build_server

__all__ = ["SchemaTool", "main"]


@dataclass(frozen=True)
class SchemaTool:
    """A tool described by an OpenAI function schema, shaped like `envs.tools.ToolSpec` for `build_server`."""

    name: str
    description: str
    parameters: dict[str, Any]

    @classmethod
    def of(cls, schema: dict[str, Any]) -> SchemaTool:
        fn = schema.get("function") or schema
        return cls(str(fn["name"]), str(fn.get("description") or ""), dict(fn.get("parameters") or {}))

    def input_schema(self) -> dict[str, Any]:
        return self.parameters


async def _serve(tools: Sequence[SchemaTool]) -> None:
    server = build_server(tools)  # type: ignore[arg-type]
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m openforgerl.envs.tau2.mcp")
    ap.add_argument("--tools", type=Path, required=True, help="JSON list of OpenAI function schemas")
    ns = ap.parse_args(argv)
    anyio.run(_serve, [SchemaTool.of(s) for s in json.loads(ns.tools.read_text())])


if __name__ == "__main__":
    main()
