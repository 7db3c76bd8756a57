"""A scripted engine served over HTTP from a thread: the judge's or the simulated user's *decisions* only
(the prompt is still rendered and tokenized for real). Used by the judge / user-simulator tests."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from openforgerl.engines.scripted import ScriptedEngine, Turn
from openforgerl.engines.scripted_server import scripted_app


@dataclass
class Served:
    url: str
    port: int
    turns: list[Turn] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve_policy(decide: Callable[[Turn], str]) -> Iterator[Served]:
    """`decide(turn) -> text` behind `/v1/chat/completions` on 127.0.0.1 (every turn is recorded)."""
    from aiohttp import web

    port = free_port()
    served = Served(f"http://127.0.0.1:{port}/v1", port)

    def policy(turn: Turn) -> str:
        served.turns.append(turn)
        return decide(turn)

    loop = asyncio.new_event_loop()
    started = threading.Event()
    runner: dict[str, Any] = {}

    async def start() -> None:
        r = web.AppRunner(scripted_app(ScriptedEngine(policy)))
        await r.setup()
        await web.TCPSite(r, "127.0.0.1", port).start()
        runner["r"] = r
        started.set()

    def main() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    assert started.wait(30), "scripted engine did not start"
    try:
        yield served
    finally:
        asyncio.run_coroutine_threadsafe(runner["r"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def user_text(turn: Turn) -> str:
    return " ".join(str(m.get("content", "")) for m in turn.messages if m.get("role") == "user")
