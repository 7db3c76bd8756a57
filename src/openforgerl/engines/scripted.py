"""A scripted engine: a test double for the model's *decisions* only.

`ScriptedEngine(policy)` asks `policy(turn)` for the raw text the model "samples" (e.g.
`format_tool_call(...)` or plain text; policies for tests live in `openforgerl.testing`). Everything
else is the local engine's: the prompt is rendered with the tiny model's chat template and real
tokenizer, the completion ids are the tokenization of the text plus `<|im_end|>`, and the bodies and
chunks come from the local engine's chat face (`local/chat.py`, `responses.py`, `parsing.py`: one
output parser, vLLM-exact), fed those ids by `_Replay`. The contract suite checks its wire output
with the same assertions as the local engine's and vLLM's. One scripted choice: a policy that
writes a `<think>` block is parsed in thinking mode, any other text in non-thinking mode (content),
unless the request sets `enable_thinking`. Logprobs are a deterministic function of (token id,
position) so tests can check them exactly.

`scripted_app(engine)` serves it over HTTP (`/v1/chat/completions`, `/v1/models`, `/tokenize`,
`/detokenize`), usable as a fast fake engine in benchmarks; `python -m openforgerl.engines.scripted
--port P` runs one. `Faults` injects 5xx answers, stalled streams and hangs before headers.
"""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import orjson

from openforgerl.engines.base import EngineCall, EngineChunk, EngineError, EngineResult
from openforgerl.engines.chat_format import ChatFormat, ParsedOutput
from openforgerl.engines.local import chat as chat_face
from openforgerl.engines.local.core import StepEvent
from openforgerl.engines.local.generation import Generation
from openforgerl.engines.local.parsing import parse_vllm
from openforgerl.engines.local.requests import ApiError, chat_options
from openforgerl.engines.local.sampling import SamplingParams, TokenSample
from openforgerl.records import CallErrorKind

MODEL_NAME = "scripted-tiny"


@dataclass(frozen=True)
class Turn:
    """What a policy sees: the request as the engine got it, and where it is in the rollout."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    call_index: int
    rollout_id: str
    request: dict[str, Any]
    task_id: str | None = (
        None  # the task the rollout plays, as the gateway recorded it (None over plain HTTP)
    )


Policy = Callable[[Turn], str]


@dataclass
class Faults:
    """Mutable fault plan; counters decrement as faults fire."""

    http_errors: int = 0  # answer the next N calls with `http_status`
    http_status: int = 500
    hang_before_headers: int = 0  # the next N calls never answer
    stall_streams: int = 0  # the next N streams stop after `stall_after` chunks and hang
    stall_after: int = 2
    token_delay_s: float = 0.0  # pacing between streamed tokens (a "real" engine)

    def take(self, name: str) -> bool:
        left = getattr(self, name)
        if left > 0:
            setattr(self, name, left - 1)
            return True
        return False


def scripted_logprob(token_id: int, position: int) -> float:
    """Deterministic fake logprob in (-10, 0): tests recompute it to check recorded values."""
    return -(((token_id * 7919 + position * 104729) % 9973) + 1) / 1000.0


@dataclass(frozen=True)
class Completion:
    """One sampled completion: what the policy wrote, as the model's tokens and the parse of them."""

    prompt_ids: list[int]
    ids: list[int]
    logprobs: list[float]
    pieces: list[str]  # decoded text added by each token (incremental UTF-8)
    parsed: ParsedOutput
    finish_reason: str
    thinking: bool  # parsed in thinking mode (the policy wrote a `<think>` block, or the request asked)


def _pieces(fmt: ChatFormat, ids: list[int]) -> list[str]:
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pieces = [dec.decode(_token_bytes(fmt, t)) for t in ids]
    if pieces:
        pieces[-1] += dec.decode(b"", final=True)
    return pieces


def _token_bytes(fmt: ChatFormat, tid: int) -> bytes:
    token = fmt.tokenizer.id_to_token(tid) or ""
    if tid in _added_ids(fmt):  # special tokens are their text; the rest ByteLevel characters
        return token.encode()
    return bytes(_BYTE_DECODER[c] for c in token)


@lru_cache(maxsize=8)
def _added_ids(fmt: ChatFormat) -> frozenset[int]:
    return frozenset(fmt.tokenizer.get_added_tokens_decoder())


def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's bytes_to_unicode (the ByteLevel alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


_BYTE_DECODER = _byte_decoder()


