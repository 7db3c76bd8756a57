"""A scripted engine: a test double for the model's *decisions* only.

`ScriptedEngine(policy)` asks `policy(turn)` for the raw text the model "samples" (e.g.
`format_tool_call(...)` or plain text). Everything else is real: the prompt is rendered with the
tiny model's chat template and tokenized with its real tokenizer, the completion ids are the real
tokenization of the text plus `<|im_end|>`, and the output is parsed with vLLM's hermes/qwen3
semantics (`parse_output`). Bodies and chunks have vLLM's wire shape (`prompt_token_ids`,
per-choice `token_ids`, OpenAI logprobs), so the gateway cannot tell it from vLLM.
Logprobs are a deterministic function of (token id, position) so tests can check them exactly.

`scripted_app(engine)` serves it over HTTP at `/v1/chat/completions` (vLLM wire shape), usable as
a fast fake engine in benchmarks; `python -m openforgerl.engines.scripted --port P` runs one.
`Faults` injects 5xx answers, stalled streams and hangs before headers for fault tests.
"""

from __future__ import annotations

import asyncio
import codecs
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson

from openforgerl.engines.base import EngineCall, EngineChunk, EngineError, EngineResult, PromptIds
from openforgerl.engines.chat_format import ChatFormat, ParsedOutput, parse_output
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


@lru_cache(maxsize=1)
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


@dataclass(frozen=True)
class Completion:
    """One sampled completion with everything needed to render it whole or streamed."""

    prompt_ids: list[int]
    ids: list[int]
    logprobs: list[float]
    pieces: list[str]  # decoded text added by each token (incremental UTF-8)
    token_bytes: list[bytes]
    parsed: ParsedOutput
    finish_reason: str


class _Tokens:
    """Token-level helpers over a ChatFormat (bytes per id, cached rendering)."""

    def __init__(self, fmt: ChatFormat) -> None:
        self.fmt = fmt
        self._added_ids = {tid: tok.content for tid, tok in fmt.tokenizer.get_added_tokens_decoder().items()}
        self.prompt_ids = lru_cache(maxsize=256)(self._prompt_ids)
        self.sample = lru_cache(maxsize=256)(self._sample)

    def _prompt_ids(self, key: bytes) -> list[int]:
        messages, tools, kwargs = orjson.loads(key)
        return self.fmt.prompt_ids(messages, tools or None, **kwargs)

    def token_bytes(self, tid: int) -> bytes:
        if tid in self._added_ids:
            return self._added_ids[tid].encode()
        dec = _byte_decoder()
        return bytes(dec[c] for c in self.fmt.tokenizer.id_to_token(tid))

    def _sample(self, text: str, max_tokens: int | None) -> tuple[list[int], str]:
        ids = [*self.fmt.encode(text), self.fmt.eos_token_id]
        if max_tokens is not None and len(ids) > max_tokens:
            return ids[:max_tokens], "length"
        return ids, "stop"


def _pieces(tokens: _Tokens, ids: list[int]) -> tuple[list[str], list[bytes]]:
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    raw = [tokens.token_bytes(t) for t in ids]
    pieces = [dec.decode(b) for b in raw]
    if pieces:
        pieces[-1] += dec.decode(b"", final=True)
    return pieces, raw


