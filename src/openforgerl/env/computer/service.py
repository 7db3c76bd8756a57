"""The "computer" HTTP/JSON service a GUI harness calls inside the sandbox (127.0.0.1:`COMPUTER_PORT`).
Routes:

- `GET /healthz`: 200 `{"ok": true}` once the screen is up (poll it; the browser takes ~0.5-8 s)
- `GET /info`: `{width, height, kind, coordinates: "pixels", actions: [...], keys: [...]}`
  (`kind`: "browser" or "desktop", what a harness names in its tool description)
- `GET /screenshot`: the screen now, `image/png`, exactly width x height
- `POST /act` body `{"action": "click", "x": 10, "y": 20}`: runs it (see `actions.py`) ->
  `{"ok": true, "executed": {...}}`; a bad action -> 400 `{"error": ...}` (the agent's error)
- `POST /act` with `"screenshot": true`: the same, answered with the next screenshot (`image/png`)
- `POST /locate` body `{"selector": css}` + header `X-Openforgerl-Token`: oracle only: the element's box in
  screen pixels; 404 without the token
- `GET /__health` + header `X-Openforgerl-Token`: verifier only: takes a screenshot now -> 200
  `{"ok": true, "faults": n, "last_fault": ..., "ready_s": s}`, or 503
  `{"ok": false, ...}`; 404 without the token

**Faults** (the environment's own failures, never the agent's): a screenshot that fails twice, or an
action that raises something other than `ActionError` *and* leaves the screen unable to take a
screenshot (the browser or X server died), is answered 503 and counted. An action that raises while
the screen still works is answered 400 (the agent's action failed, e.g. a key the page refused), so
no input the agent chooses can turn its rollout into infra. The verifier reads the count through
`/__health` (`gui.verify`): a rollout with a fault, or whose screen no longer answers, is infra. So is
one whose screen took longer than `gui.verify.READY_LIMIT_S` to come up (`ready_s`, measured from the
service's process start): the harness gave up waiting before the policy saw anything, and nothing the
policy does can delay a screen it has not seen yet.

Single-threaded on purpose: actions on one screen are serial, and Playwright's sync API must stay on
the thread that started it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from openforgerl.env.computer.actions import ACTIONS, KEYS, ActionError, Computer, apply

__all__ = ["COMPUTER_PORT", "TOKEN_HEADER", "serve_computer", "token_id"]

COMPUTER_PORT = 8765
TOKEN_HEADER = "X-Openforgerl-Token"
MAX_BODY = 64 * 1024


def token_id(token: str) -> str:
    """A public name for a secret token (a hash prefix: it tells which token a
    service holds, not the token)."""
    return hashlib.sha256(b"openforgerl-gui-service:" + token.encode()).hexdigest()[:16] if token else ""


class _Faults:
    """The service's own failures so far (read by the verifier through `/__health`)."""

    def __init__(self) -> None:
        self.count, self.last = 0, ""

    def add(self, what: str, exc: BaseException) -> str:
        self.count += 1
        self.last = f"{what}: {type(exc).__name__}: {str(exc)[:300]}"
        return self.last


class _Handler(BaseHTTPRequestHandler):
    computer: Computer
    token: str
    locate: Callable[[str], dict[str, int]] | None
    faults: _Faults
    ready_s: float
    kind: str
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
            return self._screenshot()
        if path == "/healthz":
            return self._send(200, {"ok": True})
        if path == "/__health" and self._authorized():
            return self._health()
        if path == "/info":
            s = self.computer.screen
            return self._send(
                200,
                {
                    "width": s.width,
                    "height": s.height,
                    "kind": self.kind,
                    "coordinates": "pixels",
                    "actions": [*ACTIONS, "screenshot"],
                    "keys": sorted(KEYS),
                },
            )
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
        try:
            executed = apply(self.computer, body)
        except ActionError:
            raise
        except Exception as exc:  # the screen raised: its death is a fault, a refused input the agent's error
            if self._grab() is None:
                return self._fault("action", exc)
            raise ActionError(f"the action failed: {type(exc).__name__}: {str(exc)[:200]}") from exc
        if want_png:
            return self._screenshot()
        self._send(200, {"ok": True, "executed": executed})

    def _grab(self) -> bytes | None:
        """A screenshot, or None when the screen cannot take one (it died or hangs past its timeout)."""
        try:
            return self.computer.screenshot()
        except Exception:
            return None

    def _screenshot(self) -> None:
        try:
            png = self.computer.screenshot()
        except Exception:  # once more: a slow frame under load is not a dead screen
            try:
                png = self.computer.screenshot()
            except Exception as exc:
                return self._fault("screenshot", exc)
        self._send(200, png, "image/png")

    def _fault(self, what: str, exc: BaseException) -> None:
        self._send(503, {"error": self.faults.add(what, exc)})

    def _health(self) -> None:
        ok = self._grab() is not None
        body = {
            "ok": ok,
            "faults": self.faults.count,
            "last_fault": self.faults.last,
            "ready_s": self.ready_s,
        }
        self._send(200 if ok else 503, body)

    def _authorized(self) -> bool:
        got = self.headers.get(TOKEN_HEADER, "")
        return bool(self.token) and hmac.compare_digest(got.encode(), self.token.encode())

    def _locate(self, body: Any) -> None:
        selector = body.get("selector") if isinstance(body, dict) else None
        if self.locate is None or not isinstance(selector, str):
            raise ActionError("locate needs {'selector': css} on a screen with a browser")
        self._send(200, self.locate(selector))


def serve_computer(
    computer: Computer,
    port: int = COMPUTER_PORT,
    *,
    token: str = "",
    locate: Callable[[str], dict[str, int]] | None = None,
    host: str = "127.0.0.1",
    ready_s: float = 0.0,
    kind: str = "",
) -> HTTPServer:
    """Bind the service (port 0 = any); the caller runs `serve_forever` on the computer's thread.
    `ready_s`: how long the screen took to come up (reported to the verifier); `kind`: the environment's."""
    handler = type(
        "ComputerHandler",
        (_Handler,),
        {
            "computer": computer,
            "token": token,
            "faults": _Faults(),
            "ready_s": round(ready_s, 3),
            "kind": kind,
            "locate": staticmethod(locate) if locate else None,
        },
    )
    return HTTPServer((host, port), handler)
