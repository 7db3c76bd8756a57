"""A gateway SIGKILLed right after a call finished loses nothing: the record was durable first."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import pytest
from openai import AsyncOpenAI

from openforgerl.engines.scripted import ScriptedEngine, start_scripted_server
from openforgerl.store.sqlite import SQLiteCallStore


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _wait_healthy(url: str, proc: asyncio.subprocess.Process) -> None:
    async with aiohttp.ClientSession() as http:
        for _ in range(300):
            if proc.returncode is not None:
                raise AssertionError("gateway exited early")
            try:
                async with http.get(url + "/healthz") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError("gateway did not come up")


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
async def test_sigkill_after_call_keeps_record(tmp_path: Path, fmt, stream):
    engine = ScriptedEngine(lambda t: "the answer is 42", fmt=fmt)
    server = await start_scripted_server(engine)
    port, db = _free_port(), tmp_path / "calls.db"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "openforgerl.gateway", "--engine", server.url + "/v1", "--port", str(port),
        "--store", str(db), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        await _wait_healthy(url, proc)
        async with aiohttp.ClientSession() as http, http.post(url + "/rollouts", json={"task_id": "k"}) as r:
            ro = await r.json()
        c = AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0)
        msgs = [{"role": "user", "content": "what is it?"}]
        if stream:
            async for _ in await c.chat.completions.create(model="m", messages=msgs, stream=True):
                pass
        else:
            await c.chat.completions.create(model="m", messages=msgs)
        os.kill(proc.pid, signal.SIGKILL)  # right after the last byte arrived
        await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await server.aclose()
    store = SQLiteCallStore(db)
    try:
        (rec,) = store.read_calls(ro["rollout_id"])
        (done,) = engine.produced
        assert rec.completion_token_ids == done.ids and rec.completion_logprobs == done.logprobs
        assert rec.prompt_token_ids == done.prompt_ids and rec.error is None
    finally:
        store.close()