class ScriptedEngine:
    """An in-process engine whose sampled text comes from `policy` (see module docstring)."""

    def __init__(self, policy: Policy, *, fmt: ChatFormat | None = None, model: str = MODEL_NAME,
                 engine_id: str = "scripted", faults: Faults | None = None, keep_produced: bool = True) -> None:
        self.policy = policy
        self.tokens = _Tokens(fmt or ChatFormat.load())
        self.model = model
        self.engine_id = engine_id
        self.faults = faults or Faults()
        self.calls: dict[str, int] = {}
        self.produced: list[Completion] = []  # every completion, in order (tests compare records)
        self.keep_produced = keep_produced

    # -- building ------------------------------------------------------------------------------
    def sample(self, call: EngineCall) -> Completion:
        """Render the prompt, ask the policy, tokenize and parse: one completion."""
        body = call.body
        messages, tools = body.get("messages") or [], body.get("tools") or []
        kwargs = body.get("chat_template_kwargs") or {}
        prompt_ids = self.tokens.prompt_ids(orjson.dumps([messages, tools, kwargs]))
        index = self.calls.get(call.route_key, 0)
        self.calls[call.route_key] = index + 1
        text = self.policy(Turn(_as_parsed(messages), tools, index, call.route_key, body))
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        ids, finish = self.tokens.sample(text, max_tokens)
        pieces, raw = _pieces(self.tokens, ids)
        parsed = parse_output("".join(pieces).replace("<|im_end|>", ""), tools_available=bool(tools))
        if parsed.tool_calls and finish == "stop":
            finish = "tool_calls"
        lps = [scripted_logprob(t, i) for i, t in enumerate(ids)]
        done = Completion(list(prompt_ids), ids, lps, pieces, raw, parsed, finish)
        if self.keep_produced:
            self.produced.append(done)
        return done

    # -- Engine protocol -----------------------------------------------------------------------
    async def complete(self, call: EngineCall) -> EngineResult:
        await self._before_headers()
        done = self.sample(call)
        body = completion_body(done, self.model)
        return EngineResult(body, PromptIds(ids=done.prompt_ids), done.ids, done.logprobs, done.finish_reason,
                            self.engine_id)

    async def stream(self, call: EngineCall) -> AsyncIterator[EngineChunk]:
        await self._before_headers()
        done = self.sample(call)
        stall = self.faults.take("stall_streams")
        for n, (body, ids, lps) in enumerate(stream_bodies(done, self.model, _include_usage(call.body))):
            if stall and n >= self.faults.stall_after:
                await asyncio.Event().wait()
            if ids and self.faults.token_delay_s:
                await asyncio.sleep(self.faults.token_delay_s)
            finish = _chunk_finish(body)
            prompt = PromptIds(ids=body["prompt_token_ids"]) if "prompt_token_ids" in body else None
            yield EngineChunk(body, ids, lps, prompt, finish, self.engine_id,
                              final=finish is not None or not body.get("choices"))

    async def _before_headers(self) -> None:
        if self.faults.take("hang_before_headers"):
            await asyncio.Event().wait()
        if self.faults.take("http_errors"):
            status = self.faults.http_status
            raise EngineError(CallErrorKind.ENGINE_HTTP, f"scripted fault {status}", status=status)

    async def models(self) -> list[str]:
        return [self.model]

    async def count_tokens(self, body: dict[str, Any]) -> int:
        """Prompt length of a chat body under the real template and tokenizer."""
        key = orjson.dumps([body.get("messages") or [], body.get("tools") or [],
                            body.get("chat_template_kwargs") or {}])
        return len(self.tokens.prompt_ids(key))

    async def detokenize(self, ids: list[int], route_key: str) -> str | None:
        """As vLLM's `/detokenize`: the sampled text, special tokens kept."""
        return self.tokens.fmt.decode(ids)

    async def aclose(self) -> None:
        return None


def _include_usage(body: dict[str, Any]) -> bool:
    opts = body.get("stream_options") or {}
    return bool(opts.get("include_usage"))


def _chunk_finish(body: dict[str, Any]) -> str | None:
    choices = body.get("choices") or []
    return choices[0].get("finish_reason") if choices else None


