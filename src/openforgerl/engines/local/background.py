"""Run a local engine server on a background thread (tests, notebooks, in-process training loops)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any

from openforgerl.engines.local.engine import LocalEngine


class BackgroundServer:
    """`LocalEngine` + its HTTP app on a private event loop thread; `url` is the base URL."""

    def __init__(self, engine: LocalEngine, host: str = "127.0.0.1", port: int = 0) -> None:
        self.engine, self.host, self.port = engine, host, port
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="openforgerl-engine-http", daemon=True)
        self._thread.start()
        self._ready.wait(120)
        if self._error is not None:
            raise self._error

    @classmethod
    def start(cls, model: str, served_model_name: str | None = None, **kw: Any) -> BackgroundServer:
        engine = LocalEngine.from_pretrained(model)
        if served_model_name:
            engine.loaded.name = served_model_name
        return cls(engine, **kw)

    def _run(self) -> None:
        from openforgerl.engines.local.server import serve
        from openforgerl.engines.local.vllm_cpu import free_port

        asyncio.set_event_loop(self.loop)
        try:
            self.port = self.port or free_port()
            self.runner = self.loop.run_until_complete(serve(self.engine, self.host, self.port))
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 300) -> Any:
        """Run a coroutine on the server's loop (e.g. `engine.load_state_dict`) and wait for it."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.run(self.runner.cleanup())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.engine.shutdown()
