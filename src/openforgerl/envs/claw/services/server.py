"""One small HTTP process per rollout serving every Claw service on loopback.

stdlib `http.server` on purpose: it starts in ~60 ms (aiohttp's import alone costs ~300 ms) and one
rollout's agent makes at most a few calls a second. Routes:

- `POST /call/<tool>` body = JSON arguments: runs the tool → 200 `{"result": …}`,
  4xx `{"error": …}` (agent error)
- `POST /tools/<tool>`: the same (the `zero` harness's direct-tool route)
- `GET /tools`: the tool names this rollout exposes
- `GET /state`: full state snapshot (verifiers)
- `GET /audit`: every call: seq, tool, args, status, error, fault
- `POST /reset`: back to the fixtures (audit is kept, the reset is audited)
- `GET /healthz`: liveness
- `GET /upstream/audit` + `Authorization: Bearer <token>`: upstream Claw-Eval services' /audit,
  by service name (the verifier's)

An imported Claw-Eval task may also offer tools that are endpoints of upstream's own mock services
(`--upstream DIR`, `services/upstream.py`): `POST /call/<tool>` of such a tool is one in-process ASGI request
to that tool's declared endpoint, audited here like the others (with the reply). Nothing else of those
apps is reachable but their /audit, and only with the token (in this process's argv and the verifier's).

Fault injection (`config.json` → `faults`): the Nth call of a tool answers a transient 5xx, or stalls
`delay_s` and then answers 504, *without* touching state; the agent has to retry.
"""

from __future__ import annotations

import argparse
import hmac
import json
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openforgerl.env.json_service import JsonHandler
from openforgerl.env.world import OPS, ToolError, World, load_fixtures
from openforgerl.env.world_tools import get_tool

if TYPE_CHECKING:
    from openforgerl.envs.claw.services.upstream import UpstreamServices

__all__ = ["ClawApp", "main", "serve"]


