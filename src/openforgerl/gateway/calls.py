"""One model call through the gateway: admit, forward, tee, record, answer.

Protocol-independent: a `ProtocolAdapter` turns the client's body into a chat-completions body for
the engine and the engine's answer back into the client's protocol; everything else (auth, pause
gate, deadline, error classification, recording, taint) happens here once.
Ordering guarantee: the call's record is durable (`await store.append_call_json`) before the response's
final bytes go out (the whole body for non-streamed calls; the terminal events for streams), so a
gateway killed right after a call finished loses nothing; a client that went away mid-stream still
gets its tokens recorded, with error CLIENT_DISCONNECTED.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from aiohttp import web

from openforgerl.engines.base import Engine, EngineCall, EngineChunk, EngineError, EngineResult
from openforgerl.gateway.deadlines import DeadlineWatch
from openforgerl.gateway.errors import GatewayError, error_response
from openforgerl.gateway.flow import FlowGate
from openforgerl.gateway.metrics import Metrics
from openforgerl.gateway.recording import (
    CallMeta,
    CallTape,
    build_record,
    call_error,
    harness_headers,
    is_side_call,
    record_json,
)
from openforgerl.gateway.rollouts import RolloutRegistry, RolloutState
from openforgerl.records import CallError, CallErrorKind, WireProtocol
from openforgerl.store.base import CallStore

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "Connection": "keep-alive"}


class StreamWriter(Protocol):
    """Turns engine chunks into the client's SSE bytes; `finish` gives the terminal events."""

    def feed(self, chunk: EngineChunk) -> bytes: ...

    def finish(self) -> bytes: ...

    def error(self, err: GatewayError) -> bytes:
        """The protocol's in-stream error event (after headers went out)."""
        ...


class ProtocolAdapter(Protocol):
    """One wire protocol in front of the chat-completions engine contract."""

    protocol: WireProtocol

    def engine_body(self, request: dict[str, Any]) -> dict[str, Any]:
        """The chat-completions body for the engine (raise GatewayError(400) when invalid)."""
        ...

    def response_body(self, request: dict[str, Any], result: EngineResult) -> bytes: ...

    def stream_writer(self, request: dict[str, Any]) -> StreamWriter: ...


@dataclass
class Gateway:
    """Everything a call needs, shared by all calls of one gateway process."""

    engine: Engine
    store: CallStore
    registry: RolloutRegistry
    gate: FlowGate
    metrics: Metrics
    call_deadline_s: float = 600.0
    max_body_bytes: int = 64 * 1024 * 1024
    deadlines: DeadlineWatch = field(default_factory=DeadlineWatch)


