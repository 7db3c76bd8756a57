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
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from openforgerl.engines.base import Engine, EngineCall, EngineChunk, EngineError
from openforgerl.gateway.deadlines import DeadlineGuard, DeadlineWatch
from openforgerl.gateway.errors import GatewayError, error_response
from openforgerl.gateway.flow import FlowGate
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
from openforgerl.gateway.verbatim import sampled_text_ids
from openforgerl.records import CallError, CallErrorKind
from openforgerl.store.base import CallStore

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "Connection": "keep-alive"}


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

# Deepest JSON body accepted. The record writer (orjson) stops at 254 nested containers and the
# record reader (pydantic's JSON parser) at about 200, and a body sits one level inside its record
# (a translated body a few more): 128 leaves room for both, and real harness bodies nest < 20.
MAX_BODY_DEPTH = 128
_DEPTH_PROBE = 254 - MAX_BODY_DEPTH  # lists wrapped around a body: orjson then fails iff it is too deep
# Counting brackets (two C scans, ~0.7 us per KB) spares the probe (~0.9 us per KB) only when it finds
# few enough, which a small body does (a GUI call's lean body: ~2 KB, 1 us instead of 8); an agent's long
# history has more dicts than that, so on it the count would only add to the probe (measured: 474 KB,
# 327 us of counting on top of 407 us of probe).
_COUNTED_BYTES = 16 * 1024


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
        raise GatewayError(400, f"request body could not be read: {_reason(exc)}",
                           headers={"Connection": "close"}) from None
    return decode_body(raw, request.headers.get("Content-Encoding", ""), gw.max_body_bytes)


def decode_body(raw: bytes, encoding: str, limit: int) -> bytes:
    """`raw` decoded per its Content-Encoding (identity, gzip, deflate), at most `limit` bytes."""
    enc = encoding.strip().lower()
    if enc in ("", "identity"):
        return raw
    if enc not in ("gzip", "x-gzip", "deflate"):
        raise GatewayError(415, f"unsupported Content-Encoding {encoding[:40]!r}")
    # gzip: wbits 16+15; deflate: zlib-wrapped (15) as the RFC says, raw (-15) as some clients send
    for wbits in ((31,) if enc != "deflate" else (15, -15)):
        try:
            inflater = zlib.decompressobj(wbits)
            out = inflater.decompress(raw, limit + 1)
        except zlib.error:
            continue
        if len(out) > limit or inflater.unconsumed_tail:
            raise GatewayError(413, "request body too large once decoded")
        if inflater.eof:
            return out
    raise GatewayError(400, f"request body is not valid {enc} data")


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "reason", None) or exc or type(exc).__name__)[:200]


def check_depth(body: Any, raw: bytes) -> None:
    """400 when `body` nests deeper than `MAX_BODY_DEPTH` (see there why that is the limit)."""
    if len(raw) <= 2 * MAX_BODY_DEPTH:
        return  # too short to be that deep
    if len(raw) <= _COUNTED_BYTES and raw.count(b"[") + raw.count(b"{") <= MAX_BODY_DEPTH:
        return  # too few openings to be that deep
    probe: Any = body
    for _ in range(_DEPTH_PROBE):
        probe = [probe]
    try:
        orjson.dumps(probe)  # C speed (about 20 us for an 85 KB agent body), exact
    except orjson.JSONEncodeError:
        raise GatewayError(400, f"request body nests deeper than {MAX_BODY_DEPTH} levels") from None


# A sampling seed as the engines take it: vLLM validates it into int64 and torch's generator refuses
# more; orjson reads a longer integer as a float, which an engine may take apart its own way.
_SEED_MIN, _SEED_MAX = -(2**63), 2**63 - 1


def check_seed(engine_body: dict[str, Any]) -> None:
    """400 when the engine body's `seed` is not a 64-bit integer (`{"seed": 2**70}`): the client's
    mistake, refused before it is recorded or reaches an engine (two dict reads a call)."""
    seed = engine_body.get("seed")
    if seed is not None and not (type(seed) is int and _SEED_MIN <= seed <= _SEED_MAX):
        raise GatewayError(400, "'seed' must be an integer in the signed 64-bit range", param="seed")


