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
Modules: this one admits a call (`serve_call`, `admit`); a body's own checks are body.py; the engine
step, the streamed relay, the record and the refusal are forward.py.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from openforgerl.engines.base import Engine, EngineCall
from openforgerl.gateway.body import MAX_BODY_DEPTH, check_depth, check_seed, decode_body, parse_body, reason
from openforgerl.gateway.deadlines import DeadlineGuard, DeadlineWatch
from openforgerl.gateway.errors import GatewayError, error_response
from openforgerl.gateway.flow import FlowGate
from openforgerl.gateway.forward import SSE_HEADERS, complete, settle_log, stream
from openforgerl.gateway.images import (
    ImagePolicy,
    PromptImages,
    SeenImages,
    find_images,
    may_have_images,
    store_blobs,
    stored_copy,
)
from openforgerl.gateway.lifted import LiftedUrls, for_engine, lift_data_urls
from openforgerl.gateway.metrics import Metrics
from openforgerl.gateway.protocols.base import WireAdapter
from openforgerl.gateway.recording import (
    CallMeta,
    CallTape,
    call_error,
    harness_headers,
    is_side_call,
    record_json,
)
from openforgerl.gateway.rollouts import RolloutRegistry, RolloutState
from openforgerl.records import CallErrorKind
from openforgerl.store.base import CallStore

__all__ = ["GATEWAY_KEY", "MAX_BODY_DEPTH", "SSE_HEADERS", "Admitted", "Call", "Gateway", "admit", "api_key",
           "check_depth", "check_seed", "decode_body", "parse_body", "read_json", "read_raw", "serve_call"]


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
    admin_token: str = ""
    model_url: str = ""  # root of the model listener, as rollouts are told (set once it is bound)
    body_timeout_s: float = 60.0  # a client must deliver its whole body within this
    deadline_margin_s: float = 2.0  # engine calls end this long before their rollout's deadline
    images: ImagePolicy = field(default_factory=ImagePolicy)  # what a prompt image may be (images.py)
    seen_images: SeenImages = field(default_factory=SeenImages)  # payloads already decoded and stored
    verbatim_history: bool = True  # echoed assistant turns reach the engine as sampled (verbatim.py)
    # No byte from the engine for this long (at most a quarter of the time the rollout has left, so a
    # hung engine is found before the rollout's deadline) -> its health probe decides: a failed probe is
    # infra, a passed one lets the call go on (a healthy engine that is slow is never cut as infra).
    stall_s: float = 30.0
    probe_timeout_s: float = 5.0  # a health probe not answered within this is a failed one
    # One rollout's share (serve_call): past it, that rollout alone gets a 429 / a 413, never another.
    max_in_flight_per_rollout: int = 64
    max_log_bytes_per_rollout: int = 512 * 1024 * 1024

    async def engine_healthy(self, route_key: str) -> bool:
        """The engine serving `route_key` answers its health probe (`Engine.healthy`, optional): the
        gateway's own request, which nothing a rollout sends can make fail. An engine without a probe
        is taken as unhealthy once it stalled (the behaviour before probes existed)."""
        probe = getattr(self.engine, "healthy", None)
        if probe is None:
            return False
        try:
            async with asyncio.timeout(self.probe_timeout_s):
                return bool(await probe(route_key))
        except Exception:
            return False

    def stall_window(self, state: RolloutState) -> float:
        if state.deadline_at is None:
            return self.stall_s
        return max(0.5, min(self.stall_s, (state.deadline_at - time.time()) / 4))

    def call_deadline(self, state: RolloutState) -> float:
        """This call's engine deadline in loop time: min(per-call limit, rollout deadline - margin)."""
        return self.call_deadlines(state)[0]

    def call_deadlines(self, state: RolloutState) -> tuple[float, bool]:
        """(`call_deadline`, whether it is the rollout's own deadline rather than the per-call limit)."""
        loop_now = asyncio.get_running_loop().time()
        limit = loop_now + self.call_deadline_s
        if state.deadline_at is None:
            return limit, False
        cut = loop_now + (state.deadline_at - self.deadline_margin_s - time.time())
        return (cut, True) if cut <= limit else (limit, False)


GATEWAY_KEY = web.AppKey("gateway", Gateway)


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
        raise GatewayError(408, f"request body not received within {gw.body_timeout_s:g}s",
                           headers={"Connection": "close"}) from None
    except (RequestPayloadError, HttpProcessingError, web.HTTPBadRequest, ValueError) as exc:
        raise GatewayError(400, f"request body could not be read: {reason(exc)}",
                           headers={"Connection": "close"}) from None
    return decode_body(raw, request.headers.get("Content-Encoding", ""), gw.max_body_bytes)


