"""Upstream Claw-Eval mock services (FastAPI apps) run in the Claw service process, called through ASGI.

An imported Claw-Eval task whose tools are endpoints of upstream's `mock_services/<svc>/server.py` carries
those files (with `mock_services/_base.py` and the fixtures they read) under `environment/upstream/`, laid
out as in upstream's repository, plus `services.json` (the importer's `upstream_material`):

```json
{"services": [{"name": "helpdesk", "server": "mock_services/helpdesk/server.py",
               "env": {"HELPDESK_FIXTURES": "tasks/T017/fixtures/helpdesk/tickets.json"},
               "audit": "/helpdesk/audit"}],
 "tools": [{"name": "helpdesk_list_tickets", "description": "...", "input_schema": {...},
            "service": "helpdesk", "method": "POST", "path": "/helpdesk/tickets"}]}
```

At start the Claw service (`server.py`) loads every app once, in this process: the sources are read into
memory and executed as modules (`mock_services._base` pre-registered, so no import comes from the
workdir later; `sys.path` is restored after each server's module code ran), with the task's env set
(relative paths made absolute under the copied tree; upstream resolves them from its repo root). No app
listens on a port: a tool call is one ASGI request built here (`asgi_request`). The agent reaches only
the declared `(method, path)` of its tools, through `POST /call/<tool>`; each service's `/audit` is read
only by the verifier, through the token-protected `GET /upstream/audit` of the Claw service, and
nothing reaches `/reset`. Upstream's runner reads the same audit after the agent loop
(`runner/loop.py`: the reset endpoint with `/reset` replaced by `/audit`, keyed by the service name).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ["UpstreamServices", "UpstreamTool", "asgi_request", "load_upstream"]

MANIFEST = "services.json"
MAX_RESPONSE = 8 * 1024 * 1024


@dataclass(frozen=True)
class UpstreamTool:
    name: str
    service: str
    method: str
    path: str


async def _asgi(app: Any, method: str, path: str, body: bytes) -> tuple[int, bytes]:
    """One HTTP/1.1 request to an ASGI app, in memory: (status, body)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method.upper(),
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"localhost"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 0),
        "server": ("localhost", 80),
    }
    sent = False
    status, chunks = 500, bytearray()

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await asyncio.Event().wait()  # no disconnect while the app works
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Mapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
        elif message["type"] == "http.response.body" and len(chunks) < MAX_RESPONSE:
            chunks.extend(message.get("body", b""))

    await app(scope, receive, send)
    return status, bytes(chunks)


def asgi_request(app: Any, method: str, path: str, payload: Any = None) -> tuple[int, Any]:
    """Call `app` once (a fresh event loop: the caller is a server thread) → (status, decoded JSON body)."""
    body = b"" if payload is None else json.dumps(payload).encode()
    status, raw = asyncio.run(_asgi(app, method, path, body))
    try:
        return status, json.loads(raw or b"null")
    except ValueError:
        return status, raw.decode(errors="replace")


def _module(name: str, source: bytes, file: Path, package: str | None = None) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = str(file)
    module.__package__ = package
    sys.modules[name] = module  # pydantic resolves the models' annotations through it
    saved = list(sys.path)
    try:
        exec(compile(source, str(file), "exec"), module.__dict__)  # the task's environment code
    finally:
        sys.path[:] = (
            saved  # upstream's servers put their repo root first: nothing more is imported from there
        )
    return module


def _env_value(value: str, root: Path) -> str:
    rel = PurePosixPath(value)
    return str(root / rel) if value and not rel.is_absolute() and (root / rel).exists() else value


class UpstreamServices:
    """The apps of one rollout and the tools that reach them (name → declared method and path)."""

    def __init__(
        self,
        apps: dict[str, Any],
        audits: dict[str, str],
        tools: dict[str, UpstreamTool],
        schemas: list[dict[str, Any]],
    ) -> None:
        self.apps = apps
        self.audits = audits
        self.tools = tools
        self.schemas = schemas

    def call(self, name: str, args: Any) -> tuple[int, Any]:
        """The declared endpoint of tool `name` with `args` as its JSON body, as upstream's dispatcher
        sends it: (status, decoded reply)."""
        tool = self.tools[name]
        return asgi_request(self.apps[tool.service], tool.method, tool.path, args)

    def audit(self) -> dict[str, Any]:
        """Every service's /audit, keyed by its name (upstream's `audit_data`)."""
        out: dict[str, Any] = {}
        for service, path in self.audits.items():
            status, body = asgi_request(self.apps[service], "GET", path)
            if status == 200:
                out[service] = body
        return out


def load_upstream(root: Path) -> UpstreamServices:
    """Load the apps of `root/services.json` (see the module docstring) into this process."""
    manifest = json.loads((root / MANIFEST).read_text())
    base = root / "mock_services" / "_base.py"
    package = types.ModuleType("mock_services")
    package.__path__ = []
    sys.modules["mock_services"] = package
    package._base = _module("mock_services._base", base.read_bytes(), base, "mock_services")  # type: ignore[attr-defined]
    apps, audits = {}, {}
    for svc in manifest["services"]:
        name, server = str(svc["name"]), root / PurePosixPath(str(svc["server"]))
        os.environ.update({str(k): _env_value(str(v), root) for k, v in (svc.get("env") or {}).items()})
        module = _module(f"claw_upstream_{name}", server.read_bytes(), server)
        apps[name] = module.app
        if svc.get("audit"):
            audits[name] = str(svc["audit"])
    tools = {
        str(t["name"]): UpstreamTool(
            str(t["name"]), str(t["service"]), str(t.get("method") or "POST"), str(t["path"])
        )
        for t in manifest["tools"]
    }
    schemas = [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": str(t.get("description") or ""),
                "parameters": t.get("input_schema") or {"type": "object"},
            },
        }
        for t in manifest["tools"]
    ]
    return UpstreamServices(apps, audits, tools, schemas)
