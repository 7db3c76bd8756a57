"""Which `ProtocolAdapter` serves each model route.

Chat Completions is ours (chat.py). Responses and Anthropic Messages are pure translators in
`gateway/protocols/{responses,anthropic}.py`; this module wraps them into the adapter shape the
call pipeline expects (their `ProtocolError` becomes our `GatewayError`, same status).
"""

from __future__ import annotations

from typing import Any

import orjson

from openforgerl.engines.base import Engine, EngineChunk, EngineResult
from openforgerl.gateway.chat import ChatAdapter
from openforgerl.gateway.errors import GatewayError
from openforgerl.gateway.protocols import anthropic, responses
from openforgerl.gateway.protocols._common import ProtocolError
from openforgerl.records import WireProtocol


class _TranslatedStream:
    """Feeds engine chunks (as dicts) to a protocol stream translator."""

    def __init__(self, translator: Any) -> None:
        self._t = translator

    def feed(self, chunk: EngineChunk) -> bytes:
        if chunk.bodies is None:
            return bytes(self._t.feed(chunk.body))
        return b"".join(self._t.feed(body) for body in chunk.bodies)

    def finish(self) -> bytes:
        return bytes(self._t.finish())

    def error(self, err: GatewayError) -> bytes:
        return bytes(self._t.error_event(err.message))


class TranslatingAdapter:
    """A protocol served by translating to/from chat completions."""

    def __init__(self, protocol: WireProtocol, module: Any, stream_cls: Any) -> None:
        self.protocol = protocol
        self._m = module
        self._stream_cls = stream_cls

    def engine_body(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            chat: dict[str, Any] = self._m.to_chat_request(request)
        except ProtocolError as exc:
            raise GatewayError(exc.status, exc.message, param=exc.param) from None
        if request.get("stream"):
            chat["stream_options"] = {"include_usage": True}
        return chat

    def response_body(self, request: dict[str, Any], result: EngineResult) -> bytes:
        return orjson.dumps(self._m.from_chat_completion(result.body, request))

    def stream_writer(self, request: dict[str, Any]) -> _TranslatedStream:
        return _TranslatedStream(self._stream_cls(request))


_CHAT = ChatAdapter()
_RESPONSES = TranslatingAdapter(WireProtocol.RESPONSES, responses, responses.ResponsesStream)
_ANTHROPIC = TranslatingAdapter(WireProtocol.ANTHROPIC, anthropic, anthropic.AnthropicStream)


def chat_adapter() -> ChatAdapter:
    return _CHAT


def responses_adapter() -> TranslatingAdapter:
    return _RESPONSES


def anthropic_adapter() -> TranslatingAdapter:
    return _ANTHROPIC


def anthropic_count_body(body: dict[str, Any]) -> dict[str, Any]:
    """The chat body whose prompt length answers `/v1/messages/count_tokens`."""
    try:
        return anthropic.translate_request(body, count_only=True).chat
    except ProtocolError as exc:
        raise GatewayError(exc.status, exc.message, param=exc.param) from None


async def count_tokens(engine: Engine, chat_body: dict[str, Any]) -> int:
    """Prompt tokens for a chat body, asked of the engine when it can tokenize."""
    counter = getattr(engine, "count_tokens", None)
    if counter is None:
        raise GatewayError(404, "token counting is not supported by this engine")
    return int(await counter(chat_body))