def parse_body(raw: bytes) -> dict[str, Any]:
    """`raw` as a JSON object no deeper than `MAX_BODY_DEPTH`, or a 400."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise GatewayError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise GatewayError(400, "request body must be a JSON object")
    check_depth(body, raw)
    return body


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
            _settle_log(call, b"")  # refused: nothing recorded but its images
            return error_response(adapter, err)
        except asyncio.CancelledError:  # the client went away before its call began (a body, a pause)
            _settle_log(call, b"")
            raise
        try:
            await call.begin(got, version)
            if got.body.get("stream"):
                return await _stream(call)
            return await _complete(call)
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


@contextmanager
def _watched(call: Call) -> Iterator[DeadlineGuard]:
    """One engine step under its deadline and stall check, cut early when the rollout ends (`cut_inflight`)."""
    gw, state = call.gw, call.state
    inflight = state.inflight
    route_key = state.rollout_id

    async def probe() -> bool:
        return await gw.engine_healthy(route_key)

    with gw.deadlines.guard(call.deadline, rollout_cut=call.rollout_cut, stall_s=gw.stall_window(state),
                            probe=probe) as guard:
        call.guard = guard
        inflight.add(guard)
        try:
            yield guard
        finally:
            inflight.discard(guard)


def _classify(exc: BaseException, state: RolloutState | None = None,
              timeout_kind: CallErrorKind = CallErrorKind.ENGINE_DEADLINE) -> tuple[CallError, GatewayError]:
    """The recorded error and the client-facing refusal for an engine-side failure (`timeout_kind`:
    which deadline a `TimeoutError` was, `_timeout_kind`)."""
    if isinstance(exc, TimeoutError) and state is not None and state.closed:
        # The rollout ended (close/outcome) while this call ran: the orchestrator's doing, not a fault.
        return call_error(CallErrorKind.CLIENT_DISCONNECTED, "rollout closed while the call was in flight"), \
            GatewayError(403, "rollout closed", code="rollout_closed")
    if isinstance(exc, TimeoutError):
        return call_error(timeout_kind, _TIMEOUT_TEXT[timeout_kind]), GatewayError(504, _TIMEOUT_TEXT[timeout_kind])
    if isinstance(exc, EngineError):
        if exc.is_client_error:  # the engine's 400 reaches the client; a context overflow is a config error
            kind = CallErrorKind.CONTEXT_OVERFLOW if exc.is_context_overflow else CallErrorKind.CLIENT_BAD_REQUEST
            return call_error(kind, exc.message, exc.status), GatewayError(400, exc.message)
        return call_error(exc.kind, exc.message, exc.status), GatewayError(502, f"engine error: {exc.message}")
    if isinstance(exc, StopAsyncIteration):
        return call_error(CallErrorKind.ENGINE_PROTOCOL, "engine stream ended before any chunk"), GatewayError(
            502, "engine returned an empty stream")
    return call_error(CallErrorKind.GATEWAY_INTERNAL, repr(exc)), GatewayError(500, "internal gateway error")


async def _finish_record(call: Call, error: CallError | None) -> None:
    """Durably record the call; taint the rollout when an infra fault hit it."""
    gw, meta, tape = call.gw, call.meta, call.tape
    if meta.images and tape.processor is None:
        tape.processor = await _engine_processor(gw, meta.rollout_id)
    finished_at = time.time()
    body = record_json(meta, tape, error, finished_at)
    _settle_log(call, body)
    await gw.store.append_call(meta.rollout_id, meta.index, body)
    outcome = "ok" if error is None else error.kind.value
    gw.metrics.observe(meta.protocol.value, outcome, tape.prompt_length(), len(tape.token_ids),
                       finished_at - meta.started_at)
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


async def _fail(call: Call, exc: Exception) -> GatewayError:
    """Record an engine-side failure (classified once, here); the refusal the client gets."""
    recorded, refusal = _classify(exc, call.state, _timeout_kind(call))
    await _finish_record(call, recorded)
    return refusal


def _record_cancelled(call: Call) -> None:
    """The client (or the server) went away mid-call: record it without awaiting (we are cancelled)."""
    error = call_error(CallErrorKind.CLIENT_DISCONNECTED, "call cancelled (client or server went away)")
    body = record_json(call.meta, call.tape, error)
    _settle_log(call, body)
    call.gw.store.append_call(call.meta.rollout_id, call.meta.index, body)


def _settle_log(call: Call, record: bytes) -> None:
    """Charge the rollout what its call wrote (record and images) in place of the body it reserved."""
    call.state.log_bytes += len(record) + call.blob_bytes - call.reserved
    call.reserved = call.blob_bytes = 0


async def _verbatim(call: Call, engine_body: dict[str, Any]) -> dict[str, Any] | None:
    """The engine body with this rollout's echoed assistant turns as the model wrote them (verbatim.py)."""
    gw, state = call.gw, call.state
    if not gw.verbatim_history:
        return None
    return await state.echo.rewrite(engine_body, getattr(gw.engine, "detokenize", None), state.rollout_id)


def _note_sampled(call: Call) -> None:
    tape = call.tape
    if call.gw.verbatim_history and tape.token_ids and not call.meta.side_call:
        call.state.echo.note(sampled_text_ids(tape.token_ids, tape.finish_reason, call.meta.request))


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


async def _complete(call: Call) -> web.Response:
    try:
        with _watched(call):
            result = await call.gw.engine.complete(call.engine_call)
        call.tape.take_result(result)
        payload = call.adapter.response_body(call.meta.request, result)
    except asyncio.CancelledError:  # the client went away: the engine request was closed with it
        _record_cancelled(call)
        raise
    except Exception as exc:
        return error_response(call.adapter, await _fail(call, exc))
    await _finish_record(call, None)
    return web.Response(body=payload, content_type="application/json")


async def _stream(call: Call) -> web.StreamResponse:
    chunks = call.gw.engine.stream(call.engine_call).__aiter__()
    try:
        with _watched(call):
            first = await chunks.__anext__()
    except asyncio.CancelledError:
        await _aclose(chunks)  # the engine's HTTP request ends now, not at GC
        _record_cancelled(call)
        raise
    except Exception as exc:
        await _aclose(chunks)
        return error_response(call.adapter, await _fail(call, exc))
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
            with _watched(call) as guard:
                await self._pump(first, guard)
            call.tape.settle()  # events forwarded unread are read now; a malformed one is the engine's fault
        except ConnectionResetError as exc:
            await _aclose(self.chunks)
            await _finish_record(call, call_error(CallErrorKind.CLIENT_DISCONNECTED, str(exc)))
            return self.resp
        except asyncio.CancelledError:
            await _aclose(self.chunks)  # the engine's HTTP request ends now, not at GC
            _record_cancelled(call)
            raise
        except Exception as exc:
            await _aclose(self.chunks)
            return await self._end(self.writer.error(await _fail(call, exc)))
        await _finish_record(call, None)
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
