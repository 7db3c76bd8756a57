"""`openforgerl gateway`: serve the recording gateway in front of one or more engine replicas."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from pathlib import Path
from typing import Annotated, Any

import typer


def command(
    engine: Annotated[list[str], typer.Option("--engine", help="engine base URL (repeat for replicas)")],
    host: Annotated[str, typer.Option(help="address to bind (keep it loopback unless fronted)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to serve on")] = 8080,
    store: Annotated[Path, typer.Option(help="SQLite call log path")] = Path("runs/calls.db"),
    dialect: Annotated[str, typer.Option(help="engine dialect: vllm or sglang")] = "vllm",
    model: Annotated[str | None, typer.Option(help="served model name (default: ask the engine)")] = None,
    call_deadline_s: Annotated[float, typer.Option(help="per-call upstream deadline, seconds")] = 600.0,
    pause_wait_s: Annotated[float, typer.Option(help="how long a call waits while paused before 503")] = 30.0,
    max_in_flight: Annotated[int, typer.Option(help="calls in flight before answering 503")] = 4096,
    policy_version: Annotated[int, typer.Option(help="policy version to start from")] = 0,
    max_tokens_cap: Annotated[int | None, typer.Option(help="clamp clients' max_tokens to this")] = None,
    secret: Annotated[str | None, typer.Option(envvar="OPENFORGERL_GATEWAY_SECRET",
                                               help="key-derivation secret shared by gateway replicas")] = None,
) -> None:
    """Serve `/r/<rollout>/v1` (OpenAI) and `/r/<rollout>` (Anthropic) plus the admin API."""
    if dialect not in ("vllm", "sglang"):
        raise typer.BadParameter("--dialect must be vllm or sglang")
    try:  # a dependency on Linux (vLLM and SGLang serve on it too): ~15 % less CPU per call
        import uvloop  # type: ignore[import-not-found]

        uvloop.install()
    except ImportError:  # platforms without a uvloop wheel
        pass
    upstream = dict(urls=engine, dialect=dialect, model=model, max_tokens_cap=max_tokens_cap)
    asyncio.run(_serve(upstream, host, port, store, call_deadline_s, pause_wait_s, max_in_flight,
                       policy_version, secret))


def _tune_gc() -> None:
    """Keep the cyclic GC off the hot path of a dedicated gateway process.

    Every call allocates hundreds of acyclic containers (parsed request and engine JSON), so the
    default gen-0 threshold (700) runs a collection every few calls, and each one at high
    concurrency walks every in-flight body; freezing the start-up heap also takes the imported
    modules out of every full collection. Measured in benchmarks/gateway_overhead.py at C=256:
    about a fifth of the gateway's CPU per call. Cycles are still collected, just in larger batches.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


async def _serve(upstream_kw: dict[str, Any], host: str, port: int, store_path: Path, call_deadline_s: float,
                 pause_wait_s: float, max_in_flight: int, policy_version: int, secret: str | None) -> None:
    from openforgerl.engines.openai_compat import OpenAICompatEngine
    from openforgerl.gateway.server import start_gateway
    from openforgerl.store.sqlite import SQLiteCallStore

    store = SQLiteCallStore(store_path)
    upstream = OpenAICompatEngine(**upstream_kw)
    gw = await start_gateway(upstream, store, host=host, port=port, call_deadline_s=call_deadline_s,
                             pause_wait_s=pause_wait_s, max_in_flight=max_in_flight, secret=secret,
                             policy_version=policy_version, owns_engine=True)
    _tune_gc()
    print(f"openforgerl gateway listening on {gw.url} (pid {os.getpid()}), store {store_path}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await gw.aclose()
    await store.aclose()
