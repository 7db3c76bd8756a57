"""Weight-sync pause: in-flight calls drain, new ones wait, long waits and overload get 503."""

from __future__ import annotations

import asyncio

import openai
import pytest
from openai import AsyncOpenAI

MSG = [{"role": "user", "content": "hi"}]


def client(ro: dict[str, str]) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0)


async def _drain(stream) -> None:
    async for _ in stream:
        pass


async def test_pause_drains_then_waiting_call_runs_on_new_version(make_gateway):
    setup = await make_gateway(lambda t: " ".join(["tok"] * 30), pause_wait_s=30)
    setup.engine.faults.token_delay_s = 0.02
    ro = await setup.rollout()
    c = client(ro)
    stream = await c.chat.completions.create(model="m", messages=MSG, stream=True)
    inflight = asyncio.create_task(_drain(stream))
    await asyncio.sleep(0.05)
    pause = asyncio.create_task(setup.gateway.pause())
    await asyncio.sleep(0.05)
    waiting = asyncio.create_task(c.chat.completions.create(model="m", messages=MSG))
    await asyncio.wait_for(pause, 30)
    assert inflight.done() and not waiting.done()  # drained, and the new call is held
    assert setup.gateway.resume() == 1
    await asyncio.wait_for(waiting, 30)
    recs = await setup.records(ro["rollout_id"])
    assert [r.policy_version for r in recs] == [0, 1] and all(r.error is None for r in recs)


async def test_paused_too_long_is_503_not_429(make_gateway):
    setup = await make_gateway(lambda t: "ok", pause_wait_s=0.2)
    ro = await setup.rollout()
    await setup.gateway.pause()
    with pytest.raises(openai.InternalServerError) as info:
        await client(ro).chat.completions.create(model="m", messages=MSG)
    assert info.value.status_code == 503
    assert info.value.response.headers.get("retry-after")
    setup.gateway.resume()
    await client(ro).chat.completions.create(model="m", messages=MSG)


async def test_overload_is_503(make_gateway):
    setup = await make_gateway(lambda t: " ".join(["tok"] * 30), max_in_flight=1)
    setup.engine.faults.token_delay_s = 0.02
    ro = await setup.rollout()
    c = client(ro)
    stream = await c.chat.completions.create(model="m", messages=MSG, stream=True)
    with pytest.raises(openai.InternalServerError) as info:
        await c.chat.completions.create(model="m", messages=MSG)
    assert info.value.status_code == 503
    await _drain(stream)
