"""`python -I -m openforgerl.envs.tau2.service --config FILE --token T`: one tau2
rollout's domain, in the sandbox.

It holds upstream's `Environment` of the task's domain in memory (initial DB as upstream ships it, the
task's `initial_state` applied) and runs every tool call through `Environment.get_response`, so the
only way to change the DB is a tool call, and every call is logged with the reply the agent got. Routes:

- `POST /call/<tool>`, `POST /tools/<tool>`: JSON arguments → 200 `{"result": …}`, 400
  `{"error": …}` (upstream's `Error: …` reply)
- `GET /tools`: the tool names
- `GET /log` + `Authorization: Bearer <token>`: the tool calls (agent's and user's), in order, with their
  replies and requestor; what the agent said with `ask_user`
- `POST /user/<tool>` + `Authorization: Bearer <token>`: a user-side tool call (telecom's phone), as `/call/`;
  the host's only (the user simulator relay, the oracle)
- `GET /healthz`: liveness

The token (per runtime) is in this process's argv and the verifier's only: the agent's execs have their
own PID namespace and no file inside holds it, so the agent cannot read the log, nor act as the user on
the user's device (telecom), and nothing can write the DB or the log but a tool call. The task's
`initial_state` comes in the argv too (`--initial-state`): telecom's initialization actions are the
fault planted on the user's phone, which the agent has to diagnose, so no workdir file holds them. `ask_user`
(when the task runs with a simulated user) is the Claw one (`envs.world.ask_user`): a question
file that the host relay answers.
"""

from __future__ import annotations

import argparse
import hmac
import json
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from openforgerl.env.json_service import JsonHandler
from openforgerl.envs.tau2 import upstream

__all__ = ["Tau2App", "main"]

MAX_BODY = 1024 * 1024
ASK_USER = "ask_user"
USER_ROUTE = "/user/"


def _decoded(content: str) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return content


class Tau2App:
    """The domain environment behind one lock, its call log and the `ask_user` bridge."""

    def __init__(self, env: Any, workspace: Path, user: bool) -> None:
        from openforgerl.env.world import World

        self.env = env
        self.calls: list[dict[str, Any]] = []
        self.said: list[str] = []
        self.user_world = World({}, workspace) if user else None
        self.lock = threading.Lock()

    @property
    def tool_names(self) -> list[str]:
        names = [t.name for t in self.env.get_tools()]
        return names + ([ASK_USER] if self.user_world is not None else [])

    def call(self, name: str, args: Any) -> tuple[int, dict[str, Any]]:
        """An agent tool call (`/call/<tool>`)."""
        if isinstance(args, dict) and name == ASK_USER and self.user_world is not None:
            return self._ask(args)
        return self._run(name, args, "assistant")

    def user_call(self, name: str, args: Any) -> tuple[int, dict[str, Any]]:
        """A user-side tool call (`/user/<tool>`, token only): upstream runs it on the user's toolkit."""
        return self._run(name, args, "user")

    def _run(self, name: str, args: Any, requestor: str) -> tuple[int, dict[str, Any]]:
        if not isinstance(args, dict):
            return 400, {"error": "arguments must be a JSON object"}
        with self.lock:  # one order for both sides: upstream's evaluator replays them in this order
            call_id = f"call-{len(self.calls)}"
            content, error = upstream.respond(self.env, call_id, name, args, requestor)
            self.calls.append(
                {
                    "id": call_id,
                    "name": name,
                    "arguments": args,
                    "content": content,
                    "error": error,
                    "requestor": requestor,
                }
            )
        return (400, {"error": content}) if error else (200, {"result": _decoded(content)})

    def _ask(self, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        from openforgerl.env.world import ToolError, ask_user

        message = args.get("message")
        if not isinstance(message, str):
            return 400, {"error": "ask_user: `message` (a string) is required"}
        with self.lock:
            self.said.append(message)
        try:
            return 200, {"result": ask_user(self.user_world, {"message": message})}  # type: ignore[arg-type]
        except ToolError as exc:
            return exc.status, {"error": str(exc)}

    def log(self) -> dict[str, Any]:
        with self.lock:
            return {"calls": list(self.calls), "said": list(self.said)}


class _Handler(JsonHandler):  # quiet: the call log is the log
    app: Tau2App
    token: str

    def _authorized(self) -> bool:
        given = self.headers.get("Authorization", "").removeprefix("Bearer ")
        return bool(self.token) and hmac.compare_digest(given.encode(), self.token.encode())

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path == "/log":
            return (
                self._send(200, self.app.log())
                if self._authorized()
                else self._send(403, {"error": "forbidden"})
            )
        routes: dict[str, Callable[[], dict[str, Any]]] = {
            "/healthz": lambda: {"ok": True},
            "/tools": lambda: {"tools": self.app.tool_names},
        }
        handler = routes.get(path)
        self._send(200, handler()) if handler else self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        raw = self._read_body(MAX_BODY)
        if raw is None:
            return
        if self.path.startswith(USER_ROUTE):
            if not self._authorized():
                return self._send(403, {"error": "forbidden"})
            return self._answer_tool_call(raw, self.app.user_call, prefixes=(USER_ROUTE,))
        self._answer_tool_call(raw, self.app.call)


def listen(token: str, host: str, port: int) -> tuple[ThreadingHTTPServer, type[_Handler]]:
    """Bind and listen before the domain loads (a second or more under load): a call that comes early
    waits in the listen backlog for its answer instead of being refused. The caller sets `app`."""
    handler: type[_Handler] = type("Handler", (_Handler,), {"token": token})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server, handler


def build_app(
    config: dict[str, Any], workspace: Path, initial_state: dict[str, Any] | None = None
) -> Tau2App:
    env = upstream.environment(str(config["domain"]), initial_state or config.get("initial_state"))
    return Tau2App(env, workspace, bool(config.get("user")))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m openforgerl.envs.tau2.service")
    ap.add_argument("--config", type=Path, required=True, help="JSON: {domain, user}")
    ap.add_argument(
        "--initial-state", default="", help="JSON: the task's initial_state (kept out of the workdir)"
    )
    ap.add_argument("--workspace", type=Path, default=Path("/workdir"))
    ap.add_argument("--token", default="", help="secret for GET /log (the verifier's)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ns = ap.parse_args(argv)
    server, handler = listen(ns.token, ns.host, ns.port)
    try:
        handler.app = build_app(
            json.loads(ns.config.read_text()),
            ns.workspace,
            json.loads(ns.initial_state) if ns.initial_state else None,
        )
    except upstream.Tau2Missing as exc:
        raise SystemExit(f"tau2 service: {exc}") from None
    server.serve_forever()


if __name__ == "__main__":
    main()
