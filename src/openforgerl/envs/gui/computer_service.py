"""The "computer" HTTP/JSON service a GUI harness calls inside the sandbox (127.0.0.1:`COMPUTER_PORT`).

| route | does |
|---|---|
| `GET /healthz` | 200 `{"ok": true}` once the screen is up (poll it; the browser takes ~0.5-8 s) |
| `GET /info` | `{width, height, coordinates: "pixels", actions: [...], keys: [...]}` |
| `GET /screenshot` | the screen now, `image/png`, exactly width x height |
| `POST /act` body `{"action": "click", "x": 10, "y": 20}` | runs it (see `actions.py`) -> `{"ok": true, "executed": {...}}`; a bad action -> 400 `{"error": ...}` (the agent's error) |
| `POST /act` with `"screenshot": true` | the same, answered with the next screenshot (`image/png`) |
| `POST /locate` body `{"selector": css}` + header `X-Openforgerl-Token` | oracle only: the element's box in screen pixels; 404 without the token |

Single-threaded on purpose: actions on one screen are serial, and Playwright's sync API must stay on
the thread that started it.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from openforgerl.envs.gui.actions import ACTIONS, KEYS, ActionError, Computer, apply

__all__ = ["COMPUTER_PORT", "TOKEN_HEADER", "serve_computer"]

COMPUTER_PORT = 8765
TOKEN_HEADER = "X-Openforgerl-Token"
MAX_BODY = 64 * 1024


class _Handler(BaseHTTPRequestHandler):
    computer: Computer
    token: str
    locate: Callable[[str], dict[str, int]] | None
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, body: Any, ctype: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path == "/screenshot":
            return self._send(200, self.computer.screenshot(), "image/png")
        if path == "/healthz":
            return self._send(200, {"ok": True})
        if path == "/info":
            s = self.computer.screen
            return self._send(200, {"width": s.width, "height": s.height, "coordinates": "pixels",
                                    "actions": [*ACTIONS, "screenshot"], "keys": sorted(KEYS)})
        self._send(404, {"error": "not found"})

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True
            raise ActionError(f"body must be 0..{MAX_BODY} bytes")
        try:
            return json.loads(self.rfile.read(length) or b"{}")
        except ValueError as exc:
            raise ActionError("body must be JSON") from exc

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        try:
            if path == "/act":
                return self._act(self._body())
            if path == "/locate" and self._authorized():
                return self._locate(self._body())
        except ActionError as exc:
            return self._send(400, {"error": str(exc)})
        self._send(404, {"error": "not found"})

    def _act(self, body: Any) -> None:
        want_png = isinstance(body, dict) and bool(body.pop("screenshot", False))
        executed = apply(self.computer, body)
        if want_png:
            return self._send(200, self.computer.screenshot(), "image/png")
        self._send(200, {"ok": True, "executed": executed})

    def _authorized(self) -> bool:
        got = self.headers.get(TOKEN_HEADER, "")
        return bool(self.token) and hmac.compare_digest(got.encode(), self.token.encode())

    def _locate(self, body: Any) -> None:
        selector = body.get("selector") if isinstance(body, dict) else None
        if self.locate is None or not isinstance(selector, str):
            raise ActionError("locate needs {'selector': css} on a screen with a browser")
        self._send(200, self.locate(selector))


def serve_computer(computer: Computer, port: int = COMPUTER_PORT, *, token: str = "",
                   locate: Callable[[str], dict[str, int]] | None = None, host: str = "127.0.0.1") -> HTTPServer:
    """Bind the service (port 0 = any); the caller runs `serve_forever` on the computer's thread."""
    handler = type("ComputerHandler", (_Handler,), {"computer": computer, "token": token,
                                                    "locate": staticmethod(locate) if locate else None})
    return HTTPServer((host, port), handler)
