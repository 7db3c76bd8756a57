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

`Faults` injects 5xx answers, stalled streams and hangs before headers. `scripted_server.py` serves
an engine over HTTP (a fast fake vLLM for tests and benchmarks).
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
