"""stdio MCP server exposing the Claw tools (`python -m openforgerl.envs.claw.mcp_server --tools a,b`).

The tools are listed from the world's tool table (`env.world_tools.TOOLS`); the bridge itself, forwarding each
call to the rollout's Claw service, is the SDK's (`openforgerl.env.mcp_server`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import anyio

from openforgerl.env.mcp_server import serve
from openforgerl.env.world_tools import TOOLS, tools_for

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m openforgerl.envs.claw.mcp_server")
    ap.add_argument("--tools", default="", help="comma-separated tool names (default: all)")
    ns = ap.parse_args(argv)
    names = [n for n in ns.tools.split(",") if n]
    anyio.run(serve, tools_for(names=names) if names else TOOLS)


if __name__ == "__main__":
    main()