# -- vLLM wire shapes --------------------------------------------------------------------------
def _as_parsed(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History as a policy reads it: an assistant turn the gateway sent back as the model's raw text
    (gateway/verbatim.py) is parsed into content and tool calls again, as a model reading its own
    `<tool_call>` tokens would; without this, policies that look for their earlier calls repeat them."""
    out = []
    for m in messages:
        text = m.get("content")
        if m.get("role") == "assistant" and not m.get("tool_calls") and isinstance(text, str) and (
                "<tool_call>" in text or "</think>" in text):
            parsed = parse_output(text)
            m = {"role": "assistant", "content": parsed.content, "reasoning_content": parsed.reasoning,
                 "tool_calls": _tool_call_dicts(parsed) or None}
        out.append(m)
    return out


def _tool_call_dicts(parsed: ParsedOutput) -> list[dict[str, Any]]:
    return [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in parsed.tool_calls]


def _logprob_entries(done: Completion, start: int, stop: int) -> list[dict[str, Any]]:
    return [{"token": done.pieces[i], "logprob": done.logprobs[i], "bytes": list(done.token_bytes[i]),
             "top_logprobs": []} for i in range(start, stop)]


def _usage(done: Completion) -> dict[str, int]:
    p, c = len(done.prompt_ids), len(done.ids)
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def completion_body(done: Completion, model: str) -> dict[str, Any]:
    """A vLLM-shaped chat.completion (with `return_token_ids` and `logprobs` on)."""
    message: dict[str, Any] = {"role": "assistant", "content": done.parsed.content,
                               "reasoning": done.parsed.reasoning}
    message["tool_calls"] = _tool_call_dicts(done.parsed)
    choice = {"index": 0, "message": message, "logprobs": {"content": _logprob_entries(done, 0, len(done.ids))},
              "finish_reason": done.finish_reason, "stop_reason": None, "token_ids": done.ids}
    return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [choice], "usage": _usage(done),
            "prompt_token_ids": done.prompt_ids}


@dataclass
class _Spans:
    """Where reasoning, content and each tool call's end sit in the completion text."""

    reasoning: tuple[int, int] = (0, 0)
    content: tuple[int, int] = (0, 0)
    tool_ends: list[int] = field(default_factory=list)


def _spans(text: str, parsed: ParsedOutput) -> _Spans:
    spans = _Spans()
    after_think = 0
    if parsed.reasoning:
        start = text.find(parsed.reasoning, text.find("<think>") + 1 if "<think>" in text else 0)
        spans.reasoning = (start, start + len(parsed.reasoning))
        after_think = spans.reasoning[1]
    if parsed.content:
        start = text.find(parsed.content, after_think)
        spans.content = (start, start + len(parsed.content))
    if parsed.tool_calls:
        pos, first = 0, text.find("<tool_call>", after_think)
        for _ in parsed.tool_calls:
            pos = text.find("</tool_call>", max(pos, first)) + len("</tool_call>")
            spans.tool_ends.append(pos)
    return spans


def _cut(span: tuple[int, int], lo: int, hi: int, text: str) -> str:
    a, b = max(span[0], lo), min(span[1], hi)
    return text[a:b] if a < b else ""


def _token_delta(done: Completion, spans: _Spans, text: str, lo: int, hi: int) -> dict[str, Any]:
    delta: dict[str, Any] = {}
    if r := _cut(spans.reasoning, lo, hi, text):
        delta["reasoning"] = r
    if c := _cut(spans.content, lo, hi, text):
        delta["content"] = c
    calls = [
        {"index": i, "id": tc.id, "type": "function",
         "function": {"name": tc.name, "arguments": tc.arguments}}
        for i, (tc, end) in enumerate(zip(done.parsed.tool_calls, spans.tool_ends, strict=True))
        if lo < end <= hi
    ]
    if calls:
        delta["tool_calls"] = calls
    return delta


def stream_bodies(done: Completion, model: str, include_usage: bool
                  ) -> Iterator[tuple[dict[str, Any], list[int], list[float]]]:
    """vLLM-shaped chat.completion.chunk dicts: role chunk (with prompt ids), one per token, usage."""
    head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    first = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
    yield {**head, "choices": [first], "prompt_token_ids": done.prompt_ids}, [], []
    text = "".join(done.pieces)
    spans = _spans(text, done.parsed)
    pos, last = 0, len(done.ids) - 1
    for i, tid in enumerate(done.ids):
        end = pos + len(done.pieces[i])
        hi = len(text) if i == last else end
        choice = {"index": 0, "delta": _token_delta(done, spans, text, pos, hi),
                  "logprobs": {"content": _logprob_entries(done, i, i + 1)},
                  "finish_reason": done.finish_reason if i == last else None, "token_ids": [tid]}
        pos = end
        yield {**head, "choices": [choice]}, [tid], [done.logprobs[i]]
    if include_usage:
        yield {**head, "choices": [], "usage": _usage(done)}, [], []


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
        await asyncio.Event().wait()
    if engine.faults.take("http_errors"):
        err = {"error": {"message": "scripted fault", "type": "server_error", "code": engine.faults.http_status}}
        return web.json_response(err, status=engine.faults.http_status)
    done = engine.sample(call)
    if not body.get("stream"):
        return web.Response(body=orjson.dumps(completion_body(done, engine.model)),
                            content_type="application/json")
    return await _stream_http(request, engine, done, _include_usage(body))


async def _stream_http(request: Any, engine: ScriptedEngine, done: Completion, usage: bool) -> Any:
    from aiohttp import web

    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    stall = engine.faults.take("stall_streams")
    delay = engine.faults.token_delay_s
    for n, (body, ids, _) in enumerate(stream_bodies(done, engine.model, usage)):
        if stall and n >= engine.faults.stall_after:
            await asyncio.Event().wait()
        if ids and delay:
            await asyncio.sleep(delay)
        await resp.write(_sse(body))
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


async def _handle_models(request: Any) -> Any:
    from aiohttp import web

    engine: ScriptedEngine = request.app[ENGINE_KEY]
    return web.json_response({"object": "list", "data": [{"id": engine.model, "object": "model",
                                                          "owned_by": "openforgerl"}]})


def scripted_app(engine: ScriptedEngine) -> Any:
    """An aiohttp app serving `engine` at `/v1/chat/completions` and `/v1/models` like vLLM."""
    from aiohttp import web

    app = web.Application(client_max_size=256 * 1024 * 1024)
    app[ENGINE_KEY] = engine
    app.router.add_post("/v1/chat/completions", _handle_chat)
    app.router.add_get("/v1/models", _handle_models)
    app.router.add_get("/health", lambda _r: _ok())
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


async def start_scripted_server(engine: ScriptedEngine, *, host: str = "127.0.0.1",
                                port: int = 0) -> RunningScripted:
    """Serve `engine` over HTTP in this event loop (for tests and benchmarks)."""
    from aiohttp import web

    runner = web.AppRunner(scripted_app(engine), access_log=None, keepalive_timeout=600,
                           handler_cancellation=True, shutdown_timeout=1.0)
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
    engine = ScriptedEngine(repeat_policy(args.text), faults=Faults(token_delay_s=args.token_delay_ms / 1000),
                            keep_produced=False)
    web.run_app(scripted_app(engine), host=args.host, port=args.port, access_log=None,
                keepalive_timeout=600, handler_cancellation=True, print=None)


if __name__ == "__main__":
    main()
