"""Nested deadlines and aborts: an engine call never outlives its rollout, and the engine hears it.

The engine is the scripted one served over HTTP (its faults decide "hang" or "stall mid-stream"),
watched by a middleware that notes when each request ended and whether it was cut: that is what
the engine itself sees, so "the engine stopped generating" is measured, not assumed.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from openforgerl.engines.openai_compat import OpenAICompatEngine
from openforgerl.engines.scripted import Faults, ScriptedEngine
from openforgerl.engines.scripted_server import scripted_app
from openforgerl.gateway.server import start_gateway
from openforgerl.records import CallErrorKind, RolloutStatus

MSG = [{"role": "user", "content": "go"}]


@dataclass
class Seen:
    started: float
    ended: float | None = None
    cut: bool = False  # the engine's handler was cancelled: its client (the gateway) went away


@dataclass
class WatchedEngine:
    engine: ScriptedEngine
    url: str
    runner: web.AppRunner
    seen: list[Seen] = field(default_factory=list)
    started: asyncio.Event = field(default_factory=asyncio.Event)  # a chat request reached the engine

    async def wait_ended(self, n: int = 1, limit_s: float = 10.0) -> list[Seen]:
        stop = time.monotonic() + limit_s
        while time.monotonic() < stop:
            if len(self.seen) >= n and all(s.ended is not None for s in self.seen[:n]):
                return self.seen[:n]
            await asyncio.sleep(0.05)
        raise AssertionError(f"engine requests still running: {self.seen}")


@pytest.fixture
async def watched(fmt: Any):
    engine = ScriptedEngine(lambda t: "a long answer " * 20, fmt=fmt, faults=Faults(token_delay_s=0.05))
    app = scripted_app(engine)
    holder: list[WatchedEngine] = []

    @web.middleware
    async def watch(request: web.Request, handler: Any) -> web.StreamResponse:
        if not request.path.endswith("/chat/completions"):  # the client asks /v1/models first
            return await handler(request)
        seen = Seen(time.monotonic())
        holder[0].seen.append(seen)
        holder[0].started.set()
        try:
            return await handler(request)
        except asyncio.CancelledError:
            seen.cut = True
            raise
        finally:
            seen.ended = time.monotonic()

    app.middlewares.append(watch)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    holder.append(WatchedEngine(engine, f"http://127.0.0.1:{port}", runner))
    yield holder[0]
    await runner.cleanup()


@pytest.fixture
async def gateway(watched: WatchedEngine, store: Any):
    gws: list[Any] = []

    async def make(**kw: Any) -> Any:
        gw = await start_gateway(OpenAICompatEngine(watched.url + "/v1"), store, owns_engine=True, **kw)
        gws.append(gw)
        return gw

    yield make
    for gw in gws:
        await gw.aclose()


async def _post(ro: dict[str, str], stream: bool) -> tuple[int, bytes]:
    body = {"model": "m", "messages": MSG, "stream": stream}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            ro["openai_base_url"] + "/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {ro['api_key']}"},
        ) as r,
    ):
        return r.status, await r.read()


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
async def test_a_hung_engine_is_cut_at_its_stall_window_as_infra(gateway, watched, store, stream):
    """Per-call limit 600 s, rollout deadline 10 s away, stall window 0.5 s: the engine sends nothing
    and fails its health probe, so the call ends after ~1 s as `engine_deadline`, the rollout is
    `infra_error:engine`, and the engine saw its request closed."""
    if stream:
        watched.engine.faults.stall_streams, watched.engine.faults.stall_after = 1, 3
    else:
        watched.engine.faults.hang_before_headers = 1
    gw = await gateway(call_deadline_s=600.0, deadline_margin_s=2.0)
    gw.gateway.stall_s = 0.5
    ro = await gw.open_rollout(deadline_at=time.time() + 10.0)
    t0 = time.monotonic()
    status, body = await _post(ro, stream)
    took = time.monotonic() - t0
    assert took < 3.0, took
    if stream:
        assert status == 200 and b"deadline" in body  # headers were out: the error is in-stream
    else:
        assert status == 504 and b"deadline" in body
    (rec,) = await store.list_calls(ro["rollout_id"])
    assert rec.error is not None and rec.error.kind == CallErrorKind.ENGINE_DEADLINE
    record = await store.get_rollout(ro["rollout_id"])
    assert record is not None and record.infra_tainted and record.status == RolloutStatus.INFRA_ENGINE
    (seen,) = await watched.wait_ended()
    assert seen.cut and seen.ended is not None and seen.ended - seen.started < 3.0


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
async def test_a_long_answer_at_the_rollout_deadline_is_a_timeout_not_infra(gateway, watched, store, stream):
    """A healthy engine still writing a long answer (here ~3 s of paced tokens; a client's huge
    `max_tokens` on a real engine) when its rollout's time is up: the call is cut at deadline - margin
    and recorded `rollout_deadline` (the rollout's `timeout`), never `engine_deadline`: a client cannot
    turn its 0 into a retry by asking for more tokens. The stall window (0.75 s here) passes without a
    byte on the non-streamed call, and the engine's passed probe lets it go on. Control: the hung
    engine above, with the same windows, is infra."""
    watched.engine.faults.token_delay_s = 0.05
    gw = await gateway(call_deadline_s=600.0, deadline_margin_s=2.0)
    ro = await gw.open_rollout(deadline_at=time.time() + 4.0)
    t0 = time.monotonic()
    status, body = await _post(ro, stream)
    took = time.monotonic() - t0
    assert 1.5 < took < 3.5, took
    assert (status == 200 if stream else status == 504) and b"deadline" in body
    (rec,) = await store.list_calls(ro["rollout_id"])
    assert rec.error is not None and rec.error.kind == CallErrorKind.ROLLOUT_DEADLINE
    assert rec.error.kind.rollout_status is RolloutStatus.TIMEOUT
    record = await store.get_rollout(ro["rollout_id"])
    assert record is not None and not record.infra_tainted and record.status is None
    (seen,) = await watched.wait_ended()
    assert seen.cut  # the engine stopped generating all the same


async def test_the_per_call_limit_on_a_healthy_engine_is_the_clients_not_infra(gateway, watched, store):
    """The per-call limit (1 s) fires while a healthy engine streams a long answer: `call_limit`, no
    taint. Control: the same limit on an engine that hangs (and so fails its probe) is infra."""
    watched.engine.faults.token_delay_s = 0.05
    gw = await gateway(call_deadline_s=1.0)
    ro = await gw.open_rollout()
    status, body = await _post(ro, True)
    assert status == 200 and b"deadline" in body
    (rec,) = await store.list_calls(ro["rollout_id"])
    assert rec.error is not None and rec.error.kind == CallErrorKind.CALL_LIMIT and rec.completion_token_ids
    record = await store.get_rollout(ro["rollout_id"])
    assert record is not None and not record.infra_tainted
    watched.engine.faults.hang_before_headers = 1
    hung = await gw.open_rollout()
    status, _ = await _post(hung, False)
    assert status == 504
    (rec,) = await store.list_calls(hung["rollout_id"])
    assert rec.error is not None and rec.error.kind == CallErrorKind.ENGINE_DEADLINE
    record = await store.get_rollout(hung["rollout_id"])
    assert record is not None and record.infra_tainted


async def test_calls_after_the_rollout_deadline_are_refused_and_not_recorded(gateway, store):
    gw = await gateway(deadline_margin_s=2.0)
    ro = await gw.open_rollout(deadline_at=time.time() + 1.0)
    status, body = await _post(ro, False)
    assert status == 403 and b"deadline" in body
    assert await store.list_calls(ro["rollout_id"]) == []
    record = await store.get_rollout(ro["rollout_id"])
    assert record is not None and not record.infra_tainted


@pytest.mark.parametrize("route", ["close", "outcome"])
async def test_ending_a_rollout_aborts_its_calls_in_flight(gateway, watched, store, route):
    watched.engine.faults.hang_before_headers = 1
    gw = await gateway(call_deadline_s=600.0)
    ro = await gw.open_rollout()
    call = asyncio.create_task(_post(ro, False))
    await asyncio.wait_for(watched.started.wait(), 5)
    body = {} if route == "close" else {"status": "timeout"}
    async with (
        aiohttp.ClientSession(headers=gw.admin_headers()) as http,
        http.post(f"{gw.admin_url}/rollouts/{ro['rollout_id']}/{route}", json=body) as r,
    ):
        assert r.status == 200, await r.text()
    t0 = time.monotonic()
    status, _ = await asyncio.wait_for(call, 5)
    assert status == 403 and time.monotonic() - t0 < 1.5
    (seen,) = await watched.wait_ended(limit_s=3)
    assert seen.cut
    (rec,) = await store.list_calls(ro["rollout_id"])
    assert rec.error is not None and rec.error.kind == CallErrorKind.CLIENT_DISCONNECTED
    record = await store.get_rollout(ro["rollout_id"])
    assert record is not None and not record.infra_tainted  # the orchestrator ended it: not a fault


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
async def test_a_client_that_goes_away_aborts_the_engine_request(gateway, watched, store, stream):
    """Today's bug: a non-streamed call kept generating upstream after its client left."""
    if stream:
        watched.engine.faults.stall_streams, watched.engine.faults.stall_after = 1, 3
    else:
        watched.engine.faults.hang_before_headers = 1
    gw = await gateway(call_deadline_s=600.0)
    ro = await gw.open_rollout()
    call = asyncio.create_task(_post(ro, stream))
    await asyncio.wait_for(watched.started.wait(), 5)
    await asyncio.sleep(0.3)
    call.cancel()  # the harness is killed: its connection closes
    t0 = time.monotonic()
    (seen,) = await watched.wait_ended(limit_s=3)
    assert seen.cut and seen.ended is not None and seen.ended - t0 < 1.5
    for _ in range(50):
        calls = await store.list_calls(ro["rollout_id"])
        if calls:
            break
        await asyncio.sleep(0.05)
    (rec,) = calls
    assert rec.error is not None and rec.error.kind == CallErrorKind.CLIENT_DISCONNECTED
    assert gw.gateway.gate.in_flight == 0
