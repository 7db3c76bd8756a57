"""The local engine's chat-completions face, shared by its HTTP server and its in-process `Engine`
methods: a request body in, vLLM-exact chat.completion bodies and chunk dicts out (`responses.py`,
`parsing.py`), so what the gateway gets from `LocalEngine.stream(call)` is what it would read off
`openforgerl engine`'s wire, with no second copy of the output code.

`TokenModel` is all this needs from a model: its chat format, its limits, and a token stream. The
in-process calls set the same exact-token knobs the gateway's HTTP client sets for vLLM
(`return_token_ids`, `include_reasoning`, `logprobs`), and raise refusals as `EngineError`s with the
status the server would have answered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from openforgerl.engines.base import EngineCall, EngineChunk, EngineError, EngineResult, PromptIds
from openforgerl.engines.chat_format import ChatFormat
from openforgerl.engines.local.generation import Generation
from openforgerl.engines.local.requests import (
    ApiError,
    ChatOptions,
    chat_logprobs,
    chat_options,
    sampling_params,
)
from openforgerl.engines.local.responses import (
    ChatStreamState,
    chat_completion,
    logprob_entry,
    new_id,
    usage,
    visible_text,
)
from openforgerl.engines.local.sampling import SamplingParams
from openforgerl.engines.local.vlm import ImageError, ProcessedImages, message_images
from openforgerl.records import CallErrorKind

if TYPE_CHECKING:
    from openforgerl.engines.local.core import StepEvent
    from openforgerl.engines.local.vlm import VisionProcessor


class TokenModel(Protocol):
    """A model as the chat face sees it: a chat format, limits, and sampled tokens one at a time."""

    @property
    def chat(self) -> ChatFormat: ...

    @property
    def eos_token_ids(self) -> tuple[int, ...]: ...

    @property
    def max_model_len(self) -> int: ...

    @property
    def model_name(self) -> str: ...

    @property
    def vision(self) -> VisionProcessor | None: ...

    def render_prompt(self, body: dict[str, Any], tools: list[dict[str, Any]] | None) -> list[int]:
        """The chat body's prompt ids under the model's template (before any image pads expand)."""
        ...

    def stream_tokens(
        self, prompt_ids: list[int], params: SamplingParams, images: ProcessedImages | None = None
    ) -> AsyncGenerator[StepEvent, None]: ...

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, images: ProcessedImages | None = None
    ) -> Generation: ...


@dataclass(frozen=True)
class ChatRequest:
    """One chat request, read: its options, rendered prompt (pads expanded), images and sampling."""

    opts: ChatOptions
    prompt: list[int]
    images: ProcessedImages | None
    params: SamplingParams
    model: str


def render_prompt(chat: ChatFormat, body: dict[str, Any], tools: list[dict[str, Any]] | None) -> list[int]:
    kwargs = dict(body.get("chat_template_kwargs") or {})
    add_gen = body.get("add_generation_prompt", True)
    return chat.prompt_ids(body["messages"], tools, add_generation_prompt=add_gen, **kwargs)


async def with_images(
    model: TokenModel, messages: list[dict[str, Any]], prompt: list[int]
) -> tuple[list[int], ProcessedImages | None]:
    """A vision model's prompt with each image's pad run expanded, and the processed images."""
    vision = model.vision
    if vision is None:
        return prompt, None
    images = await asyncio.to_thread(vision.process_urls, message_images(messages))
    return vision.expand(prompt, images), images


async def prepare(model: TokenModel, body: dict[str, Any]) -> ChatRequest:
    """Read a chat body (raises `ApiError`/`ImageError` for what vLLM would refuse with a 400)."""
    opts = chat_options(body, reasoning_parser=model.chat.reasoning_parser)
    if opts.stream and opts.n != 1:
        raise ApiError("streaming supports n=1 only")
    prompt, images = await with_images(model, body["messages"], model.render_prompt(body, opts.tools))
    params = sampling_params(
        body,
        prompt_len=len(prompt),
        max_model_len=model.max_model_len,
        logprobs=chat_logprobs(body),
        default_max=None,
    )
    return ChatRequest(opts, prompt, images, params, body.get("model") or model.model_name)


def raise_if_failed(gens: list[Generation]) -> None:
    for g in gens:
        if g.finish_reason.startswith("error:"):
            raise ApiError(g.finish_reason[len("error:") :], 500, "InternalServerError")


async def chat_body(model: TokenModel, req: ChatRequest) -> dict[str, Any]:
    """The non-streamed chat.completion (every one of the `n` choices sampled concurrently)."""
    gens = await asyncio.gather(
        *(model.generate(req.prompt, req.params, req.images) for _ in range(req.opts.n))
    )
    raise_if_failed(gens)
    data = chat_completion(model.chat, req.model, req.prompt, gens, req.opts, model.eos_token_ids)
    if req.images is not None:
        data["openforgerl_images"] = req.images.summary()
    return data


async def chat_chunks(model: TokenModel, req: ChatRequest) -> AsyncGenerator[dict[str, Any], None]:
    """The chat.completion.chunk dicts of a stream, in order: role (with prompt ids), one per token
    that shows something, usage when asked for; a generation error ends it with an error body.
    A request the model refuses outright (`ApiError`: over its memory budget) raises before the first
    chunk, so the server can still answer it with a 400."""
    events = model.stream_tokens(req.prompt, req.params, req.images)
    opts = req.opts
    head = {
        "id": new_id("chatcmpl"),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": req.model,
    }
    first: dict[str, Any] = {
        **head,
        "choices": [
            {
                "index": 0,
                "delta": {"role": "assistant", "content": ""},
                "logprobs": None,
                "finish_reason": None,
            }
        ],
    }
    if opts.return_token_ids:
        first["prompt_token_ids"] = req.prompt
    if req.images is not None:
        first["openforgerl_images"] = req.images.summary()
    yield first
    state = ChatStreamState(0)
    async with aclosing(events):
        async for ev in events:
            if ev.finish_reason and ev.finish_reason.startswith("error:"):
                yield ApiError(ev.finish_reason[6:], 500, "InternalServerError").body()
                return
            choice = _chat_choice(model, state, ev, opts)
            if choice is not None:
                yield {**head, "choices": [choice]}
    if opts.include_usage:
        yield {**head, "choices": [], "usage": usage(len(req.prompt), len(state.ids))}


def _chat_choice(
    model: TokenModel, state: ChatStreamState, ev: StepEvent, opts: ChatOptions
) -> dict[str, Any] | None:
    if ev.sample is not None:
        state.ids.append(ev.sample.token_id)
    text = visible_text(model.chat, state.ids, ev.finish_reason, ev.stop_reason, model.eos_token_ids)
    finish = ev.finish_reason
    if finish:
        delta, called = state.final_delta(text, opts)
        finish = "tool_calls" if called else finish
    else:
        delta = state.delta(text, opts)
    show_ids = opts.include_reasoning and ev.sample is not None
    if not delta and not finish and not (show_ids and (opts.return_token_ids or opts.logprobs)):
        return None
    choice: dict[str, Any] = {"index": state.index, "delta": delta, "logprobs": None, "finish_reason": finish}
    if show_ids and opts.logprobs and ev.sample is not None:
        s = ev.sample
        choice["logprobs"] = {"content": [logprob_entry(model.chat, s.token_id, s.logprob, s.top)]}
    if opts.return_token_ids:
        choice["token_ids"] = (
            [ev.sample.token_id] if show_ids and ev.sample else ([] if opts.include_reasoning else None)
        )
    if finish:
        choice["stop_reason"] = ev.stop_reason
    return choice


# -- the Engine protocol, in process --------------------------------------------------------------
def exact_tokens(body: dict[str, Any], stream: bool) -> dict[str, Any]:
    """The body with the knobs that make the answer carry what was consumed and sampled (as the
    gateway's HTTP client sets them for vLLM)."""
    out = {**body, "stream": stream, "return_token_ids": True, "include_reasoning": True}
    if not out.get("logprobs"):
        out["logprobs"], out["top_logprobs"] = True, 0
    return out


def refused(exc: Exception) -> EngineError:
    """What the HTTP server would have answered, as the gateway's client would have raised it."""
    status = exc.status if isinstance(exc, ApiError) else 400
    text = str(exc) if isinstance(exc, ApiError | ImageError) else f"{type(exc).__name__}: {exc}"
    return EngineError(CallErrorKind.ENGINE_HTTP, f"engine answered {status}: {text}", status=status)


async def complete(model: TokenModel, call: EngineCall, engine_id: str) -> EngineResult:
    """`Engine.complete` for a token model: the chat.completion the server would have sent."""
    try:
        req = await prepare(model, exact_tokens(call.body, stream=False))
        body = await chat_body(model, req)
    except (ApiError, ImageError, KeyError, ValueError, TypeError) as exc:
        raise refused(exc) from exc
    choice = body["choices"][0]
    lps = [e["logprob"] for e in (choice["logprobs"] or {}).get("content") or []]
    return EngineResult(
        body, PromptIds(ids=req.prompt), choice["token_ids"] or [], lps, choice["finish_reason"], engine_id
    )


async def stream(model: TokenModel, call: EngineCall, engine_id: str) -> AsyncGenerator[EngineChunk, None]:
    """`Engine.stream` for a token model: one EngineChunk per chunk dict the server would have sent."""
    from openforgerl.engines.openai_compat import chunk_of_bodies

    try:
        req = await prepare(model, exact_tokens(call.body, stream=True))
        chunks = chat_chunks(model, req)
        first = await anext(chunks)
    except (ApiError, ImageError, KeyError, ValueError, TypeError) as exc:
        raise refused(exc) from exc
    yield chunk_of_bodies([first], None, engine_id)
    async with aclosing(chunks):
        async for body in chunks:
            if "error" in body:
                raise EngineError(
                    CallErrorKind.ENGINE_HTTP, f"engine answered 500: {body['error']['message']}", status=500
                )
            yield chunk_of_bodies([body], None, engine_id)
