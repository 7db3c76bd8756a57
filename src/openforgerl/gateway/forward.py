"""A call past admission (calls.py): the engine step under its deadline guard, the streamed relay, the
record and the refusal a failure becomes.

The ordering guarantee is kept here: the record is durable (`finish_record`) before the answer's last
bytes go out; a cancelled call is recorded without awaiting (`record_cancelled`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

from openforgerl.engines.base import EngineChunk, EngineError
from openforgerl.gateway.context import Call, Gateway
from openforgerl.gateway.deadlines import DeadlineGuard
from openforgerl.gateway.errors import GatewayError, error_response
from openforgerl.gateway.recording import call_error, record_json
from openforgerl.gateway.rollouts import RolloutState
from openforgerl.gateway.verbatim import returned_key, sampled_text_ids
from openforgerl.records import CallError, CallErrorKind

__all__ = ["SSE_HEADERS", "complete", "settle_log", "stream"]

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "Connection": "keep-alive"}


@contextmanager
def watched(call: Call) -> Iterator[DeadlineGuard]:
    """One engine step under its deadline and stall check, cut early when the
    rollout ends (`cut_inflight`)."""
    gw, state = call.gw, call.state
    inflight = state.inflight
    route_key = state.rollout_id

    async def probe() -> bool:
        return await gw.engine_healthy(route_key)

    with gw.deadlines.guard(
        call.deadline, rollout_cut=call.rollout_cut, stall_s=gw.stall_window(state), probe=probe
    ) as guard:
        call.guard = guard
        inflight.add(guard)
        try:
            yield guard
        finally:
            inflight.discard(guard)


def _classify(
    exc: BaseException,
    state: RolloutState | None = None,
    timeout_kind: CallErrorKind = CallErrorKind.ENGINE_DEADLINE,
) -> tuple[CallError, GatewayError]:
    """The recorded error and the client-facing refusal for an engine-side failure (`timeout_kind`:
    which deadline a `TimeoutError` was, `_timeout_kind`)."""
    if isinstance(exc, TimeoutError) and state is not None and state.closed:
        # The rollout ended (close/outcome) while this call ran: the orchestrator's doing, not a fault.
        return call_error(
            CallErrorKind.CLIENT_DISCONNECTED, "rollout closed while the call was in flight"
        ), GatewayError(403, "rollout closed", code="rollout_closed")
    if isinstance(exc, TimeoutError):
        return call_error(timeout_kind, _TIMEOUT_TEXT[timeout_kind]), GatewayError(
            504, _TIMEOUT_TEXT[timeout_kind]
        )
    if isinstance(exc, EngineError):
        if exc.is_client_error:  # the engine's 400 reaches the client; a context overflow is a config error
            kind = (
                CallErrorKind.CONTEXT_OVERFLOW
                if exc.is_context_overflow
                else CallErrorKind.CLIENT_BAD_REQUEST
            )
            return call_error(kind, exc.message, exc.status), GatewayError(400, exc.message)
        return call_error(exc.kind, exc.message, exc.status), GatewayError(
            502, f"engine error: {exc.message}"
        )
    if isinstance(exc, StopAsyncIteration):
        return call_error(
            CallErrorKind.ENGINE_PROTOCOL, "engine stream ended before any chunk"
        ), GatewayError(502, "engine returned an empty stream")
    return call_error(CallErrorKind.GATEWAY_INTERNAL, repr(exc)), GatewayError(500, "internal gateway error")


async def finish_record(call: Call, error: CallError | None) -> None:
    """Durably record the call; taint the rollout when an infra fault hit it."""
    gw, meta, tape = call.gw, call.meta, call.tape
    if meta.images and tape.processor is None:
        tape.processor = await _engine_processor(gw, meta.rollout_id)
    finished_at = time.time()
    body = record_json(meta, tape, error, finished_at)
    settle_log(call, body)
    await gw.store.append_call(meta.rollout_id, meta.index, body)
    outcome = "ok" if error is None else error.kind.value
    gw.metrics.observe(
        meta.protocol.value, outcome, tape.prompt_length(), len(tape.token_ids), finished_at - meta.started_at
    )
    if error is not None and error.kind.is_infra:
        await gw.registry.taint(call.state, error.kind)
    if error is None:
        _note_sampled(call)


_TIMEOUT_TEXT = {
    CallErrorKind.ENGINE_DEADLINE: "upstream engine deadline exceeded: no progress and a failed health probe",
    CallErrorKind.ROLLOUT_DEADLINE: "rollout deadline reached while the call was running",
    CallErrorKind.CALL_LIMIT: "per-call deadline exceeded while the engine was still answering",
}


def _timeout_kind(call: Call) -> CallErrorKind:
    """Which deadline cut the call (deadlines.py): the rollout's is a timeout; the per-call limit on an
    engine that passed its health probe is the long answer the client asked for; only an engine that
    failed its probe (after a stall, or at the limit) is infra."""
    reason = call.guard.reason if call.guard is not None else ""
    if reason == "rollout":
        return CallErrorKind.ROLLOUT_DEADLINE
    if reason == "limit":
        return CallErrorKind.CALL_LIMIT
    return CallErrorKind.ENGINE_DEADLINE


async def fail(call: Call, exc: Exception) -> GatewayError:
    """Record an engine-side failure (classified once, here); the refusal the client gets."""
    recorded, refusal = _classify(exc, call.state, _timeout_kind(call))
    await finish_record(call, recorded)
    return refusal


def record_cancelled(call: Call) -> None:
    """The client (or the server) went away mid-call: record it without awaiting (we are cancelled)."""
    error = call_error(CallErrorKind.CLIENT_DISCONNECTED, "call cancelled (client or server went away)")
    body = record_json(call.meta, call.tape, error)
    settle_log(call, body)
    call.gw.store.append_call(call.meta.rollout_id, call.meta.index, body)


def settle_log(call: Call, record: bytes) -> None:
    """Charge the rollout what its call wrote (record and images) in place of the body it reserved."""
    call.gw.registry.charge_log(call.state, len(record) + call.blob_bytes - call.reserved)
    call.reserved = call.blob_bytes = 0


def _note_sampled(call: Call) -> None:
    tape = call.tape
    if call.gw.verbatim_history and tape.token_ids and not call.meta.side_call:
        ids = sampled_text_ids(tape.token_ids, tape.finish_reason, call.meta.request)
        text, reasoning = "".join(tape.text), "".join(tape.reasoning)
        call.state.echo.note(ids, returned_key(tape.returned, text, tape.calls, reasoning))


async def _engine_processor(gw: Gateway, route_key: str) -> dict[str, Any] | None:
    """The image processor settings the engine serving `route_key` uses, when the engine says:
    its optional `async image_processor(route_key) -> dict | None` (an engine that knows them once
    per replica, e.g. from its `/v1/models` card). Best effort: never fails a call."""
    ask = getattr(gw.engine, "image_processor", None)
    if ask is None:
        return None
    try:
        found = await ask(route_key)
    except Exception:
        return None
    return found if isinstance(found, dict) else None


async def complete(call: Call) -> web.Response:
    try:
        with watched(call):
            result = await call.gw.engine.complete(call.engine_call)
        call.tape.take_result(result)
        payload = call.adapter.response_body(call.meta.request, result)
    except asyncio.CancelledError:  # the client went away: the engine request was closed with it
        record_cancelled(call)
        raise
    except Exception as exc:
        return error_response(call.adapter, await fail(call, exc))
    await finish_record(call, None)
    return web.Response(body=payload, content_type="application/json")


async def stream(call: Call) -> web.StreamResponse:
    chunks = call.gw.engine.stream(call.engine_call).__aiter__()
    try:
        with watched(call):
            first = await chunks.__anext__()
    except asyncio.CancelledError:
        await _aclose(chunks)  # the engine's HTTP request ends now, not at GC
        record_cancelled(call)
        raise
    except Exception as exc:
        await _aclose(chunks)
        return error_response(call.adapter, await fail(call, exc))
    resp = web.StreamResponse(headers=SSE_HEADERS)
    await resp.prepare(call.request)
    return await _Relay(call, resp, chunks).run(first)


class _Relay:
    """One streamed answer on its way to the client: the engine's chunks, the protocol's writer, and
    the final events held back until the call's record is durable."""

    __slots__ = ("call", "chunks", "held", "resp", "writer")

    def __init__(self, call: Call, resp: web.StreamResponse, chunks: AsyncIterator[EngineChunk]) -> None:
        self.call, self.resp, self.chunks = call, resp, chunks
        self.writer = call.adapter.stream_writer(call.meta.request)
        self.held: list[bytes] = []

    async def run(self, first: EngineChunk) -> web.StreamResponse:
        call = self.call
        try:
            with watched(call) as guard:
                await self._pump(first, guard)
            call.tape.settle()  # events forwarded unread are read now; a malformed one is the engine's fault
        except ConnectionResetError as exc:
            await _aclose(self.chunks)
            await finish_record(call, call_error(CallErrorKind.CLIENT_DISCONNECTED, str(exc)))
            return self.resp
        except asyncio.CancelledError:
            await _aclose(self.chunks)  # the engine's HTTP request ends now, not at GC
            record_cancelled(call)
            raise
        except Exception as exc:
            await _aclose(self.chunks)
            return await self._end(self.writer.error(await fail(call, exc)))
        await finish_record(call, None)
        return await self._end(self.writer.finish())

    async def _pump(self, first: EngineChunk, guard: DeadlineGuard) -> None:
        """Relay chunk by chunk (never buffered), holding back only the final chunks until the record
        is durable. One loop, no call per chunk: with a paced engine every token is a chunk."""
        resp, writer, tape, held, chunks = self.resp, self.writer, self.call.tape, self.held, self.chunks
        chunk = first
        while True:
            guard.moved = True  # progress: the stall window restarts (deadlines.py)
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

    async def _end(self, last: bytes) -> web.StreamResponse:
        try:
            await self.resp.write(b"".join([*self.held, last]))
            await self.resp.write_eof()
        except ConnectionResetError:
            pass
        return self.resp


async def _aclose(chunks: AsyncIterator[EngineChunk]) -> None:
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        try:
            await aclose()
        except Exception:
            pass