class ClawApp:
    """Routing-free core: tool calls with audit and faults, thread-safe behind one lock."""

    def __init__(
        self,
        world: World,
        tools: list[str] | None,
        faults: list[dict[str, Any]],
        upstream: UpstreamServices | None = None,
    ) -> None:
        self.world = world
        self.upstream = upstream
        self.tools = tools if upstream is None else [*(tools or []), *upstream.tools]
        self.faults = faults
        self.audit: list[dict[str, Any]] = []
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()

    def call(self, name: str, args: Any) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.counts[name] = self.counts.get(name, 0) + 1
            fault = self._fault(name, self.counts[name])
        if fault is not None:
            return self._inject(name, args, fault)
        with self.lock:
            if self.upstream is not None and name in self.upstream.tools:
                return self._run_upstream(self.upstream, name, args)
            status, body = self._run(name, args)
            self._record(name, args, status, body.get("error"))
            return status, body

    def _run_upstream(self, upstream: UpstreamServices, name: str, args: Any) -> tuple[int, dict[str, Any]]:
        """A tool on an upstream service: its reply as the result (an error at 4xx/5xx, as upstream's
        dispatcher marks it), audited with the reply (upstream's dispatches keep it)."""
        if not isinstance(args, dict):
            status, reply = 400, {"error": "arguments must be a JSON object"}
        else:
            try:
                status, reply = upstream.call(name, args)
            except Exception as exc:  # upstream's dispatcher answers 500 with the exception's text
                status, reply = 500, {"error": f"{type(exc).__name__}: {exc}"}
        body = {"result": reply} if status < 400 else {"error": reply}
        self._record(
            name,
            args,
            status,
            None if status < 400 else json.dumps(reply, ensure_ascii=False)[:2000],
            response=reply,
        )
        return (200 if status < 400 else status), body

    def _run(self, name: str, args: Any) -> tuple[int, dict[str, Any]]:
        spec = get_tool(name)
        if spec is None or (self.tools is not None and name not in self.tools):
            return 404, {"error": f"unknown tool {name!r}; available: {', '.join(self.tools or [])}"}
        if not isinstance(args, dict):
            return 400, {"error": "arguments must be a JSON object"}
        problem = spec.check_args(args)
        if problem:
            return 400, {"error": f"{name}: {problem}"}
        try:
            return 200, {"result": OPS[name](self.world, args)}
        except ToolError as exc:
            return exc.status, {"error": str(exc)}
        except Exception as exc:  # a bug in a tool must not kill the connection: answer 500, audit it
            return 500, {"error": f"internal error in {name}: {type(exc).__name__}: {exc}"}

    def _fault(self, name: str, count: int) -> dict[str, Any] | None:
        for fault in self.faults:
            if fault.get("tool") == name and int(fault.get("call", 1)) == count:
                return fault
        return None

    def _inject(self, name: str, args: Any, fault: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if fault.get("kind") == "timeout":
            time.sleep(float(fault.get("delay_s", 2.0)))
            status, message = 504, "upstream timed out; the request was not processed, retry"
        else:
            status, message = int(fault.get("status", 503)), "service temporarily unavailable, retry"
        with self.lock:
            self._record(name, args, status, message, fault=fault.get("kind", "error"))
        return status, {"error": message}

    def _record(
        self,
        name: str,
        args: Any,
        status: int,
        error: str | None,
        fault: str | None = None,
        response: Any = None,
    ) -> None:
        self.audit.append(
            {
                "seq": len(self.audit),
                "tool": name,
                "args": args,
                "status": status,
                "ok": status < 400 if response is not None else status == 200,
                "error": error,
                "fault": fault,
                "t": time.time(),
                **({"response": response} if response is not None else {}),
            }
        )

    def reset(self) -> None:
        with self.lock:
            self.world.reset()
            self.counts.clear()
            self._record("__reset__", {}, 200, None)


MAX_BODY = 8 * 1024 * 1024
UPSTREAM_AUDIT = "/upstream/audit"


class _Handler(JsonHandler):  # quiet: the audit is the log
    app: ClawApp
    token: str = ""

    def _authorized(self) -> bool:
        given = self.headers.get("Authorization", "").removeprefix("Bearer ")
        return bool(self.token) and hmac.compare_digest(given.encode(), self.token.encode())

    def do_GET(self) -> None:
        if self.path.split("?")[0] == UPSTREAM_AUDIT:
            if not self._authorized() or self.app.upstream is None:
                return self._send(403, {"error": "forbidden"})
            with self.app.lock:
                return self._send(200, self.app.upstream.audit())
        routes: dict[str, Callable[[], object]] = {
            "/healthz": lambda: {"ok": True},
            "/state": self.app.world.state,
            "/audit": lambda: {"calls": list(self.app.audit)},
            "/tools": lambda: {"tools": self.app.tools},
        }
        handler = routes.get(self.path.split("?")[0])
        self._send(200, handler()) if handler else self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        raw = self._read_body(MAX_BODY)
        if raw is None:
            return
        if self.path == "/reset":
            self.app.reset()
            return self._send(200, {"reset": True})
        self._answer_tool_call(raw, self.app.call)


def build_app(
    fixtures: Path | None, workspace: Path, config: dict[str, Any], upstream: Path | None = None
) -> ClawApp:
    world = World(load_fixtures(fixtures), workspace)
    services = None
    if upstream is not None:
        from openforgerl.envs.claw.services.upstream import load_upstream

        services = load_upstream(upstream)
    return ClawApp(world, config.get("tools"), list(config.get("faults") or []), services)


def serve(app: ClawApp, host: str, port: int, token: str = "") -> ThreadingHTTPServer:
    """Bind (port 0 = any free port); the caller runs `serve_forever`."""
    handler = type("Handler", (_Handler,), {"app": app, "token": token})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m openforgerl.envs.claw.services", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--fixtures", type=Path, default=None, help="folder with <service>.json initial states")
    ap.add_argument("--workspace", type=Path, default=Path.cwd(), help="the agent's workspace folder")
    ap.add_argument("--config", type=Path, default=None, help="JSON: {tools: [...], faults: [...]}")
    ap.add_argument(
        "--upstream", type=Path, default=None, help="upstream Claw-Eval services (services/upstream.py)"
    )
    ap.add_argument("--token", default="", help="secret for GET /upstream/audit (the verifier's)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=7717)
    ap.add_argument("--port-file", type=Path, default=None, help="write the bound port here when ready")
    ns = ap.parse_args(argv)
    config = json.loads(ns.config.read_text()) if ns.config else {}
    # listen before loading (upstream's apps take a second or more): an early call waits in the backlog
    server = serve(None, ns.host, ns.port, ns.token)  # type: ignore[arg-type]
    server.RequestHandlerClass.app = build_app(ns.fixtures, ns.workspace, config, ns.upstream)  # type: ignore[attr-defined]
    if ns.port_file:
        ns.port_file.write_text(str(server.server_address[1]))
    server.serve_forever()
