"""`openforgerl-claw`: the Claw tools as a shell command, for shell-only harnesses.

Generated from the tool registry: `openforgerl-claw <service> <command> --param value ...`, e.g.
`openforgerl-claw mail send --to bob@example.com --subject Hi --body "See you"`. Prints the tool's JSON
result on stdout; on a tool error prints it on stderr and exits 1 (so `cmd || retry` works for the
transient failures some tasks inject).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from openforgerl.env.tool_client import ServiceUnreachable, call_tool
from openforgerl.env.world_tools import TOOLS, Param, ToolSpec

__all__ = ["build_parser", "main", "usage_lines"]


def _add_param(sub: argparse.ArgumentParser, p: Param) -> None:
    flag = "--" + p.name.replace("_", "-")
    if p.type == "boolean":
        sub.add_argument(flag, dest=p.name, action="store_true", default=None, help=p.description)
        return
    kwargs: dict[str, object] = {"dest": p.name, "required": p.required, "help": p.description}
    if p.type == "array":
        kwargs["nargs"] = "+"
    if p.type == "integer":
        kwargs["type"] = int
    sub.add_argument(flag, **kwargs)  # type: ignore[arg-type]


def build_parser(tools: Sequence[ToolSpec] = TOOLS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="openforgerl-claw",
        description="Use the task's mail, calendar, contacts, knowledge base, to-do, notes and file tools.",
    )
    groups = parser.add_subparsers(dest="service", required=True, metavar="SERVICE")
    services: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}
    for tool in tools:
        if tool.service not in services:
            services[tool.service] = groups.add_parser(tool.service).add_subparsers(
                dest="command", required=True, metavar="COMMAND"
            )
        sub = services[tool.service].add_parser(
            tool.command, help=tool.description, description=tool.description
        )
        sub.set_defaults(tool=tool.name, params=[p.name for p in tool.params])
        for param in tool.params:
            _add_param(sub, param)
    return parser


def usage_lines(tools: Sequence[ToolSpec], program: str = "openforgerl-claw") -> list[str]:
    """One line per tool, e.g.
    `openforgerl-claw mail send --to TO --subject SUBJECT --body BODY [--cc CC]`."""
    lines = []
    for tool in tools:
        parts = [program, tool.service, tool.command]
        for p in tool.params:
            flag = "--" + p.name.replace("_", "-")
            arg = (
                flag
                if p.type == "boolean"
                else f"{flag} {p.name.upper()}{' ...' if p.type == 'array' else ''}"
            )
            parts.append(arg if p.required else f"[{arg}]")
        lines.append(f"{' '.join(parts)}    # {tool.description}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    args = {name: getattr(ns, name) for name in ns.params if getattr(ns, name) is not None}
    try:
        status, body = call_tool(ns.tool, args)
    except ServiceUnreachable as exc:
        print(f"error: tool service unreachable: {exc}", file=sys.stderr)
        return 2
    if status != 200:
        print(f"error ({status}): {body.get('error') if isinstance(body, dict) else body}", file=sys.stderr)
        return 1
    print(json.dumps(body.get("result"), indent=2))
    return 0


def entry() -> None:
    """Console-script entry point (`openforgerl-claw`)."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
