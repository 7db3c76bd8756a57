"""The tools `zero` offers: the task's function tools (executed by the task's HTTP service) plus three
built-ins against the workdir (`write_file`, `read_file`, `bash`). A task tool with a built-in's name wins.

Tool errors are returned to the model as text (they are the agent's problem, not infrastructure).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openforgerl.env.tool_client import call_tool

MAX_OUTPUT = 16_000

Executor = Callable[[Mapping[str, Any]], str]


def _fn(name: str, description: str, **props: str) -> dict[str, Any]:
    properties = {k: {"type": "string", "description": v} for k, v in props.items()}
    params = {"type": "object", "properties": properties, "required": list(props)}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


BUILTIN_SCHEMAS: dict[str, dict[str, Any]] = {
    "write_file": _fn(
        "write_file",
        "Write a text file (creates or overwrites it).",
        path="File path, relative to the working directory.",
        content="Full file content.",
    ),
    "read_file": _fn("read_file", "Read a text file.", path="File path, relative to the working directory."),
    "bash": _fn(
        "bash",
        "Run a shell command in the working directory; returns exit code and output.",
        command="The command line.",
    ),
}


def _clip(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT else text[:MAX_OUTPUT] + "\n[output truncated]"


def _inside(workdir: Path, rel: str) -> Path:
    path = (workdir / rel).resolve()
    if not path.is_relative_to(workdir.resolve()):
        raise ValueError(f"path {rel!r} is outside the working directory")
    return path


def builtin_executors(workdir: Path, bash_timeout_s: float = 120.0) -> dict[str, Executor]:
    def write_file(args: Mapping[str, Any]) -> str:
        path = _inside(workdir, str(args["path"]))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(args.get("content", "")))
        return f"wrote {len(str(args.get('content', '')))} characters to {args['path']}"

    def read_file(args: Mapping[str, Any]) -> str:
        return _clip(_inside(workdir, str(args["path"])).read_text(errors="replace"))

    def bash(args: Mapping[str, Any]) -> str:
        proc = subprocess.run(
            str(args["command"]),
            shell=True,
            cwd=workdir,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=bash_timeout_s,
            stdin=subprocess.DEVNULL,
        )
        return _clip(f"exit code {proc.returncode}\n{proc.stdout}{proc.stderr}")

    return {"write_file": write_file, "read_file": read_file, "bash": bash}


def _service_text(status: int, body: Any) -> str:
    """The service's JSON answer as the model sees it: the result, or the error with its status."""
    if status == 200 and isinstance(body, dict) and "result" in body:
        return _clip(json.dumps(body["result"], indent=2))
    if status != 200:
        error = body.get("error") if isinstance(body, dict) else body
        return _clip(f"error ({status}): {error}")
    return _clip(json.dumps(body, indent=2))


def service_executor(
    service_url: str, name: str, timeout_s: float = 60.0, ready_wait_s: float = 15.0
) -> Executor:
    """POST the call's arguments as JSON to `{service_url}/tools/{name}` (the envs services' direct route),
    through `envs.client.call_tool`: a refused connection is retried for up to `ready_wait_s`, since the
    task's service starts beside the harness and `zero` can be asking before it listens."""

    def call(args: Mapping[str, Any]) -> str:
        status, body = call_tool(
            name, dict(args), url=service_url, timeout_s=timeout_s, wait_s=ready_wait_s, route="tools"
        )
        return _service_text(status, body)

    return call


@dataclass
class ToolBox:
    """Schemas to show the model and the functions that run them, by tool name."""

    schemas: list[dict[str, Any]] = field(default_factory=list)
    executors: dict[str, Executor] = field(default_factory=dict)

    def run(self, name: str, arguments: str) -> str:
        """Execute one call; every failure becomes a text result the model can read."""
        if name not in self.executors:
            return f"error: unknown tool {name!r}"
        try:
            args = json.loads(arguments or "{}")
            if not isinstance(args, dict):
                return "error: tool arguments must be a JSON object"
            return self.executors[name](args)
        except Exception as exc:  # any tool failure is the agent's, reported as text
            return f"error: {type(exc).__name__}: {exc}"


def _tool_name(schema: Mapping[str, Any]) -> str:
    return str(schema["function"]["name"])


def load_toolbox(
    tools_json: Path | None,
    workdir: Path,
    service_url: str = "",
    builtins: Sequence[str] = tuple(BUILTIN_SCHEMAS),
) -> ToolBox:
    """Task tools from `tools_json` (a list of schemas, or
    `{"tools": [...], "service_url": ...}`) plus built-ins."""
    spec: Any = json.loads(tools_json.read_text()) if tools_json else []
    if isinstance(spec, dict):
        service_url = service_url or str(spec.get("service_url") or "")
        spec = spec.get("tools", [])
    box = ToolBox()
    for schema in spec:
        box.schemas.append(dict(schema))
        if service_url:
            box.executors[_tool_name(schema)] = service_executor(service_url, _tool_name(schema))
    local = builtin_executors(workdir)
    for name in builtins:
        if name not in box.executors and not any(_tool_name(s) == name for s in box.schemas):
            box.schemas.append(BUILTIN_SCHEMAS[name])
            box.executors[name] = local[name]
    return box
