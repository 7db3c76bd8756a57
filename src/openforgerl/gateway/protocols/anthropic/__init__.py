"""Anthropic Messages <-> Chat Completions, as Claude Code and OpenClaw speak it.

`AnthropicAdapter` is the gateway's one object for the protocol (`protocols/base.py`); it also
answers `/v1/messages/count_tokens` (`count_body`). Underneath, pure translators, no I/O (plain
dicts in, dicts/bytes out): the request side in `_request.py`, the answer side in `_reply.py`,
re-exported here:

* `validate_request(body)` raises `ProtocolError(status, message)`; `to_chat_request(body)` validates
  and returns the chat-completions body for the engine; `translate_request` adds notes on what was
  dropped; `fold_system=True` folds mid-conversation system messages into user turns for templates
  that reject them. The gateway adds its own engine fields (`return_token_ids`, `logprobs`, ...).
  Assistant history carries the model's reasoning as `reasoning` (vLLM's field name; an SGLang
  engine adapter must rename it to `reasoning_content`).
* `from_chat_completion(chat, request)` -> the non-streamed `message` object.
* `AnthropicStream(request)`: `feed(chunk_dict) -> bytes` per engine `chat.completion.chunk`,
  `finish(usage=None) -> bytes` at the end, `error_event(message, status=..., kind=...) -> bytes`
  on a mid-stream failure (503 -> `overloaded_error`); `start(input_tokens=...)` sends
  `message_start` + `ping` early (Claude Code's stream watchdog only runs after `message_start`);
  `ping()` is a keep-alive.
* `error_body(status, message)`, `count_tokens(body, counter)` (-> `{"input_tokens": n}`).

Translation rules (measured on Claude Code 2.1.197):
* `system` (string or text blocks, joined without separator) -> the first system message. The
  `x-anthropic-billing-header: ...` block is **dropped**: it is billing metadata, not an
  instruction, and its hash changes between sessions, which would put a different token at the
  very start of every prompt. `role:"system"` messages: leading ones join the system prompt, later
  ones stay in place (see `_inline.py`).
* user blocks (text joined without separator, as vLLM does): `tool_result` -> `tool` messages
  (result blocks joined by newlines) (first, in order; `is_error` is carried by the
  text Claude Code already writes), other blocks -> one user message after them; images (base64
  or url) -> `image_url` parts with data URLs. Assistant blocks -> one assistant message:
  `thinking` -> `reasoning`, `tool_use` -> `tool_calls` with `json.dumps(input)` arguments
  (the spacing vLLM's hermes parser produces, so the template re-renders the same text);
  `redacted_thinking` is dropped. `cache_control` is ignored everywhere.
* `tool_choice` auto/any/tool/none -> auto/required/function/none; `disable_parallel_tool_use`
  -> `parallel_tool_calls: false`; server tools without `input_schema` are dropped.
* `thinking: {"type":"disabled"}` -> `chat_template_kwargs.enable_thinking = false`; other
  `thinking`, `metadata`, `context_management`, `output_config.effort` are accepted and ignored;
  `output_config.format` (json_schema) -> `response_format`.
* A trailing assistant message is a prefill: `continue_final_message` (vLLM/SGLang extension).
* Output tool-call ids get the `toolu_` prefix; thinking blocks get a fixed signature.
"""

from __future__ import annotations

from typing import Any

import orjson

from openforgerl.engines.base import EngineResult
from openforgerl.gateway.errors import GatewayError
from openforgerl.gateway.protocols._common import ProtocolError
from openforgerl.gateway.protocols.anthropic._reply import (
    SIGNATURE,
    AnthropicStream,
    error_body,
    from_chat_completion,
    tool_use_id,
)
from openforgerl.gateway.protocols.anthropic._request import (
    BILLING_HEADER,
    ChatTranslation,
    count_tokens,
    to_chat_request,
    translate_request,
    validate_request,
)
from openforgerl.gateway.protocols.base import TranslatedStream, WireAdapter, register
from openforgerl.records import WireProtocol

__all__ = [
    "BILLING_HEADER",
    "SIGNATURE",
    "AnthropicAdapter",
    "AnthropicStream",
    "ChatTranslation",
    "ProtocolError",
    "count_tokens",
    "error_body",
    "from_chat_completion",
    "to_chat_request",
    "tool_use_id",
    "translate_request",
    "validate_request",
]


def _refusal(exc: ProtocolError) -> GatewayError:
    return GatewayError(exc.status, exc.message, param=exc.param)


@register
class AnthropicAdapter(WireAdapter):
    wire = WireProtocol.ANTHROPIC
    path = "/v1/messages"

    def engine_body(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            chat = to_chat_request(request)
        except ProtocolError as exc:
            raise _refusal(exc) from None
        if request.get("stream"):
            chat["stream_options"] = {"include_usage": True}
        return chat

    def count_body(self, request: dict[str, Any]) -> dict[str, Any]:
        """The chat body whose prompt length answers `/v1/messages/count_tokens`."""
        try:
            return translate_request(request, count_only=True).chat
        except ProtocolError as exc:
            raise _refusal(exc) from None

    def response_body(self, request: dict[str, Any], result: EngineResult) -> bytes:
        return orjson.dumps(from_chat_completion(result.body, request))

    def stream_writer(self, request: dict[str, Any]) -> TranslatedStream:
        return TranslatedStream(AnthropicStream(request))

    def error_body(self, err: GatewayError) -> dict[str, Any]:
        return error_body(err.status, err.message)

    def system_parts(self, request: dict[str, Any]) -> list[Any]:
        return [request.get("system")]