def api_key(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return request.headers.get("x-api-key")


async def read_json(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object, or a 4xx (too large, not JSON, not an object)."""
    return (await read_body(request))[0]


async def read_body(request: web.Request) -> tuple[dict[str, Any], bytes]:
    """The request body as a JSON object and as the bytes it came in, or a 4xx."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise GatewayError(413, "request body too large") from None
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise GatewayError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise GatewayError(400, "request body must be a JSON object")
    return body, raw


async def serve_call(gw: Gateway, request: web.Request, adapter: ProtocolAdapter) -> web.StreamResponse:
    """Entry point of every model route."""
    try:
        state = await gw.registry.authorize(request.match_info["rollout_id"], api_key(request))
        body, raw = await read_body(request)
        engine_body = adapter.engine_body(body)
        version = await gw.gate.enter()
    except GatewayError as err:
        return error_response(adapter.protocol, err)
    try:
        meta = _meta(state, adapter, body, raw, engine_body, request, version)
        await gw.registry.note_version(state, version)
        call = EngineCall(engine_body, state.rollout_id, asyncio.get_running_loop().time() + gw.call_deadline_s,
                          meta.headers, raw_only=adapter.protocol == WireProtocol.CHAT)
        if body.get("stream"):
            return await _stream(gw, request, adapter, meta, state, call)
        return await _complete(gw, adapter, meta, state, call)
    finally:
        gw.gate.leave()


def _meta(state: RolloutState, adapter: ProtocolAdapter, body: dict[str, Any], raw: bytes,
          engine_body: dict[str, Any], request: web.Request, version: int) -> CallMeta:
    protocol = adapter.protocol
    translated = None if protocol == WireProtocol.CHAT else engine_body
    return CallMeta(state.rollout_id, state.take_index(), protocol, body, translated,
                    harness_headers(request.headers), version, time.time(), is_side_call(protocol, body), raw)


def _classify(exc: BaseException) -> tuple[CallError, GatewayError]:
    """The recorded error and the client-facing refusal for an engine-side failure."""
    if isinstance(exc, TimeoutError):
        return call_error(CallErrorKind.ENGINE_DEADLINE, "gateway call deadline exceeded"), GatewayError(
            504, "upstream engine deadline exceeded")
    if isinstance(exc, EngineError):
        if exc.is_client_error:
            return call_error(CallErrorKind.CLIENT_BAD_REQUEST, exc.message, exc.status), GatewayError(
                400, exc.message)
        return call_error(exc.kind, exc.message, exc.status), GatewayError(502, f"engine error: {exc.message}")
    if isinstance(exc, StopAsyncIteration):
        return call_error(CallErrorKind.ENGINE_PROTOCOL, "engine stream ended before any chunk"), GatewayError(
            502, "engine returned an empty stream")
    return call_error(CallErrorKind.GATEWAY_INTERNAL, repr(exc)), GatewayError(500, "internal gateway error")


async def _finish_record(gw: Gateway, meta: CallMeta, state: RolloutState, tape: CallTape,
                         error: CallError | None) -> None:
    """Durably record the call; taint the rollout when an infra fault hit it."""
    finished_at = time.time()
    await gw.store.append_call_json(meta.rollout_id, meta.index, record_json(meta, tape, error, finished_at))
    outcome = "ok" if error is None else error.kind.value
    gw.metrics.observe(meta.protocol.value, outcome, tape.prompt_length(), len(tape.token_ids),
                       finished_at - meta.started_at)
    if error is not None and error.kind.is_infra:
        await gw.registry.taint(state, error.kind)


async def _complete(gw: Gateway, adapter: ProtocolAdapter, meta: CallMeta, state: RolloutState,
                    call: EngineCall) -> web.Response:
    tape = CallTape()
    try:
        with gw.deadlines.guard(call.deadline):
            result = await gw.engine.complete(call)
        tape.take_result(result)
        payload = adapter.response_body(meta.request, result)
    except Exception as exc:
        recorded, refusal = _classify(exc)
        await _finish_record(gw, meta, state, tape, recorded)
        return error_response(adapter.protocol, refusal)
    await _finish_record(gw, meta, state, tape, None)
    return web.Response(body=payload, content_type="application/json")


async def _stream(gw: Gateway, request: web.Request, adapter: ProtocolAdapter, meta: CallMeta,
                  state: RolloutState, call: EngineCall) -> web.StreamResponse:
    tape = CallTape()
    chunks = gw.engine.stream(call).__aiter__()
    try:
        with gw.deadlines.guard(call.deadline):
            first = await chunks.__anext__()
    except Exception as exc:
        await _aclose(chunks)
        recorded, refusal = _classify(exc)
        await _finish_record(gw, meta, state, tape, recorded)
        return error_response(adapter.protocol, refusal)
    resp = web.StreamResponse(headers=SSE_HEADERS)
    await resp.prepare(request)
    return await _relay(gw, resp, adapter, meta, state, tape, first, chunks, call.deadline)


async def _relay(gw: Gateway, resp: web.StreamResponse, adapter: ProtocolAdapter, meta: CallMeta,
                 state: RolloutState, tape: CallTape, first: EngineChunk,
                 chunks: AsyncIterator[EngineChunk], deadline: float | None) -> web.StreamResponse:
    writer = adapter.stream_writer(meta.request)
    held: list[bytes] = []
    try:
        with gw.deadlines.guard(deadline):
            await _pump(resp, writer, tape, held, first, chunks)
        tape.settle()  # events forwarded unread are read now; a malformed one is the engine's fault
    except ConnectionResetError as exc:
        await _aclose(chunks)
        await _finish_record(gw, meta, state, tape, call_error(CallErrorKind.CLIENT_DISCONNECTED, str(exc)))
        return resp
    except asyncio.CancelledError:
        gw.store.append_call_nowait(build_record(meta, tape, call_error(
            CallErrorKind.CLIENT_DISCONNECTED, "call cancelled (client or server went away)")))
        raise
    except Exception as exc:
        await _aclose(chunks)
        recorded, refusal = _classify(exc)
        await _finish_record(gw, meta, state, tape, recorded)
        return await _end(resp, [*held, writer.error(refusal)])
    await _finish_record(gw, meta, state, tape, None)
    return await _end(resp, [*held, writer.finish()])


async def _pump(resp: web.StreamResponse, writer: StreamWriter, tape: CallTape, held: list[bytes],
                first: EngineChunk, chunks: AsyncIterator[EngineChunk]) -> None:
    """Relay chunk by chunk (never buffered), holding back only the final chunks until the record
    is durable. One loop, no call per chunk: with a paced engine every token is a chunk."""
    chunk = first
    while True:
        tape.take_chunk(chunk)
        out = writer.feed(chunk)
        if held or chunk.final:
            held.append(out)
        elif out:
            await resp.write(out)
        try:
            chunk = await chunks.__anext__()
        except StopAsyncIteration:
            return


async def _end(resp: web.StreamResponse, tail: list[bytes]) -> web.StreamResponse:
    try:
        await resp.write(b"".join(tail))
        await resp.write_eof()
    except ConnectionResetError:
        pass
    return resp


async def _aclose(chunks: AsyncIterator[EngineChunk]) -> None:
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        try:
            await aclose()
        except Exception:
            pass
