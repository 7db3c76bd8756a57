"""aiohttp app speaking the subset of vLLM's OpenAI-compatible API that the gateway relies on.

Routes: /v1/chat/completions, /v1/completions, /tokenize, /detokenize, /v1/models, /health, /version,
and the RL/dev routes of a vLLM started with VLLM_SERVER_DEV_MODE=1: /collective_rpc
(reload_weights), /pause, /resume, /is_paused, /update_weight_version, /weight_info,
/reset_prefix_cache (and /reset_mm_cache, /reset_encoder_cache: no caches here, so no-ops).

A vision-language model (`--model tiny-vl`) takes `image_url` parts (data: URLs) in user, system and
tool messages; `prompt_token_ids` carry the expanded `<|image_pad|>` runs as vLLM's do, and — an
extension vLLM does not have — a chat response (the first chunk when streaming) with images has
`openforgerl_images: [{"grid_thw": [t, h, w], "tokens": n}, ...]`, one entry per image in prompt
order (`tokens` = pads in that image's run); `/v1/models` cards carry `openforgerl_processor` (the
image processor settings and vision token ids, enough to recompute pixels and grids for training).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

import orjson
from aiohttp import web

from openforgerl.engines.local.chat import chat_body, chat_chunks, prepare, raise_if_failed, with_images
from openforgerl.engines.local.engine import LocalEngine
from openforgerl.engines.local.generation import Generation
from openforgerl.engines.local.requests import ApiError, completion_prompts, sampling_params
from openforgerl.engines.local.responses import logprob_entry, new_id, usage, visible_text
from openforgerl.engines.local.vlm import ImageError

log = logging.getLogger(__name__)
ENGINE_KEY: web.AppKey[LocalEngine] = web.AppKey("engine", LocalEngine)


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def _engine(request: web.Request) -> LocalEngine:
    return request.app[ENGINE_KEY]


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        raise ApiError(f"invalid JSON body: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiError("request body must be a JSON object")
    return body


@web.middleware
async def errors(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except ApiError as exc:
        return _json(exc.body(), exc.status)
    except ImageError as exc:
        return _json(ApiError(str(exc)).body(), 400)
    except (KeyError, ValueError, TypeError) as exc:
        return _json(ApiError(f"{type(exc).__name__}: {exc}").body(), 400)


# -- chat (the bodies and chunks come from chat.py, shared with the in-process Engine methods) ------
async def chat_completions(request: web.Request) -> web.StreamResponse:
    engine = _engine(request)
    req = await prepare(engine, await _body(request))
    if req.opts.stream:
        return await _stream_chat(request, chat_chunks(engine, req))
    return _json(await chat_body(engine, req))


async def _sse(resp: web.StreamResponse, data: Any) -> None:
    await resp.write(b"data: " + (data if isinstance(data, bytes) else orjson.dumps(data)) + b"\n\n")


async def _stream_chat(
    request: web.Request, chunks: AsyncGenerator[dict[str, Any], None]
) -> web.StreamResponse:
    async with aclosing(chunks):
        first = await anext(chunks)  # a refusal (over the memory budget) raises here: still a plain 400
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        await _sse(resp, first)
        async for chunk in chunks:
            await _sse(resp, chunk)
    await _sse(resp, b"[DONE]")
    await resp.write_eof()
    return resp


# -- completions -----------------------------------------------------------------------------------
def _legacy_logprobs(engine: LocalEngine, gen: Generation) -> dict[str, Any]:
    entries = [
        logprob_entry(engine.chat, t, v, top)
        for t, v, top in zip(gen.token_ids, gen.logprobs, gen.top_logprobs, strict=True)
    ]
    offsets, pos = [], 0
    for e in entries:
        offsets.append(pos)
        pos += len(e["token"])
    return {
        "tokens": [e["token"] for e in entries],
        "token_logprobs": [e["logprob"] for e in entries],
        "top_logprobs": [{a["token"]: a["logprob"] for a in e["top_logprobs"]} for e in entries],
        "text_offset": offsets,
    }


async def completions(request: web.Request) -> web.Response:
    engine, body = _engine(request), await _body(request)
    if body.get("stream"):
        raise ApiError("streaming is not supported on /v1/completions by the local engine")
    prompts = completion_prompts(body.get("prompt"), engine.chat.encode)
    lp = body.get("logprobs")
    params = [
        sampling_params(
            body,
            prompt_len=len(p),
            max_model_len=engine.max_model_len,
            logprobs=None if lp is None else int(lp),
            default_max=16,
        )
        for p in prompts
    ]
    n = int(body.get("n") or 1)
    jobs = [(i, p, sp) for i, (p, sp) in enumerate(zip(prompts, params, strict=True)) for _ in range(n)]
    gens = await asyncio.gather(*(engine.generate(p, sp) for _, p, sp in jobs))
    raise_if_failed(gens)
    want_ids = bool(body.get("return_token_ids"))
    choices = []
    for k, ((_, p, _sp), g) in enumerate(zip(jobs, gens, strict=True)):
        text = visible_text(
            engine.chat, g.token_ids, g.finish_reason, g.stop_reason, engine.loaded.eos_token_ids
        )
        choices.append(
            {
                "index": k,
                "text": text,
                "logprobs": _legacy_logprobs(engine, g) if lp is not None else None,
                "finish_reason": g.finish_reason,
                "stop_reason": g.stop_reason,
                "prompt_logprobs": None,
                "prompt_token_ids": p if want_ids else None,
                "token_ids": g.token_ids if want_ids else None,
            }
        )
    n_prompt = sum(len(p) for _, p, _ in jobs[::n])
    return _json(
        {
            "id": new_id("cmpl"),
            "object": "text_completion",
            "created": int(time.time()),
            "model": body.get("model") or engine.model_name,
            "choices": choices,
            "usage": usage(n_prompt, sum(len(g.token_ids) for g in gens)),
        }
    )


# -- tokenizer, models, health ---------------------------------------------------------------------
async def tokenize(request: web.Request) -> web.Response:
    engine, body = _engine(request), await _body(request)
    if "messages" in body:
        kwargs = dict(body.get("chat_template_kwargs") or {})
        ids = engine.chat.prompt_ids(
            body["messages"],
            body.get("tools") or None,
            add_generation_prompt=body.get("add_generation_prompt", True),
            **kwargs,
        )
        ids, _ = await with_images(engine, body["messages"], ids)
    elif "prompt" in body:
        ids = engine.chat.encode(body["prompt"])
    else:
        raise ApiError("tokenize needs `prompt` or `messages`")
    strs = [engine.chat.tokenizer.id_to_token(i) for i in ids] if body.get("return_token_strs") else None
    return _json(
        {"count": len(ids), "max_model_len": engine.max_model_len, "tokens": ids, "token_strs": strs}
    )


async def detokenize(request: web.Request) -> web.Response:
    engine, body = _engine(request), await _body(request)
    return _json({"prompt": engine.chat.decode(list(body.get("tokens") or []))})


async def models(request: web.Request) -> web.Response:
    engine = _engine(request)
    card = {
        "id": engine.model_name,
        "object": "model",
        "created": int(time.time()),
        "owned_by": "openforgerl",
        "root": str(engine.loaded.path),
        "parent": None,
        "max_model_len": engine.max_model_len,
    }
    if engine.loaded.vision is not None:
        card["openforgerl_processor"] = engine.loaded.vision.identity()
    return _json({"object": "list", "data": [card]})


async def health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def version(request: web.Request) -> web.Response:
    return _json({"version": "openforgerl-local"})


# -- RL / dev routes -------------------------------------------------------------------------------
async def collective_rpc(request: web.Request) -> web.Response:
    engine, body = _engine(request), await _body(request)
    method, kwargs = body.get("method"), dict(body.get("kwargs") or {})
    if method != "reload_weights":
        raise ApiError(f"collective_rpc method {method!r} is not supported by the local engine", 400)
    path = kwargs.get("weights_path") or (body.get("args") or [None])[0]
    if not path:
        raise ApiError("reload_weights needs kwargs.weights_path")
    await engine.reload_weights(path)
    return _json({"results": [None]})


async def pause(request: web.Request) -> web.Response:
    await _engine(request).pause(request.query.get("mode", "abort"))
    return _json({"status": "paused"})


async def resume(request: web.Request) -> web.Response:
    _engine(request).resume()
    return _json({"status": "resumed"})


async def is_paused(request: web.Request) -> web.Response:
    return _json({"is_paused": _engine(request).core.paused})


async def update_weight_version(request: web.Request) -> web.Response:
    engine, body = _engine(request), await _body(request)
    engine.weight_version = body.get("new_version")
    return _json({"status": "ok", "weight_version": engine.weight_version})


async def weight_info(request: web.Request) -> web.Response:
    return _json({"weight_version": _engine(request).weight_version})


async def reset_prefix_cache(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def metrics(request: web.Request) -> web.Response:
    engine = _engine(request)
    core = engine.core
    text = (
        f"openforgerl_engine_running {core.num_running}\nopenforgerl_engine_waiting {core.num_waiting}\n"
        f"openforgerl_engine_decode_steps_total {core.steps}\n"
        f"openforgerl_engine_decode_tokens_total {core.batched_tokens}\n"
        f"openforgerl_engine_generated_tokens_total {core.generated_tokens}\n"
        f"openforgerl_engine_peak_running {core.peak_running}\n"
        f"openforgerl_engine_memory_waits_total {core.memory_waits}\n"
        f"openforgerl_engine_aborted_total {core.aborted}\n"
        f"openforgerl_engine_memory_budget_bytes {engine.budget.limit}\n"
    )
    return web.Response(text=text, content_type="text/plain")


def create_app(engine: LocalEngine) -> web.Application:
    app = web.Application(middlewares=[errors], client_max_size=64 * 1024 * 1024)
    app[ENGINE_KEY] = engine
    r = app.router
    r.add_post("/v1/chat/completions", chat_completions)
    r.add_post("/v1/completions", completions)
    r.add_post("/tokenize", tokenize)
    r.add_post("/detokenize", detokenize)
    r.add_get("/v1/models", models)
    r.add_get("/health", health)
    r.add_get("/version", version)
    r.add_get("/metrics", metrics)
    r.add_post("/collective_rpc", collective_rpc)
    for path, fn in (
        ("/pause", pause),
        ("/resume", resume),
        ("/reset_prefix_cache", reset_prefix_cache),
        ("/reset_mm_cache", reset_prefix_cache),
        ("/reset_encoder_cache", reset_prefix_cache),
        ("/update_weight_version", update_weight_version),
    ):
        r.add_post(path, fn)
    r.add_get("/is_paused", is_paused)
    r.add_get("/weight_info", weight_info)
    return app


async def serve(engine: LocalEngine, host: str = "127.0.0.1", port: int = 8000) -> web.AppRunner:
    """Start the app on host:port and return the runner (call `runner.cleanup()` to stop).

    `handler_cancellation`: when a client disconnects, aiohttp cancels its handler, which closes the token
    stream and drops the sequence from the batch (without it, a gateway that gave up on a request left the
    engine generating up to max_tokens for no one)."""
    runner = web.AppRunner(create_app(engine), access_log=None, handler_cancellation=True)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
