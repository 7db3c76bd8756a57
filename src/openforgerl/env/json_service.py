"""The JSON-over-HTTP request handler the in-sandbox tool services share (Claw, tau2): stdlib only,
because every sandbox starts one and its import time is on the rollout's clock."""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

__all__ = ["JsonHandler"]


class JsonHandler(BaseHTTPRequestHandler):
    """HTTP/1.1, silent (the service keeps its own log), answers with `_send(status, body)`; a service's
    tool calls are `POST /call/<tool>` (or `/tools/<tool>`) with JSON arguments (`_answer_tool_call`)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self, limit: int) -> bytes | None:
        """The request body, or None after a 413: the agent reaches these services, and a huge (or lying)
        Content-Length must not make one allocate it."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= limit:
            self.close_connection = True
            self._send(413, {"error": f"body must be 0..{limit} bytes"})
            return None
        return self.rfile.read(length)

    def _answer_tool_call(
        self,
        raw: bytes,
        call: Callable[[str, Any], tuple[int, Any]],
        prefixes: tuple[str, ...] = ("/call/", "/tools/"),
    ) -> None:
        prefix = next((p for p in prefixes if self.path.startswith(p)), None)
        if prefix is None:
            return self._send(404, {"error": "not found"})
        try:
            args = json.loads(raw or b"{}")
        except ValueError:
            return self._send(400, {"error": "body must be JSON"})
        self._send(*call(self.path[len(prefix) :], args))
