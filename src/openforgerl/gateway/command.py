"""`openforgerl gateway`: serve the recording gateway in front of one or more engine replicas.

Two listeners: `--host/--port` for model calls (the only one sandboxes may reach) and
`--admin-host/--admin-port` for the admin API (loopback by default). The admin token comes from
`--admin-token-file` (first line), else `$OPENFORGERL_ADMIN_TOKEN`; when neither holds one it is
generated, and written to `--admin-token-file` (mode 0600) when that names a file not there yet,
so a separately started orchestrator can read it. The token is never printed.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import os
import secrets
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
    admin_host: Annotated[str, typer.Option(help="address the admin API binds (never a sandbox's)")] = "127.0.0.1",
    admin_port: Annotated[int, typer.Option(help="port of the admin API listener")] = 8081,
    admin_token_file: Annotated[Path | None, typer.Option(
        help="admin bearer token file (read; written when absent and no $OPENFORGERL_ADMIN_TOKEN)")] = None,
    allow_image_urls: Annotated[bool, typer.Option(
        help="forward http(s) image URLs for the engine to fetch (recorded by URL only)")] = False,
    max_image_bytes: Annotated[int, typer.Option(help="largest decoded prompt image, bytes")] = 20 * 1024 * 1024,
    max_image_pixels: Annotated[int, typer.Option(help="largest prompt image, width x height")] = 40_000_000,
) -> None:
    """Serve `/r/<rollout>/v1` (OpenAI) and `/r/<rollout>` (Anthropic) plus the admin API."""
    if dialect not in ("vllm", "sglang"):
        raise typer.BadParameter("--dialect must be vllm or sglang")
    try:  # a dependency on Linux (vLLM and SGLang serve on it too): ~15 % less CPU per call
        import uvloop

        uvloop.install()
    except ImportError:  # platforms without a uvloop wheel
        pass
    from openforgerl.config import load_config

    # the flags as the one config schema (openforgerl.config): engine, store and gateway sections
    config = load_config({}, {
        "engine.kind": "remote", "engine.urls": engine, "engine.dialect": dialect, "engine.served_model": model,
        "engine.max_tokens_cap": max_tokens_cap, "store.path": str(store),
        "gateway": {"host": host, "port": port, "admin_host": admin_host, "admin_port": admin_port,
                    "call_deadline_s": call_deadline_s, "pause_wait_s": pause_wait_s, "max_in_flight": max_in_flight,
                    "policy_version": policy_version, "allow_image_urls": allow_image_urls,
                    "max_image_bytes": max_image_bytes, "max_image_pixels": max_image_pixels}}, source="flags")
    asyncio.run(_serve(config, admin_token(admin_token_file), secret))


def admin_token(token_file: Path | None) -> str:
    """The admin token: from the file, else the environment, else a new one (saved to the file)."""
    from openforgerl.gateway.access import read_admin_token

    if token_file is not None and token_file.exists():
        found = read_admin_token(token_file)
        if not found:
            raise typer.BadParameter(f"--admin-token-file {token_file} is empty")
        return found
    token = read_admin_token() or secrets.token_urlsafe(32)
    if token_file is not None:
        token_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
    return token


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


# glibc's mallopt parameters (malloc.h): M_TRIM_THRESHOLD -1, M_TOP_PAD -2, M_MMAP_THRESHOLD -3
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


def _tune_malloc() -> None:
    """Keep freed memory in a dedicated gateway process's heap instead of handing it back to the kernel.

    A call with screenshots allocates buffers of 55-330 KB (the body, the decoded image, the engine's
    payload, the record), and glibc's defaults return them to the kernel as they are freed: a chunk
    over the mmap threshold is unmapped, and a free top of heap over the trim threshold is trimmed.
    The next call's buffers then come back as fresh zeroed pages, a page fault per 4 KB: 68 faults
    per call with five screenshots, 22 with these settings (what is left is the seen-image cache
    growing until it is full; benchmarks/multimodal.py). In a micro-benchmark a 74 KB
    slice cost 50 us with the defaults and 6 us with these settings; in the gateway, 0.91-0.94x the CPU
    per call with screenshots (same interleaved run, with and without). Bounded: at most 128 MB of freed
    heap is kept. Nothing happens on a libc without `mallopt` (musl, macOS). (Touching the heap's pages
    once at start as well made no measurable difference.)"""
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    for param, value in ((_M_MMAP_THRESHOLD, 32 << 20), (_M_TRIM_THRESHOLD, 128 << 20), (_M_TOP_PAD, 16 << 20)):
        mallopt(ctypes.c_int(param), ctypes.c_int(value))


async def _serve(config: Any, token: str, secret: str | None) -> None:
    from openforgerl.stack import open_gateway

    async with open_gateway(Path("."), config, admin_token=token, secret=secret) as opened:
        gw = opened.gateway
        _tune_gc()
        _tune_malloc()
        print(f"openforgerl gateway: model calls on {gw.model_url}, admin API on {gw.admin_url} "
              f"(pid {os.getpid()}), store {config.store.path}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
