"""Tiny stdlib client for an environment's tool service (Claw's and tau2's MCP servers, shell CLIs and
verifiers, and `zero`'s direct tools use it).

stdlib only so that the CLI starts fast inside a sandbox. A refused connection is retried for a few
seconds because the service may still be starting when the harness makes its first call (`with_retry`).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

__all__ = [
    "DEFAULT_PORT",
    "URL_ENV",
    "ServiceUnreachable",
    "call_tool",
    "get_json",
    "service_url",
    "with_retry",
]

DEFAULT_PORT = 7717
URL_ENV = "OPENFORGERL_CLAW_URL"


class ServiceUnreachable(Exception):
    """The tool service did not answer at all (not running, crashed)."""


def service_url() -> str:
    return os.environ.get(URL_ENV, f"http://127.0.0.1:{DEFAULT_PORT}").rstrip("/")


def _request(req: urllib.request.Request, timeout_s: float) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            return exc.code, json.loads(body)
        except ValueError:
            return exc.code, {"error": body.decode(errors="replace")}


def with_retry(req: urllib.request.Request, timeout_s: float, wait_s: float) -> tuple[int, Any]:
    """`req` -> (HTTP status, decoded JSON body); a refused connection is retried for `wait_s` seconds."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return _request(req, timeout_s)
        except (urllib.error.URLError, ConnectionError) as exc:
            refused = isinstance(getattr(exc, "reason", exc), ConnectionRefusedError)
            if not refused or time.monotonic() > deadline:
                raise ServiceUnreachable(f"{req.full_url}: {exc}") from exc
            time.sleep(0.05)


def call_tool(
    name: str,
    args: dict[str, Any],
    *,
    url: str | None = None,
    timeout_s: float = 30.0,
    wait_s: float = 10.0,
    route: str = "call",
) -> tuple[int, Any]:
    """POST one tool call to `/<route>/<name>` → (HTTP status, decoded JSON body).

    `route` is `call` for the MCP server and the shell CLI, `tools` for `zero`'s direct-tool route."""
    data = json.dumps(args).encode()
    req = urllib.request.Request(
        f"{(url or service_url()).rstrip('/')}/{route}/{name}",
        data=data,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    return with_retry(req, timeout_s, wait_s)


def get_json(
    path: str, *, url: str | None = None, timeout_s: float = 30.0, wait_s: float = 10.0, token: str = ""
) -> Any:
    """GET `/state`, `/audit`, ... → decoded JSON; raises ServiceUnreachable or on a non-200. `token`: the
    bearer of a host-only route (`/upstream/audit`)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(f"{url or service_url()}{path}", headers=headers)
    status, body = with_retry(req, timeout_s, wait_s)
    if status != 200:
        raise ServiceUnreachable(f"GET {path} answered {status}: {body}")
    return body
