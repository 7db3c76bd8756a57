"""OpenAI Responses API <-> Chat Completions, as Codex CLI and OpenClaw speak it.

`ResponsesAdapter` is the gateway's one object for the protocol (`protocols/base.py`). Underneath,
pure translators, no I/O (all take/return plain dicts and bytes): the request side in `_request.py`,
the answer side in `_reply.py`, re-exported here:

* `validate_request(body)` raises `ProtocolError(status, message)`; `to_chat_request(body)` validates
  and returns the chat-completions body for the engine; `translate_request` also returns notes on
  what was dropped; `fold_system=True` folds mid-conversation system messages into user turns for
  templates that reject them. The gateway adds its own engine fields (`return_token_ids`, ...).
  Assistant history carries the model's reasoning as `reasoning` (vLLM's field name; an SGLang
  engine adapter must rename it to `reasoning_content`).
* `from_chat_completion(chat, request)` -> the non-streamed `response` object.
* `ResponsesStream(request)`: `feed(chunk_dict) -> bytes` per engine `chat.completion.chunk`,
  `finish(usage=None) -> bytes` at the end of the engine stream, `error_event(message, status=...)`
  when the engine fails mid-stream. `start()` (optional) sends `response.created` early.
* `error_body(status, message)` -> `{"error": {...}}` for a non-2xx answer.

Translation rules (measured on Codex 0.171):
* `instructions` + leading `developer`/`system` items -> one system message; later ones stay in
  place (see `_inline.py`). `input` may be a string.
* reasoning items -> the next assistant message's `reasoning`; `function_call` items join the
  assistant message before them, their JSON `arguments` re-written in the engine's own spacing
  (`json.dumps`, identity for Codex, which keeps bytes; undoes OpenClaw's compact re-serializing);
  `function_call_output` -> a `tool` message.
* Tools: `function` (strict is accepted, not enforced); `namespace` members are flattened to
  function tools named `<namespace>.<name>` and mapped back to a `function_call` carrying
  `"namespace"`; `custom` (freeform) tools become a function with one string argument `input` and
  come back as `custom_tool_call`. Hosted tools (`web_search`, `file_search`, ...) are dropped.
* Reasoning we emit carries its text both as `content` (reasoning_text) and, when the request
  includes `reasoning.encrypted_content`, as `encrypted_content` with a marker prefix: Codex never
  sends reasoning `content` back but does echo `encrypted_content`, so the next prompt still holds
  the model's reasoning and stays a token-exact extension of this one.
* `reasoning.effort == "none"` -> `chat_template_kwargs.enable_thinking = false`.
* A stream always ends in `response.completed` (status `incomplete` when the engine hit its token
  limit): Codex treats a stream without `response.completed` as a failure and retries it.
  `previous_response_id` is refused (400): the gateway is stateless, so Codex must use a custom
  `model_providers` entry (HTTP, full history).
"""

from __future__ import annotations

from typing import Any

import orjson

from openforgerl.engines.base import EngineResult
from openforgerl.gateway.errors import GatewayError, openai_error_body
from openforgerl.gateway.protocols._common import ProtocolError, leading_system
from openforgerl.gateway.protocols.base import TranslatedStream, WireAdapter, register
from openforgerl.gateway.protocols.responses._reply import ResponsesStream, error_body, from_chat_completion
from openforgerl.gateway.protocols.responses._request import (
    REASONING_MARKER,
    ChatTranslation,
    ToolNames,
    ToolRef,
    to_chat_request,
    translate_request,
    validate_request,
)
from openforgerl.records import WireProtocol

__all__ = [
    "REASONING_MARKER",
    "ChatTranslation",
    "ProtocolError",
    "ResponsesAdapter",
    "ResponsesStream",
    "ToolNames",
    "ToolRef",
    "error_body",
    "from_chat_completion",
    "to_chat_request",
    "translate_request",
    "validate_request",
]


@register
class ResponsesAdapter(WireAdapter):
    wire = WireProtocol.RESPONSES
    path = "/v1/responses"

    def engine_body(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            chat = to_chat_request(request)
        except ProtocolError as exc:
            raise GatewayError(exc.status, exc.message, param=exc.param) from None
        if request.get("stream"):
            chat["stream_options"] = {"include_usage": True}
        return chat

    def response_body(self, request: dict[str, Any], result: EngineResult) -> bytes:
        return orjson.dumps(from_chat_completion(result.body, request))

    def stream_writer(self, request: dict[str, Any]) -> TranslatedStream:
        return TranslatedStream(ResponsesStream(request))

    def error_body(self, err: GatewayError) -> dict[str, Any]:
        # the plain OpenAI shape Chat answers in; `error_body` (re-exported above) is the translator's own
        return openai_error_body(err.status, err.message, err.param, err.code)

    def system_parts(self, request: dict[str, Any]) -> list[Any]:
        return [request.get("instructions"), *leading_system(request.get("input"))]
