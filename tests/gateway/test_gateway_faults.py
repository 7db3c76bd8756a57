"""Engine faults and deadlines: the client gets a 5xx (retried by harnesses), the call is recorded
with a typed error, and the rollout is infra-tainted (dropped from training, not scored 0)."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import openai
import pytest
from openai import AsyncOpenAI

from openforgerl.engines.openai_compat import OpenAICompatEngine
from openforgerl.gateway.server import start_gateway
from openforgerl.records import CallErrorKind, RolloutStatus

MSG = [{"role": "user", "content": "hi"}]
LONG = " ".join(f"w{i}" for i in range(60))


def client(ro: dict[str, str]) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0)


async def _tainted(setup, rollout_id: str) -> bool:
    rollout = await setup.store.get_rollout(rollout_id)
    return bool(rollout and rollout.infra_tainted and rollout.status == RolloutStatus.INFRA_ENGINE)


@pytest.mark.parametrize("via_http", [False, True], ids=["inproc", "http"])
@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
async def test_engine_5xx_is_502_and_taints(make_gateway, via_http, stream):
    setup = await make_gateway(lambda t: "ok", via_http=via_http)
    setup.engine.faults.http_errors = 1
    ro = await setup.rollout()
    with pytest.raises(openai.InternalServerError) as info:
        r = await client(ro).chat.completions.create(model="m", messages=MSG, stream=stream)
        if stream:
            async for _ in r:
                pass
    assert info.value.status_code == 502
    (rec,) = await setup.records(ro["rollout_id"])
    assert rec.error is not None and rec.error.kind == CallErrorKind.ENGINE_HTTP and rec.error.status == 500
    assert await _tainted(setup, ro["rollout_id"])
    await client(ro).chat.completions.create(model="m", messages=MSG)  # next call works again


async def test_engine_4xx_is_client_error_not_taint(make_gateway):
    setup = await make_gateway(lambda t: "ok", via_http=True)
    setup.engine.faults.http_errors, setup.engine.faults.http_status = 1, 400
    ro = await setup.rollout()
    with pytest.raises(openai.BadRequestError):
        await client(ro).chat.completions.create(model="m", messages=MSG)
    (rec,) = await setup.records(ro["rollout_id"])
    assert rec.error is not None and rec.error.kind == CallErrorKind.CLIENT_BAD_REQUEST
    rollout = await setup.store.get_rollout(ro["rollout_id"])
    assert rollout is not None and not rollout.infra_tainted


@pytest.mark.parametrize("via_http", [False, True], ids=["inproc", "http"])
@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
async def test_hang_before_headers_hits_deadline(make_gateway, via_http, stream):
    setup = await make_gateway(lambda t: "ok", via_http=via_http, call_deadline_s=0.5)
    setup.engine.faults.hang_before_headers = 1
    ro = await setup.rollout()
    with pytest.raises(openai.InternalServerError) as info:
        await client(ro).chat.completions.create(model="m", messages=MSG, stream=stream)
    assert info.value.status_code == 504
    (rec,) = await setup.records(ro["rollout_id"])
    assert rec.error is not None and rec.error.kind == CallErrorKind.ENGINE_DEADLINE
    assert await _tainted(setup, ro["rollout_id"])


@pytest.mark.parametrize("via_http", [False, True], ids=["inproc", "http"])
async def test_stalled_stream_hits_deadline_keeps_partial_tokens(make_gateway, via_http):
    setup = await make_gateway(lambda t: LONG, via_http=via_http, call_deadline_s=1.0)
    setup.engine.faults.stall_streams, setup.engine.faults.stall_after = 1, 5
    ro = await setup.rollout()
    seen = ""
    with pytest.raises(openai.APIError):
        stream = await client(ro).chat.completions.create(model="m", messages=MSG, stream=True)
        async for chunk in stream:
            seen += chunk.choices[0].delta.content or "" if chunk.choices else ""
    (rec,) = await setup.records(ro["rollout_id"])
    assert rec.error is not None and rec.error.kind == CallErrorKind.ENGINE_DEADLINE
    assert rec.completion_token_ids == setup.engine.produced[0].ids[:4]  # role chunk + 4 token chunks
    assert rec.completion_logprobs == setup.engine.produced[0].logprobs[:4]
    assert seen and await _tainted(setup, ro["rollout_id"])


async def test_engine_unreachable_is_connection_error(store):
    gw = await start_gateway(OpenAICompatEngine("http://127.0.0.1:9/v1", model="m"), store)
    try:
        ro = await gw.open_rollout()
        with pytest.raises(openai.InternalServerError) as info:
            await client(ro).chat.completions.create(model="m", messages=MSG)
        assert info.value.status_code == 502
        (rec,) = await store.list_calls(ro["rollout_id"])
        assert rec.error is not None and rec.error.kind == CallErrorKind.ENGINE_CONNECTION
    finally:
        await gw.aclose()


@pytest.mark.parametrize("via_http", [False, True], ids=["inproc", "http"])
async def test_client_disconnect_mid_stream_is_recorded(make_gateway, via_http):
    setup = await make_gateway(lambda t: LONG, via_http=via_http)
    setup.engine.faults.token_delay_s = 0.02
    ro = await setup.rollout()
    body = {"model": "m", "messages": MSG, "stream": True}
    async with aiohttp.ClientSession() as http:
        resp = await http.post(
            ro["openai_base_url"] + "/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {ro['api_key']}"},
        )
        seen = 0
        while seen < 3:  # a few events carrying tokens (the first may be the role alone)
            line = await resp.content.readline()
            seen += line.startswith(b"data: ") and b'"token_ids":[' in line
        resp.close()  # the harness goes away mid-stream
    for _ in range(200):
        records = await setup.records(ro["rollout_id"])
        if records:
            break
        await asyncio.sleep(0.05)
    (rec,) = records
    assert rec.error is not None and rec.error.kind == CallErrorKind.CLIENT_DISCONNECTED
    produced = setup.engine.produced[0]
    n = len(rec.completion_token_ids)
    assert 0 < n < len(produced.ids)
    assert rec.completion_token_ids == produced.ids[:n] and rec.completion_logprobs == produced.logprobs[:n]
    rollout = await setup.store.get_rollout(ro["rollout_id"])
    assert rollout is not None and not rollout.infra_tainted


async def test_the_taint_long_poll_wakes_on_the_taint_and_waits_otherwise(make_gateway):
    """`GET /rollouts/{id}/taint?wait_s=`: the orchestrator's signal to end a tainted rollout's harness at
    once. A 4xx of the client's is no taint (the poll waits on); the engine's 5xx wakes it within the call."""
    setup = await make_gateway(lambda t: "ok")
    gw = setup.gateway
    ro = await setup.rollout()
    rid = ro["rollout_id"]
    async with aiohttp.ClientSession(headers=gw.admin_headers()) as http:

        async def poll(wait_s: float) -> tuple[int, dict, float]:
            t0 = time.monotonic()
            async with http.get(f"{gw.admin_url}/rollouts/{rid}/taint", params={"wait_s": str(wait_s)}) as r:
                return r.status, await r.json(), time.monotonic() - t0

        status, body, took = await poll(0.3)
        assert status == 200 and body["infra_tainted"] is False and took >= 0.3  # nothing happened: it waited
        waiting = asyncio.create_task(poll(30))
        await asyncio.sleep(0.2)
        setup.engine.faults.http_errors = 1
        with pytest.raises(openai.InternalServerError):
            await client(ro).chat.completions.create(model="m", messages=MSG)
        status, body, took = await waiting
        assert status == 200 and body["infra_tainted"] is True and body["status"] == "infra_error:engine"
        assert took < 10  # woken by the taint, not by its 30 s
        for bad in ("-1", "61", "nan", "soon"):
            async with http.get(f"{gw.admin_url}/rollouts/{rid}/taint", params={"wait_s": bad}) as r:
                assert r.status == 400 and (await r.json())["error"]["param"] == "wait_s"
        async with http.get(f"{gw.admin_url}/rollouts/nope/taint", params={"wait_s": "0"}) as r:
            assert r.status == 404
    async with aiohttp.ClientSession() as http:  # the admin plane's token, and only on the admin listener
        async with http.get(f"{gw.admin_url}/rollouts/{rid}/taint", params={"wait_s": "0"}) as r:
            assert r.status == 401
        async with http.get(
            f"{gw.model_url}/rollouts/{rid}/taint",
            params={"wait_s": "0"},
            headers={"Authorization": f"Bearer {ro['api_key']}"},
        ) as r:
            assert r.status == 404
