"""A tiny stdlib web layer for the apps: routing, forms, HTML pages, and the guarded state route.

Every app is a `WebApp` with a URL prefix (`/shop`, `/mail`, ...) and a table of routes; all apps of a
rollout share one `ThreadingHTTPServer` on 127.0.0.1:`APPS_PORT` and one `Store`. Server-rendered HTML
with plain forms (no JavaScript), so a page is the same pixels every time.

`GET /__state` answers the whole store as JSON **only** with the rollout's secret in
`X-Openforgerl-Token` (else 404, as if it did not exist). The secret is in the service's argv, which
the agent cannot see (other PID namespace), and in the verifier's argv (after the agent is gone).
"""

from __future__ import annotations

import copy
import hmac
import html
import json
import re
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["APPS_PORT", "STATE_PATH", "Page", "Request", "Store", "WebApp", "esc", "page", "serve_apps"]

APPS_PORT = 8080
STATE_PATH = "/__state"
TOKEN_HEADER = "X-Openforgerl-Token"
MAX_BODY = 256 * 1024

esc = html.escape

CSS = """body{font-family:'DejaVu Sans',sans-serif;margin:0;font-size:16px;color:#222;background:#fff}
header{background:#2b4c7e;color:#fff;padding:10px 24px;font-size:22px;height:32px}
header a{color:#fff;text-decoration:none;margin-right:24px;font-size:16px}
main{padding:16px 24px}h1{font-size:24px;margin:4px 0 12px}
table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:6px 12px;text-align:left}
input[type=text],input[type=email],input[type=date],select,textarea{font-size:16px;padding:6px;width:320px}
textarea{height:90px}button,input,select,textarea{font-family:inherit}
button,input[type=submit]{font-size:16px;padding:6px 14px;margin:2px;cursor:pointer}
label{display:inline-block;width:140px}.row{margin:8px 0}.note{color:#555}
.col{display:inline-block;vertical-align:top;width:360px;margin-right:16px;background:#f3f5f8;padding:8px;min-height:300px}
.card{background:#fff;border:1px solid #ccc;padding:8px;margin:6px 0}"""


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: Mapping[str, str]
    form: Mapping[str, list[str]]

    def get(self, name: str, default: str = "") -> str:
        values = self.form.get(name)
        return values[0].strip() if values else self.query.get(name, default)

    def all(self, name: str) -> list[str]:
        return list(self.form.get(name, []))


@dataclass(frozen=True)
class Page:
    status: int = 200
    body: str = ""
    location: str = ""  # set: a 303 redirect (post/redirect/get)


def page(title: str, body: str, nav: str = "") -> Page:
    doc = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title><style>{CSS}</style>"
        f"</head><body><header>{esc(title)} &nbsp; {nav}</header><main>{body}</main></body></html>"
    )
    return Page(body=doc)


def redirect(location: str) -> Page:
    return Page(303, "", location)


Route = tuple[str, str, Callable[..., Page]]


@dataclass
class Store:
    """Every app's state, one lock; `snapshot` is what the verifier reads."""

    data: dict[str, Any] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return copy.deepcopy(self.data)


class WebApp:
    """One app: `prefix`, `routes()` = [(method, regex relative to prefix, handler(req, *groups))]."""

    name = ""
    prefix = ""

    def __init__(self, store: Store, fixtures: Mapping[str, Any]) -> None:
        self.store = store
        with store.lock:
            store.data[self.name] = self.initial(copy.deepcopy(dict(fixtures)))

    @property
    def state(self) -> Any:
        return self.store.data[self.name]

    def initial(self, fixtures: dict[str, Any]) -> Any:
        return fixtures

    def routes(self) -> list[Route]:
        return []

    def nav(self) -> str:
        return ""


class _Router:
    def __init__(self, apps: list[WebApp]) -> None:
        self.table = [
            (m, re.compile(re.escape(a.prefix) + pat + "$"), h, a) for a in apps for m, pat, h in a.routes()
        ]

    def dispatch(self, req: Request) -> Page:
        for method, pattern, handler, app in self.table:
            hit = pattern.match(req.path)
            if hit and method == req.method:
                with app.store.lock:
                    return handler(req, *hit.groups())
        return Page(404, "<h1>Not found</h1>")


class _Handler(BaseHTTPRequestHandler):
    router: _Router
    store: Store
    token: str
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _reply(self, p: Page, ctype: str = "text/html; charset=utf-8") -> None:
        data = p.body.encode()
        self.send_response(p.status)
        if p.location:
            self.send_header("Location", p.location)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _request(self, method: str, raw: bytes = b"") -> Request:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        form = urllib.parse.parse_qs(raw.decode(errors="replace"), keep_blank_values=True)
        return Request(method, url.path.rstrip("/") or "/", query, form)

    def do_GET(self) -> None:
        if self.path.split("?")[0] == STATE_PATH:
            return self._state()
        self._reply(self.router.dispatch(self._request("GET")))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True
            return self._reply(Page(413, "too large"))
        self._reply(self.router.dispatch(self._request("POST", self.rfile.read(length))))

    def _state(self) -> None:
        got = self.headers.get(TOKEN_HEADER, "")
        if not (self.token and hmac.compare_digest(got.encode(), self.token.encode())):
            return self._reply(Page(404, "<h1>Not found</h1>"))
        self._reply(Page(body=json.dumps(self.store.snapshot())), "application/json")


def serve_apps(
    apps: list[WebApp], store: Store, token: str, port: int = APPS_PORT, host: str = "127.0.0.1"
) -> ThreadingHTTPServer:
    """Bind the apps' server (port 0 = any); the caller runs `serve_forever` (a daemon thread)."""
    handler = type("AppsHandler", (_Handler,), {"router": _Router(apps), "store": store, "token": token})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server
