"""Errors the gateway answers with, in each wire protocol's own JSON shape.

Every refusal is a `GatewayError` raised near where it is detected and rendered once, by the
protocol of the route it happened on (its `error_body`, `protocols/<name>/`); the admin plane, which
speaks no model protocol, answers in OpenAI's `{"error": {...}}` shape (`openai_error_body`). Statuses follow
what real harnesses do with them: client mistakes are 4xx, weight sync and overload are 503 (retried by every
harness; 429/400 are fatal for Codex and Claude Code), engine faults 502 and deadlines 504.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson
from aiohttp import web

# OpenAI error `type` per status.
_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    502: "server_error",
    503: "server_error",
    504: "server_error",
}


class GatewayError(Exception):
    """A refusal with an HTTP status, rendered in the route's protocol shape."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}


def openai_error_body(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    kind = _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class ErrorShape(Protocol):
    """What renders a refusal: a wire protocol's adapter (`protocols.base.WireAdapter`)."""

    def error_body(self, err: GatewayError) -> dict[str, Any]: ...


def error_body(shape: ErrorShape | None, err: GatewayError) -> dict[str, Any]:
    if shape is None:
        return openai_error_body(err.status, err.message, err.param, err.code)
    return shape.error_body(err)


def error_response(shape: ErrorShape | None, err: GatewayError) -> web.Response:
    headers = dict(err.headers)
    if err.status == 503:
        headers.setdefault("Retry-After", "1")
    close = headers.pop("Connection", "").lower() == "close"
    resp = web.Response(
        status=err.status,
        body=orjson.dumps(error_body(shape, err)),
        content_type="application/json",
        headers=headers,
    )
    if close:  # the request's framing or body is broken: the connection cannot carry another
        resp.force_close()
    return resp
