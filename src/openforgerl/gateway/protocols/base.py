"""The contract every wire protocol implements, and the one table that maps `WireProtocol` to it.

A wire protocol is one object (`WireAdapter`): it turns the client's body into the chat-completions
body the engine takes, the engine's answer (whole or streamed) into the client's bytes, a refusal
into the protocol's error JSON, and names the request's leading system text (side-call detection).
The call pipeline (`gateway/calls.py`) does everything else once, for all of them.

A protocol registers itself with `@register` when its package is imported; `protocols/__init__.py`
imports every built-in one, so `adapter_for(wire)` finds all of them, and the gateway serves each at
its `path` (`server.add_model_routes`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Protocol, TypeVar

from openforgerl.engines.base import EngineChunk, EngineResult
from openforgerl.gateway.errors import GatewayError
from openforgerl.records import WireProtocol
from openforgerl.registry import Registry


class StreamWriter(Protocol):
    """Turns engine chunks into the client's SSE bytes; `finish` gives the terminal events."""

    def feed(self, chunk: EngineChunk) -> bytes: ...

    def finish(self) -> bytes: ...

    def error(self, err: GatewayError) -> bytes:
        """The protocol's in-stream error event (after headers went out)."""
        ...


class WireAdapter(ABC):
    """One wire protocol in front of the chat-completions engine contract."""

    wire: ClassVar[WireProtocol]
    path: ClassVar[str]  # the model route under a rollout's root, `/r/{rollout_id}` + path
    # False only for Chat: the engine speaks it, so the client's body and the engine's bytes pass as
    # they are (data URLs lifted from the raw bytes, engine bytes forwarded unread, no translated body).
    translates: ClassVar[bool] = True

    @abstractmethod
    def engine_body(self, request: dict[str, Any]) -> dict[str, Any]:
        """The chat-completions body for the engine (raise GatewayError(400) when invalid)."""

    @abstractmethod
    def response_body(self, request: dict[str, Any], result: EngineResult) -> bytes:
        """The non-streamed answer the client gets, as bytes."""

    @abstractmethod
    def stream_writer(self, request: dict[str, Any]) -> StreamWriter:
        """A fresh writer for one streamed answer."""

    @abstractmethod
    def error_body(self, err: GatewayError) -> dict[str, Any]:
        """The refusal as this protocol's error JSON."""

    @abstractmethod
    def system_parts(self, request: dict[str, Any]) -> list[Any]:
        """The request's leading system/instructions values, unflattened (`recording.is_side_call`)."""


PROTOCOLS: Registry[WireAdapter] = Registry("wire protocol")
"""`WireProtocol` value -> its adapter; `protocols/__init__.py` imports every built-in one."""
A = TypeVar("A", bound=type[WireAdapter])


def register(cls: A) -> A:
    """Class decorator: serve `cls.wire` with one instance of `cls` (adapters are stateless)."""
    PROTOCOLS.register(cls.wire.value, cls())
    return cls


def adapter_for(wire: WireProtocol) -> WireAdapter:
    return PROTOCOLS.get(wire.value)


def adapters() -> list[WireAdapter]:
    """Every registered protocol, in registration order (the order its routes are matched in)."""
    return [adapter for _, adapter in PROTOCOLS.items()]


class ChunkTranslator(Protocol):
    """A pure stream translator (`AnthropicStream`, `ResponsesStream`): chunk dicts in, SSE bytes out."""

    def feed(self, chunk: dict[str, Any]) -> bytes: ...

    def finish(self) -> bytes: ...

    def error_event(self, message: str) -> bytes: ...


class TranslatedStream:
    """A `StreamWriter` feeding engine chunks, as dicts, to a protocol's stream translator."""

    __slots__ = ("_t",)

    def __init__(self, translator: ChunkTranslator) -> None:
        self._t = translator

    def feed(self, chunk: EngineChunk) -> bytes:
        if chunk.bodies is None:
            return self._t.feed(chunk.body)
        return b"".join(self._t.feed(body) for body in chunk.bodies)

    def finish(self) -> bytes:
        return self._t.finish()

    def error(self, err: GatewayError) -> bytes:
        return self._t.error_event(err.message)