class _Replay:
    """A token model (`local.chat.TokenModel`) that "samples" one completion's ids: the local engine's
    chat face renders it, so bodies and chunks are the local engine's, byte for byte in shape."""

    vision = None
    max_model_len = 1 << 20  # a scripted model refuses no prompt for its length

    def __init__(self, engine: ScriptedEngine, done: Completion) -> None:
        self.chat, self.model_name, self.done = engine.fmt, engine.model, done
        self.eos_token_ids = (engine.fmt.eos_token_id,)
        self.token_delay_s = engine.faults.token_delay_s

    def render_prompt(self, body: dict[str, Any], tools: list[dict[str, Any]] | None) -> list[int]:
        return self.done.prompt_ids

    async def stream_tokens(
        self, prompt_ids: list[int], params: SamplingParams, images: Any = None
    ) -> AsyncGenerator[StepEvent, None]:
        done, last = self.done, len(self.done.ids) - 1
        for i, (tid, lp) in enumerate(zip(done.ids, done.logprobs, strict=True)):
            if self.token_delay_s:
                await asyncio.sleep(self.token_delay_s)
            finish = ("length" if done.finish_reason == "length" else "stop") if i == last else None
            yield StepEvent(TokenSample(tid, lp, _top(tid, lp, params.logprobs)), finish)

    async def generate(self, prompt_ids: list[int], params: SamplingParams, images: Any = None) -> Generation:
        done = self.done
        if self.token_delay_s:  # a paced engine takes as long for a whole answer as for its stream
            await asyncio.sleep(self.token_delay_s * len(done.ids))
        finish = "length" if done.finish_reason == "length" else "stop"
        tops = [_top(t, lp, params.logprobs) for t, lp in zip(done.ids, done.logprobs, strict=True)]
        return Generation(list(done.ids), list(done.logprobs), tops, finish, None)


def _top(tid: int, logprob: float, k: int | None) -> tuple[tuple[int, float], ...]:
    """`k` alternatives for a scripted token: itself first (a scripted model samples greedily), then
    the next ids, each a nat less likely."""
    return tuple((tid + j, logprob - j) for j in range(k or 0))


