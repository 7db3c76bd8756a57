"""One model call through the gateway: admit, forward, tee, record, answer.

Protocol-independent: the route's `WireAdapter` (protocols/) turns the client's body into a
chat-completions body for the engine and the engine's answer back into the client's protocol;
everything else (pause gate, deadline, error classification, recording, taint) happens here once,
on one `Call` object that carries the call's state from admission to its record. The rollout's key
is checked before (`server.rollout_auth`).
Ordering guarantee: the call's record is durable (`await store.append_call`) before the response's
final bytes go out (the whole body for non-streamed calls; the terminal events for streams), so a
gateway killed right after a call finished loses nothing; a client that went away mid-stream still
gets its tokens recorded, with error CLIENT_DISCONNECTED.
Each engine step runs under a deadline guard registered with its rollout: the guard fires at
min(per-call limit, rollout deadline - margin), or when the rollout is closed, or when the engine sent
nothing for the stall window and then failed its health probe (deadlines.py), and the engine request is
then closed (its generator or HTTP request ends), so the engine stops generating. Which of them fired
decides the record: the rollout's deadline is `rollout_deadline` (a timeout), the per-call limit on an
engine that passes its probe is `call_limit` (the client's long answer), and only an engine that fails
its probe (after a stall, or at the limit) is `engine_deadline` (infra).
A client that disconnects cancels its handler (aiohttp `handler_cancellation`), with the same effect.
Input checks (size, read timeout, JSON, nesting depth, images) happen before a call is admitted: a
client's malformed request is a 4xx and never recorded as a gateway fault. A Chat body's image data
URLs are cut out of its bytes before it is parsed and handed to the engine as those bytes (lifted.py,
`admit`). A call with images (images.py) stores each new image in the blob store, awaited, before it
goes on: its record, written later, never names a blob that a crash could lose.
Modules: this one admits a call (`serve_call`, `admit`); the shared `Gateway` and a call's state are
context.py; a body's own checks are body.py; the engine step, the streamed relay, the record and the
refusal are forward.py.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from openforgerl.gateway.body import MAX_BODY_DEPTH, check_depth, check_seed, decode_body, parse_body, reason
from openforgerl.gateway.context import GATEWAY_KEY, Admitted, Call, Gateway
from openforgerl.gateway.errors import GatewayError, error_response
from openforgerl.gateway.forward import SSE_HEADERS, complete, settle_log, stream
from openforgerl.gateway.images import find_images, may_have_images, store_blobs
from openforgerl.gateway.lifted import LiftedUrls, lift_data_urls
from openforgerl.gateway.protocols.base import WireAdapter
from openforgerl.gateway.recording import CallMeta, CallTape, call_error, harness_headers, record_json
from openforgerl.gateway.rollouts import RolloutState
from openforgerl.records import CallErrorKind

__all__ = [
    "GATEWAY_KEY",
    "MAX_BODY_DEPTH",
    "SSE_HEADERS",
    "Admitted",
    "Call",
    "Gateway",
    "admit",
    "api_key",
    "check_depth",
    "check_seed",
    "decode_body",
    "parse_body",
    "read_json",
    "read_raw",
    "serve_call",
]


def api_key(request: web.Request) -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return request.headers.get("x-api-key")


async def read_json(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object, or a 4xx (too large, not JSON, not an object)."""
    return parse_body(await read_raw(request))


async def read_raw(request: web.Request) -> bytes:
    """The request body's bytes, decoded, or a 4xx: too large, too slow, or a bad encoding.

    aiohttp's own decompression is off (`auto_decompress=False`): it answers an encoding it cannot
    decode with a plain-text 400 before any handler runs. Decoding here gives every refusal the
    protocol's shape and bounds the decoded size too (a gzip bomb is a 413, not a full memory)."""
    gw = request.app[GATEWAY_KEY]
    try:
        async with asyncio.timeout(gw.body_timeout_s):
            raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise GatewayError(413, "request body too large") from None
    except TimeoutError:
        raise GatewayError(
            408, f"request body not received within {gw.body_timeout_s:g}s", headers={"Connection": "close"}
        ) from None
    except (RequestPayloadError, HttpProcessingError, web.HTTPBadRequest, ValueError) as exc:
        raise GatewayError(
            400, f"request body could not be read: {reason(exc)}", headers={"Connection": "close"}
        ) from None
    return decode_body(raw, request.headers.get("Content-Encoding", ""), gw.max_body_bytes)