@dataclass(slots=True)
class Admitted:
    """A request read and checked: the client's body, the engine's (echoed assistant turns as
    sampled, verbatim.py), and the prompt's images."""

    raw: bytes  # the body's bytes as the client sent them (decoded)
    body: dict[str, Any]
    engine_body: dict[str, Any]
    rewritten: bool
    media: PromptImages | None
    lifted: LiftedUrls | None = None  # the body was parsed with its image data URLs lifted out


@dataclass(slots=True, eq=False)
class Call:
    """One model call's state on its way through admit -> forward -> record.

    Created when the rollout is authorized; `begin` fills the rest once the call is past the pause
    gate: its `meta` (what the record keeps of the request), the `engine_call` (body, deadline) and
    the `tape` the engine's answer is teed into."""

    gw: Gateway
    adapter: WireAdapter
    state: RolloutState
    request: web.Request
    meta: CallMeta = field(init=False)
    engine_call: EngineCall = field(init=False)
    tape: CallTape = field(init=False)
    rollout_cut: bool = field(init=False, default=False)  # the deadline is the rollout's (`call_deadlines`)
    guard: DeadlineGuard | None = field(init=False, default=None)  # the last engine step's (why it fired)
    reserved: int = field(default=0, init=False)  # call log bytes held for it (its body's length)
    blob_bytes: int = field(default=0, init=False)  # its new images' bytes, stored in the blob store

    @property
    def deadline(self) -> float | None:
        return self.engine_call.deadline

    async def begin(self, got: Admitted, version: int) -> None:
        """Take the rollout's next index and note the policy version; build the engine call."""
        gw, state = self.gw, self.state
        self.meta = _meta(self, await gw.registry.take_index(state), got, version)
        await gw.registry.note_version(state, version)
        engine_body, splice = got.engine_body, None
        if got.lifted is not None:  # the engine gets the data URLs back, as the bytes they came in
            if getattr(gw.engine, "splices_payload", False):
                splice = got.lifted.splice  # into its serialised payload: one copy
            else:
                engine_body = for_engine(engine_body, got.lifted, fragments=False)
        deadline, self.rollout_cut = gw.call_deadlines(state)
        self.engine_call = EngineCall(engine_body, state.rollout_id, deadline, self.meta.headers,
                                      raw_only=not self.adapter.translates, splice=splice, task_id=state.task_id)
        self.tape = CallTape(want_media=bool(self.meta.images))


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
        return error_response(adapter, GatewayError(
            429, f"this rollout already has {gw.max_in_flight_per_rollout} calls in flight",
            code="rollout_calls_in_flight", headers={"Retry-After": "1"}))
    state.calls_in_flight += 1
    call = Call(gw, adapter, state, request)
    try:
        try:
            raw = await read_raw(request)
            if not state.reserve_log(len(raw), gw.max_log_bytes_per_rollout):
                return error_response(adapter, await _over_quota(call, len(raw)))
            call.reserved = len(raw)
            got = await admit(call, raw)
            if got.media is not None:
                await store_blobs(gw.store, got.media, gw.seen_images)  # durable before the call's record can be
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
    message = (f"this rollout's call log is at {state.log_bytes} of its {quota} bytes: "
               f"a request of {size} bytes does not fit")
    if not state.quota_noted:
        state.quota_noted = True
        meta = CallMeta(state.rollout_id, await gw.registry.take_index(state), call.adapter.wire, {}, None,
                        harness_headers(call.request.headers), gw.gate.policy_version, time.time(), False)
        body = record_json(meta, CallTape(), call_error(CallErrorKind.CLIENT_BAD_REQUEST, message, 413))
        state.log_bytes += len(body)
        await gw.store.append_call(state.rollout_id, meta.index, body)
    return GatewayError(413, message, code="rollout_log_quota")


def _meta(call: Call, index: int, got: Admitted, version: int) -> CallMeta:
    adapter, body = call.adapter, got.body
    translated = got.engine_body if adapter.translates or got.rewritten else None
    meta = CallMeta(call.state.rollout_id, index, adapter.wire, body, translated, harness_headers(call.request.headers),
                    version, time.time(), is_side_call(adapter, body), got.raw)
    if got.media is not None:  # the record keeps references, never the inline base64
        meta.images, meta.request_json = got.media.refs, None
        if got.lifted is not None:  # the lean bytes with references for keys: no walk, no serialising
            meta.request_json = got.lifted.with_refs(got.media.replace)
        else:
            meta.stored_request = stored_copy(body, got.media.replace)
        meta.engine_request = stored_copy(translated, got.media.replace)
    return meta
