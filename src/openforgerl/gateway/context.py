"""The gateway's shared context (`Gateway`: engine, store, registry, limits) and one model call's state
(`Call`, with its `Admitted` request), which admission (calls.py) and forwarding (forward.py) both use.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from openforgerl.engines.base import Engine, EngineCall
from openforgerl.gateway.deadlines import DeadlineGuard, DeadlineWatch
from openforgerl.gateway.flow import FlowGate
from openforgerl.gateway.images import ImagePolicy, PromptImages, SeenImages, stored_copy
from openforgerl.gateway.lifted import LiftedUrls, for_engine
from openforgerl.gateway.metrics import Metrics
from openforgerl.gateway.protocols.base import WireAdapter
from openforgerl.gateway.recording import CallMeta, CallTape, harness_headers, is_side_call
from openforgerl.gateway.rollouts import RolloutRegistry, RolloutState
from openforgerl.store.base import CallStore

__all__ = ["GATEWAY_KEY", "Admitted", "Call", "Gateway", "meta_of"]


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
        self.meta = meta_of(self, await gw.registry.take_index(state), got, version)
        await gw.registry.note_version(state, version)
        engine_body, splice = got.engine_body, None
        if got.lifted is not None:  # the engine gets the data URLs back, as the bytes they came in
            if getattr(gw.engine, "splices_payload", False):
                splice = got.lifted.splice  # into its serialised payload: one copy
            else:
                engine_body = for_engine(engine_body, got.lifted, fragments=False)
        deadline, self.rollout_cut = gw.call_deadlines(state)
        self.engine_call = EngineCall(
            engine_body,
            state.rollout_id,
            deadline,
            self.meta.headers,
            raw_only=not self.adapter.translates,
            splice=splice,
            task_id=state.task_id,
        )
        self.tape = CallTape(want_media=bool(self.meta.images))


def meta_of(call: Call, index: int, got: Admitted, version: int) -> CallMeta:
    adapter, body = call.adapter, got.body
    translated = got.engine_body if adapter.translates or got.rewritten else None
    meta = CallMeta(
        call.state.rollout_id,
        index,
        adapter.wire,
        body,
        translated,
        harness_headers(call.request.headers),
        version,
        time.time(),
        is_side_call(adapter, body),
        got.raw,
    )
    if got.media is not None:  # the record keeps references, never the inline base64
        meta.images, meta.request_json = got.media.refs, None
        if got.lifted is not None:  # the lean bytes with references for keys: no walk, no serialising
            meta.request_json = got.lifted.with_refs(got.media.replace)
        else:
            meta.stored_request = stored_copy(body, got.media.replace)
        meta.engine_request = stored_copy(translated, got.media.replace)
    return meta