async def admit(call: Call, raw: bytes) -> Admitted:
    """Parse, translate and find the images of a request (4xx on bad input). A Chat body's image data
    URLs are lifted out of the bytes first (lifted.py); when one of them is not an image part's URL,
    or only the plain path may judge it, the body is read again as it came."""
    lifted = None if call.adapter.translates else lift_data_urls(raw)
    if lifted is not None:
        try:
            lean = parse_body(lifted.lean)
        except GatewayError:
            lean = None  # the plain parse below gives the client its exact error
        if lean is not None:
            got = await _admit(call, lean, raw, lifted)
            if got.media is not None and got.media.lifted == len(lifted.spans):  # every one an image part's
                return got
    return await _admit(call, parse_body(raw), raw, None)


async def _admit(call: Call, body: dict[str, Any], raw: bytes, lifted: LiftedUrls | None) -> Admitted:
    gw, adapter = call.gw, call.adapter
    engine_body = adapter.engine_body(body)
    check_seed(engine_body)
    rewritten = await _verbatim(call, engine_body)
    engine_body = engine_body if rewritten is None else rewritten
    gate = may_have_images(engine_body, raw, adapter.translates)
    media = find_images(engine_body, gw.images, gw.seen_images, lifted) if gate else None
    return Admitted(raw, body, engine_body, rewritten is not None, media, lifted)


async def _verbatim(call: Call, engine_body: dict[str, Any]) -> dict[str, Any] | None:
    """The engine body with this rollout's echoed assistant turns as the model wrote them (verbatim.py)."""
    gw, state = call.gw, call.state
    if not gw.verbatim_history:
        return None
    return await state.echo.rewrite(engine_body, getattr(gw.engine, "detokenize", None), state.rollout_id)


async def serve_call(adapter: WireAdapter, request: web.Request, state: RolloutState) -> web.StreamResponse:
    """Entry point of every model route, once the rollout is authorized (`server.rollout_auth`).

    Each rollout has its share: at most `max_in_flight_per_rollout` calls in flight (one more is a
    429 to that rollout, counted from before its body is read, so a flood holds no more than its
    share of the gateway's sockets, memory and `max_in_flight`), and at most
    `max_log_bytes_per_rollout` bytes of call log (a body that would pass it is a 413, recorded once
    without the body). Both are the rollout's own doing: refusals, never a taint."""
    gw = request.app[GATEWAY_KEY]
    if state.calls_in_flight >= gw.max_in_flight_per_rollout:
        gw.metrics.share_refusals["rollout_calls_in_flight"] += 1
        return error_response(
            adapter,
            GatewayError(
                429,
                f"this rollout already has {gw.max_in_flight_per_rollout} calls in flight",
                code="rollout_calls_in_flight",
                headers={"Retry-After": "1"},
            ),
        )
    state.calls_in_flight += 1
    call = Call(gw, adapter, state, request)
    try:
        try:
            raw = await read_raw(request)
            if not await gw.registry.reserve_log(state, len(raw), gw.max_log_bytes_per_rollout):
                return error_response(adapter, await _over_quota(call, len(raw)))
            call.reserved = len(raw)
            got = await admit(call, raw)
            if got.media is not None:
                await store_blobs(
                    gw.store, got.media, gw.seen_images
                )  # durable before the call's record can be
                call.blob_bytes = sum(len(data) for data, _ in got.media.blobs.values())
            version = await gw.gate.enter()
        except GatewayError as err:
            settle_log(call, b"")  # refused: nothing recorded but its images
            return error_response(adapter, err)
        except asyncio.CancelledError:  # the client went away before its call began (a body, a pause)
            settle_log(call, b"")
            raise
        try:
            await call.begin(got, version)
            if got.body.get("stream"):
                return await stream(call)
            return await complete(call)
        finally:
            gw.gate.leave()
    finally:
        state.calls_in_flight -= 1


async def _over_quota(call: Call, size: int) -> GatewayError:
    """The 413 for a body past its rollout's call log quota. The first such refusal of a rollout is
    recorded, as a CLIENT_BAD_REQUEST without the body (a few hundred bytes); later ones are not,
    so a rollout's log stays within its quota plus one short record."""
    gw, state = call.gw, call.state
    gw.metrics.share_refusals["rollout_log_quota"] += 1
    quota = gw.max_log_bytes_per_rollout
    message = (
        f"this rollout's call log is at {state.log_bytes} of its {quota} bytes: "
        f"a request of {size} bytes does not fit"
    )
    if await gw.registry.first_log_refusal(state):
        meta = CallMeta(
            state.rollout_id,
            await gw.registry.take_index(state),
            call.adapter.wire,
            {},
            None,
            harness_headers(call.request.headers),
            gw.gate.policy_version,
            time.time(),
            False,
        )
        body = record_json(meta, CallTape(), call_error(CallErrorKind.CLIENT_BAD_REQUEST, message, 413))
        gw.registry.charge_log(state, len(body))
        await gw.store.append_call(state.rollout_id, meta.index, body)
    return GatewayError(413, message, code="rollout_log_quota")
