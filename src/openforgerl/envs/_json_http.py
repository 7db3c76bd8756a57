"""The JSON-over-HTTP request handler the in-sandbox tool services share (Claw, tau2): stdlib only,
because every sandbox starts one and its import time is on the rollout's clock."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

__all__ = ["JsonHandler"]


class JsonHandler(BaseHTTPRequestHandler):
    """HTTP/1.1, silent (the service keeps its own log), answers with `_send(status, body)`."""

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
