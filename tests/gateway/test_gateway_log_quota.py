"""A rollout's call log quota counts what it really adds to the host: records and image blobs.

The gateway's running count of a rollout's log bytes equals what SQLite holds for it (its records'
bodies plus the blobs its calls stored), so screenshots cannot grow the log past the quota unseen;
and a rollout past its quota gets a 413 on every protocol, in that protocol's shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import random
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from imgkit import FakeVLM, data_url
from PIL import Image

from openforgerl.engines.openai_compat import OpenAICompatEngine
from openforgerl.gateway.server import RunningGateway, start_gateway
from openforgerl.store.sqlite import SQLiteCallStore


def _stored(gw: RunningGateway, db: Path, rollout_id: str) -> tuple[int, int]:
    """(bytes of the rollout's call records in SQLite, bytes of every blob in the blob packs)."""
    with sqlite3.connect(db) as conn:
        calls = conn.execute(
            "SELECT coalesce(sum(length(body)), 0) FROM calls WHERE rollout_id = ?", (rollout_id,)
        ).fetchone()[0]
    store = gw.gateway.store
    assert isinstance(store, SQLiteCallStore)
    return int(calls), store.read_blob_usage()[1]


@pytest.fixture
async def vlm_gateway(tmp_path: Path) -> AsyncIterator[tuple[RunningGateway, Path]]:
    fake = FakeVLM()
    runner = web.AppRunner(fake.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    db = tmp_path / "calls.db"
    store = SQLiteCallStore(db)
    engine = OpenAICompatEngine(f"http://127.0.0.1:{port}/v1")
    gw = await start_gateway(engine, store, max_log_bytes_per_rollout=200_000)
    try:
        yield gw, db
    finally:
        await gw.aclose()
        await engine.aclose()
        await store.aclose()
        await runner.cleanup()


def _noise_png(seed: int, size: tuple[int, int] = (120, 90)) -> bytes:
    """An image PNG cannot shrink (~32 KB): what makes blobs the bulk of a call's log bytes."""
    out = io.BytesIO()
    Image.frombytes("RGB", size, random.Random(seed).randbytes(size[0] * size[1] * 3)).save(out, format="PNG")
    return out.getvalue()


def _image_call(seed: int) -> dict[str, Any]:
    shot = _noise_png(seed)
    return {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is on the screen?"},
                    {"type": "image_url", "image_url": {"url": data_url(shot)}},
                ],
            }
        ],
    }


async def test_image_blobs_count_against_the_quota(vlm_gateway: tuple[RunningGateway, Path]) -> None:
    gw, db = vlm_gateway
    ro = await gw.open_rollout()
    rid = ro["rollout_id"]
    headers = {"Authorization": f"Bearer {ro['api_key']}", "x-api-key": ro["api_key"]}
    statuses = []
    async with aiohttp.ClientSession() as http:
        for seed in range(40):  # distinct screenshots until the quota says no
            async with http.post(
                ro["openai_base_url"] + "/chat/completions", json=_image_call(seed), headers=headers
            ) as r:
                statuses.append(r.status)
                if r.status != 200:
                    assert r.status == 413 and (await r.json())["error"]["code"] == "rollout_log_quota"
                    break
        # a body past what is left is refused on every protocol, here in Anthropic's shape
        body = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "x" * 100_000}]}
        async with http.post(ro["anthropic_base_url"] + "/v1/messages", json=body, headers=headers) as r:
            assert r.status == 413
            err = await r.json()
            assert err["type"] == "error" and err["error"]["type"] == "request_too_large"
    assert (
        len(await gw.gateway.store.list_calls(rid)) == statuses.count(200) + 1
    )  # and caught up from its journal
    calls, blobs = _stored(gw, db, rid)
    assert blobs > 0 and statuses[0] == 200  # control: images were stored, so there was something to count
    state = await gw.gateway.registry.state(rid)
    assert state.log_bytes == calls + blobs  # the count is what the host holds, blobs included
    assert statuses[-1] == 413 and calls + blobs <= 200_000 + 20_000


async def test_a_call_that_never_began_gives_its_reservation_back(make_gateway) -> None:
    """A body is reserved when it arrives; a client that leaves while its call waits out a weight-sync
    pause wrote nothing, and its rollout gets the bytes back (else a harness's retries would use up
    its quota)."""
    setup = await make_gateway(lambda t: "ok", pause_wait_s=30.0)
    ro = await setup.rollout()
    state = await setup.gateway.gateway.registry.state(ro["rollout_id"])
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 50_000}]}
    await setup.gateway.pause(0)
    async with aiohttp.ClientSession() as http:
        post = asyncio.create_task(
            http.post(
                ro["openai_base_url"] + "/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {ro['api_key']}"},
            )
        )
        for _ in range(200):
            await asyncio.sleep(0.01)
            if state.log_bytes:
                break
        assert state.log_bytes > 50_000  # control: held while the call waits at the pause
        post.cancel()  # the client goes away
        with contextlib.suppress(asyncio.CancelledError):
            await post
    for _ in range(200):
        await asyncio.sleep(0.01)
        if not state.log_bytes:
            break
    assert state.log_bytes == 0 and state.calls_in_flight == 0
    setup.gateway.resume()
    assert await setup.records(ro["rollout_id"]) == []