class ScriptedEngine:
    """An in-process engine whose sampled text comes from `policy` (see module docstring)."""

    def __init__(
        self,
        policy: Policy,
        *,
        fmt: ChatFormat | None = None,
        model: str = MODEL_NAME,
        engine_id: str = "scripted",
        faults: Faults | None = None,
        keep_produced: bool = True,
        thinking: bool = False,
    ) -> None:
        self.policy = policy
        self.fmt = fmt or ChatFormat.load()
        self.thinking = thinking
        self.model = model
        self.engine_id = engine_id
        self.faults = faults or Faults()
        self.hanging = 0  # calls held by a hang or stall fault right now: the engine is then unhealthy
        self.calls: dict[str, int] = {}
        self.produced: list[Completion] = []  # every completion, in order (tests compare records)
        self.keep_produced = keep_produced
        self._prompt_ids = lru_cache(maxsize=256)(self._render)
        self._encode = lru_cache(maxsize=256)(self.fmt.encode)

    def _render(self, key: bytes) -> list[int]:
        messages, tools, kwargs = orjson.loads(key)
        return self.fmt.prompt_ids(messages, tools or None, **kwargs)

    def prompt_ids(self, body: dict[str, Any]) -> list[int]:
        """The prompt under the real template and tokenizer (cached: benchmarks send the same one)."""
        return self._prompt_ids(
            orjson.dumps(
                [body.get("messages") or [], body.get("tools") or [], body.get("chat_template_kwargs") or {}]
            )
        )

    # -- building ------------------------------------------------------------------------------
    def sample(self, call: EngineCall) -> Completion:
        """Render the prompt, ask the policy, tokenize and parse (`local.parsing`): one completion."""
        body = call.body
        index = self.calls.get(call.route_key, 0)
        self.calls[call.route_key] = index + 1
        turn = Turn(
            _as_parsed(body.get("messages") or []),
            body.get("tools") or [],
            index,
            call.route_key,
            body,
            call.task_id,
        )
        sampled = self.policy(turn)
        thinking = self.thinking or "</think>" in sampled
        opts = chat_options(_served(body, thinking), reasoning_parser=self.fmt.reasoning_parser)
        ids = [*self._encode(sampled), self.fmt.eos_token_id]
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        finish = "stop"
        if max_tokens is not None and len(ids) > max_tokens:
            ids, finish = ids[:max_tokens], "length"
        pieces = _pieces(self.fmt, ids)
        text = "".join(pieces[:-1] if finish == "stop" else pieces)
        parsed = parse_vllm(
            text, parse_tools=opts.parse_tools, thinking=opts.thinking, reasoning=opts.reasoning
        )
        if parsed.tool_calls and finish == "stop":
            finish = "tool_calls"
        lps = [scripted_logprob(t, i) for i, t in enumerate(ids)]
        done = Completion(list(self.prompt_ids(body)), ids, lps, pieces, parsed, finish, opts.thinking)
        if self.keep_produced:
            self.produced.append(done)
        return done

    # -- Engine protocol -----------------------------------------------------------------------
    async def complete(self, call: EngineCall) -> EngineResult:
        await self._before_headers()
        done = self._sampled(call)
        return await chat_face.complete(_Replay(self, done), _served_call(call, done), self.engine_id)

    async def stream(self, call: EngineCall) -> AsyncIterator[EngineChunk]:
        await self._before_headers()
        stall = self.faults.take("stall_streams")
        done = self._sampled(call)
        chunks = chat_face.stream(_Replay(self, done), _served_call(call, done), self.engine_id)
        async with aclosing(chunks):
            n = 0
            async for chunk in chunks:
                if stall and n >= self.faults.stall_after:
                    await self.hang()
                n += 1
                yield chunk

    def _sampled(self, call: EngineCall) -> Completion:
        try:
            return self.sample(call)
        except ApiError as exc:
            raise chat_face.refused(exc) from exc

    async def hang(self) -> None:
        """Hang until cancelled, failing the health probe meanwhile (a wedged engine)."""
        self.hanging += 1
        try:
            await asyncio.Event().wait()
        finally:
            self.hanging -= 1

    async def healthy(self, route_key: str) -> bool:
        """The health probe (`GET /health` over HTTP): fails while a hang or stall fault holds a call."""
        return self.hanging == 0

    async def _before_headers(self) -> None:
        if self.faults.take("hang_before_headers"):
            await self.hang()
        if self.faults.take("http_errors"):
            status = self.faults.http_status
            raise EngineError(CallErrorKind.ENGINE_HTTP, f"scripted fault {status}", status=status)

    async def models(self) -> list[str]:
        return [self.model]

    async def count_tokens(self, body: dict[str, Any]) -> int:
        """Prompt length of a chat body under the real template and tokenizer."""
        return len(self.prompt_ids(body))

    async def detokenize(self, ids: list[int], route_key: str) -> str | None:
        """As vLLM's `/detokenize`: the sampled text, special tokens kept."""
        return self.fmt.decode(ids)

    async def aclose(self) -> None:
        return None


def _served(body: dict[str, Any], thinking: bool) -> dict[str, Any]:
    """The body as the output parser reads it. A scripted model thinks when its policy writes a
    `<think>` block (qwen3 semantics: reasoning up to `</think>`); otherwise it answers in non-thinking
    mode, so plain text is content. A request's own `enable_thinking` wins. The prompt is rendered
    from the body as sent."""
    kwargs = body.get("chat_template_kwargs") or {}
    if "enable_thinking" in kwargs:
        return body
    return {**body, "chat_template_kwargs": {**kwargs, "enable_thinking": thinking}}


def _served_call(call: EngineCall, done: Completion) -> EngineCall:
    return replace(call, body=_served(call.body, done.thinking))


def _as_parsed(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History as a policy reads it: an assistant turn the gateway sent back as the model's raw text
    (gateway/verbatim.py) is parsed into content and tool calls again, as a model reading its own
    `<tool_call>` tokens would; without this, policies that look for their earlier calls repeat them."""
    out = []
    for m in messages:
        text = m.get("content")
        if (
            m.get("role") == "assistant"
            and not m.get("tool_calls")
            and isinstance(text, str)
            and ("<tool_call>" in text or "</think>" in text)
        ):
            parsed = parse_vllm(text, parse_tools=True, thinking=False)
            m = {
                "role": "assistant",
                "content": parsed.content,
                "reasoning_content": parsed.reasoning,
                "tool_calls": [
                    {
                        "id": f"call_{k}",
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for k, c in enumerate(parsed.tool_calls)
                ]
                or None,
            }
        out.append(m)
    return out


# -- HTTP wrapper (vLLM's wire shape) ----------------------------------------------------------
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
    """`python -m openforgerl.engines.scripted --port P [--token-delay-ms D]`: a fast fake vLLM."""
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
