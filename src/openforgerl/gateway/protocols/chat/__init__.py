"""OpenAI Chat Completions: the engine's own protocol, so it is passed through nearly untouched.

The request is checked for the shapes the engine needs and forwarded; the engine's bytes go back
as they came (non-streamed body, SSE events one by one), extension fields (`prompt_token_ids`,
`token_ids`) included: clients ignore unknown fields, and not rewriting keeps the hot path cheap.
Errors take OpenAI's shape, in the body and in the stream (a `data:` event the SDKs raise on).
"""

from __future__ import annotations

from typing import Any

import orjson

from openforgerl.engines.base import EngineChunk, EngineResult
from openforgerl.gateway.errors import GatewayError, openai_error_body
from openforgerl.gateway.protocols import sse
from openforgerl.gateway.protocols._common import leading_system
from openforgerl.gateway.protocols.base import WireAdapter, register
from openforgerl.records import WireProtocol

_DONE = b"data: [DONE]\n\n"


def _check(cond: bool, message: str, param: str) -> None:
    if not cond:
        raise GatewayError(400, message, param=param)


def _check_message(i: int, m: Any) -> None:
    if not (isinstance(m, dict) and isinstance(m.get("role"), str)):
        raise GatewayError(400, f"messages[{i}] must be an object with a 'role'", param=f"messages[{i}]")
    content = m.get("content")
    if not (content is None or isinstance(content, str | list)):
        raise GatewayError(
            400, f"messages[{i}].content must be a string or array", param=f"messages[{i}].content"
        )


def validate_chat(body: dict[str, Any]) -> None:
    """Refuse (400) the type errors that would otherwise surface as engine 5xx or crashes."""
    messages = body.get("messages")
    _check(
        isinstance(messages, list) and len(messages) > 0, "'messages' must be a non-empty array", "messages"
    )
    for i, m in enumerate(
        messages or ()
    ):  # messages are built only on failure: this runs per message per call
        _check_message(i, m)
    tools = body.get("tools")
    _check(
        tools is None or (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)),
        "'tools' must be an array of objects",
        "tools",
    )
    _check(not isinstance(body.get("stream"), str), "'stream' must be a boolean", "stream")
    for key in ("max_tokens", "max_completion_tokens", "n"):
        v = body.get(key)
        if not (v is None or (isinstance(v, int) and not isinstance(v, bool) and v > 0)):
            raise GatewayError(400, f"'{key}' must be a positive integer", param=key)
    _check(body.get("n") in (None, 1), "only n=1 is supported", "n")
    for key in ("temperature", "top_p"):
        v = body.get(key)
        if not (v is None or (isinstance(v, int | float) and not isinstance(v, bool))):
            raise GatewayError(400, f"'{key}' must be a number", param=key)


def _error_json(err: GatewayError) -> dict[str, Any]:
    return openai_error_body(err.status, err.message, err.param, err.code)


class _ChatStream:
    """Forwards the engine's SSE events verbatim; `[DONE]` is the terminal event."""

    __slots__ = ()

    def feed(self, chunk: EngineChunk) -> bytes:
        if chunk.raw is not None:
            return chunk.raw
        return sse.encode(chunk.body)

    def finish(self) -> bytes:
        return _DONE

    def error(self, err: GatewayError) -> bytes:
        return sse.encode(_error_json(err))


_STREAM = _ChatStream()  # stateless: one for every call


@register
class ChatAdapter(WireAdapter):
    wire = WireProtocol.CHAT
    path = "/v1/chat/completions"
    translates = False

    def engine_body(self, request: dict[str, Any]) -> dict[str, Any]:
        validate_chat(request)
        return request  # engines copy before adding their knobs; the record keeps this one as sent

    def response_body(self, request: dict[str, Any], result: EngineResult) -> bytes:
        return result.raw if result.raw is not None else orjson.dumps(result.body)

    def stream_writer(self, request: dict[str, Any]) -> _ChatStream:
        return _STREAM

    def error_body(self, err: GatewayError) -> dict[str, Any]:
        return _error_json(err)

    def system_parts(self, request: dict[str, Any]) -> list[Any]:
        return leading_system(request.get("messages"))
