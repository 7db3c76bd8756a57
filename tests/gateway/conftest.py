"""Fixtures for gateway tests: a real gateway on loopback in front of a scripted engine.

The scripted engine is the only double (it decides what the "model" says); tokens come from the
real tokenizer and clients are the official SDKs. `via_http=True` puts the engine behind its HTTP
wrapper and the gateway's real OpenAI-compatible client (vLLM dialect) instead of in-process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from gwkit import Setup

from openforgerl.engines.chat_format import ChatFormat
from openforgerl.engines.openai_compat import OpenAICompatEngine
from openforgerl.engines.scripted import Policy, ScriptedEngine
from openforgerl.engines.scripted_server import start_scripted_server
from openforgerl.gateway.server import start_gateway
from openforgerl.store.sqlite import SQLiteCallStore


@pytest.fixture(scope="session")
def fmt() -> ChatFormat:
    return ChatFormat.load()


@pytest.fixture
async def store(tmp_path: Any) -> AsyncIterator[SQLiteCallStore]:
    s = SQLiteCallStore(tmp_path / "calls.db")
    yield s
    await s.aclose()


@pytest.fixture
async def make_gateway(store: SQLiteCallStore, fmt: ChatFormat) -> AsyncIterator[Callable[..., Any]]:
    closers: list[Any] = []

    async def make(policy: Policy, *, via_http: bool = False, **kw: Any) -> Setup:
        engine = ScriptedEngine(policy, fmt=fmt)
        upstream: Any = engine
        if via_http:
            server = await start_scripted_server(engine)
            closers.append(server)
            upstream = OpenAICompatEngine(server.url + "/v1")
            closers.append(upstream)
        gw = await start_gateway(upstream, store, **kw)
        closers.append(gw)
        return Setup(gw, engine, store)

    yield make
    for c in reversed(closers):
        await c.aclose()
