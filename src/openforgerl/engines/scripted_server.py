"""The scripted engine (scripted.py) over HTTP in vLLM's wire shape: `scripted_app(engine)` serves
`/v1/chat/completions`, `/v1/models`, `/tokenize`, `/detokenize` and `/health`, with the engine's `Faults`
(5xx answers, stalled streams, hangs before headers); `start_scripted_server` runs it in this event loop
(tests, benchmarks), and `python -m openforgerl.engines.scripted_server --port P` runs one on its own.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import orjson

from openforgerl.engines.base import EngineCall
from openforgerl.engines.local import chat as chat_face
from openforgerl.engines.local.requests import ApiError
from openforgerl.engines.scripted import Faults, Policy, ScriptedEngine, _Replay, _served


def _engine_key() -> Any:
    from aiohttp import web

    return web.AppKey("scripted_engine", ScriptedEngine)


ENGINE_KEY = _engine_key()


def _sse(body: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(body) + b"\n\n"


async def _handle_chat(request: Any) -> Any:
    from aiohttp import web

    engine: ScriptedEngine = request.app[ENGINE_KEY]
    body = orjson.loads(await request.read())
    call = EngineCall(body, request.headers.get("x-route-key") or body.get("user") or "http")
    if engine.faults.take("hang_before_headers"):
        await engine.hang()
    if engine.faults.take("http_errors"):
        err = {
            "error": {"message": "scripted fault", "type": "server_error", "code": engine.faults.http_status}
        }
        return web.json_response(err, status=engine.faults.http_status)
    try:
        done = engine.sample(call)
        model = _Replay(engine, done)
        req = await chat_face.prepare(model, _served(body, done.thinking))
    except ApiError as exc:
        return web.json_response(exc.body(), status=exc.status)
    if not req.opts.stream:
        return web.Response(
            body=orjson.dumps(await chat_face.chat_body(model, req)), content_type="application/json"
        )
    return await _stream_http(request, engine, chat_face.chat_chunks(model, req))


async def _stream_http(
    request: Any, engine: ScriptedEngine, chunks: AsyncGenerator[dict[str, Any], None]
) -> Any:
    from aiohttp import web

    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    stall = engine.faults.take("stall_streams")
    async with aclosing(chunks):
        n = 0
        async for body in chunks:
            if stall and n >= engine.faults.stall_after:
                await engine.hang()
            n += 1
            await resp.write(_sse(body))
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


async def _handle_tokenize(request: Any) -> Any:
    """vLLM's `/tokenize` of a chat body (the gateway's count_tokens and the contract suite ask it)."""
    from aiohttp import web

    engine: ScriptedEngine = request.app[ENGINE_KEY]
    body = orjson.loads(await request.read())
    ids = engine.prompt_ids(body) if "messages" in body else engine.fmt.encode(body.get("prompt") or "")
    return web.json_response({"count": len(ids), "max_model_len": _Replay.max_model_len, "tokens": ids})


async def _handle_detokenize(request: Any) -> Any:
    from aiohttp import web

    engine: ScriptedEngine = request.app[ENGINE_KEY]
    body = orjson.loads(await request.read())
    return web.json_response({"prompt": engine.fmt.decode(list(body.get("tokens") or []))})


async def _handle_health(request: Any) -> Any:
    from aiohttp import web

    engine: ScriptedEngine = request.app[ENGINE_KEY]
    return await _ok() if await engine.healthy("") else web.Response(status=503, text="wedged")


async def _handle_models(request: Any) -> Any:
    from aiohttp import web

    engine: ScriptedEngine = request.app[ENGINE_KEY]
    return web.json_response(
        {"object": "list", "data": [{"id": engine.model, "object": "model", "owned_by": "openforgerl"}]}
    )


def scripted_app(engine: ScriptedEngine) -> Any:
    """An aiohttp app serving `engine` at `/v1/chat/completions` and `/v1/models` like vLLM."""
    from aiohttp import web

    app = web.Application(client_max_size=256 * 1024 * 1024)
    app[ENGINE_KEY] = engine
    app.router.add_post("/v1/chat/completions", _handle_chat)
    app.router.add_get("/v1/models", _handle_models)
    app.router.add_post("/tokenize", _handle_tokenize)
    app.router.add_post("/detokenize", _handle_detokenize)
    app.router.add_get("/health", _handle_health)
    return app


async def _ok() -> Any:
    from aiohttp import web

    return web.Response(text="ok")


@dataclass
class RunningScripted:
    """A scripted engine served on loopback; `url` is the base (append `/v1`)."""

    url: str
    port: int
    engine: ScriptedEngine
    runner: Any

    async def aclose(self) -> None:
        await self.runner.cleanup()


async def start_scripted_server(
    engine: ScriptedEngine, *, host: str = "127.0.0.1", port: int = 0
) -> RunningScripted:
    """Serve `engine` over HTTP in this event loop (for tests and benchmarks)."""
    from aiohttp import web

    runner = web.AppRunner(
        scripted_app(engine),
        access_log=None,
        keepalive_timeout=600,
        handler_cancellation=True,
        shutdown_timeout=1.0,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return RunningScripted(f"http://{host}:{bound}", bound, engine, runner)


def repeat_policy(text: str) -> Policy:
    """A policy that always 'samples' `text` (benchmarks; cut to length by max_tokens)."""
    return lambda _turn: text


def main(argv: list[str] | None = None) -> None:
    """`python -m openforgerl.engines.scripted_server --port P [--token-delay-ms D]`: a fast fake vLLM."""
    import argparse

    from aiohttp import web

    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8001)
    p.add_argument("--token-delay-ms", type=float, default=0.0)
    p.add_argument("--text", default=" ".join(f"word{i}" for i in range(400)))
    args = p.parse_args(argv)
    engine = ScriptedEngine(
        repeat_policy(args.text), faults=Faults(token_delay_s=args.token_delay_ms / 1000), keep_produced=False
    )
    web.run_app(
        scripted_app(engine),
        host=args.host,
        port=args.port,
        access_log=None,
        keepalive_timeout=600,
        handler_cancellation=True,
        print=None,
    )


if __name__ == "__main__":
    main()
