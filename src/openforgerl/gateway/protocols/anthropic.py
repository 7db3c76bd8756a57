"""Anthropic Messages <-> Chat Completions, as Claude Code and OpenClaw speak it. Pure, no I/O.

API for the gateway (plain dicts in, dicts/bytes out):

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

Translation rules (measured on Claude Code 2.1.197, see reference/notes/harnesses.md):
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

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openforgerl.gateway.protocols._common import (
    ChatChoice,
    ProtocolError,
    Usage,
    boundary,
    check_optional,
    dumps,
    engine_json,
    expect,
    image_part,
    is_int,
    is_number,
    join_content,
    new_id,
    parse_json_object,
    reasoning_of,
    tool_call_parts,
)
from openforgerl.gateway.protocols._inline import place_system

__all__ = [
    "AnthropicStream",
    "ChatTranslation",
    "ProtocolError",
    "count_tokens",
    "error_body",
    "from_chat_completion",
    "to_chat_request",
    "translate_request",
    "validate_request",
]

BILLING_HEADER = "x-anthropic-billing-header"
SIGNATURE = "openforgerl-unsigned"
_ROLES = frozenset(("user", "assistant", "system"))
_ID_JUNK = re.compile(r"[^A-Za-z0-9_-]")
_OPTIONAL_FIELDS = (
    ("system", lambda v: isinstance(v, str) or _is_blocks(v), "a string or an array of text blocks"),
    ("stream", lambda v: isinstance(v, bool), "a boolean"),
    ("temperature", is_number, "a number"),
    ("top_p", is_number, "a number"),
    ("top_k", lambda v: is_int(v) and v >= 0, "a non-negative integer"),
    ("stop_sequences", lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v), "an array of strings"),
    ("tools", lambda v: isinstance(v, list), "an array"),
    ("tool_choice", lambda v: isinstance(v, dict) and v.get("type") in ("auto", "any", "tool", "none"),
     "an object with type auto, any, tool or none"),
    ("thinking", lambda v: isinstance(v, dict), "an object"),
    ("metadata", lambda v: isinstance(v, dict), "an object"),
    ("output_config", lambda v: isinstance(v, dict), "an object"),
)


@dataclass(frozen=True)
class ChatTranslation:
    chat: dict[str, Any]
    notes: tuple[str, ...]


# --------------------------------------------------------------------------- validation


@boundary
def validate_request(body: Any, *, count_only: bool = False) -> None:
    """Refuse (400) wrong types or missing fields; never raises anything but ProtocolError.

    `count_only` checks a `count_tokens` body (no `max_tokens`)."""
    expect(isinstance(body, dict), "request body must be a JSON object")
    expect(isinstance(body.get("model"), str), "model: field required (a string)", "model")
    if not count_only:
        mt = body.get("max_tokens")
        expect(is_int(mt) and mt > 0, "max_tokens: field required (a positive integer)", "max_tokens")
    for key, pred, what in _OPTIONAL_FIELDS:
        check_optional(body, key, pred, what)
    for j, block in enumerate(body["system"] if isinstance(body.get("system"), list) else ()):
        _validate_block(block, f"system.{j}")
    messages = body.get("messages")
    expect(isinstance(messages, list), "messages: field required (an array)", "messages")
    for i, m in enumerate(messages):
        where = f"messages.{i}"
        expect(isinstance(m, dict) and isinstance(m.get("role"), str) and m["role"] in _ROLES, f"{where}.role must be user, assistant or system", where)
        content = m.get("content")
        expect(isinstance(content, str) or _is_blocks(content), f"{where}.content must be a string or blocks", where)
        for j, block in enumerate(content if isinstance(content, list) else ()):
            _validate_block(block, f"{where}.content.{j}")
    for i, tool in enumerate(body.get("tools") or ()):
        expect(isinstance(tool, dict) and isinstance(tool.get("name"), str), f"tools.{i}.name must be a string", "tools")
        check_optional(tool, "input_schema", lambda v: isinstance(v, dict), "an object")
        check_optional(tool, "description", lambda v: isinstance(v, str), "a string")
    choice = body.get("tool_choice") or {}
    if choice.get("type") == "tool":
        expect(isinstance(choice.get("name"), str), "tool_choice.name must be a string", "tool_choice")


def _is_blocks(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in v)


_BLOCK_FIELDS: dict[str, tuple[tuple[str, type | tuple[type, ...]], ...]] = {
    "text": (("text", str),),
    "thinking": (("thinking", str),),
    "redacted_thinking": (("data", str),),
    "tool_use": (("id", str), ("name", str), ("input", dict)),
    "tool_result": (("tool_use_id", str),),
    "image": (("source", dict),),
}


def _validate_block(block: dict[str, Any], where: str) -> None:
    for field, typ in _BLOCK_FIELDS.get(block["type"], ()):
        expect(isinstance(block.get(field), typ), f"{where}.{field}: wrong or missing field", where)
    if block["type"] == "tool_result":
        content = block.get("content")
        expect(content is None or isinstance(content, str) or _is_blocks(content),
               f"{where}.content must be a string or blocks", where)
        for j, inner in enumerate(content if isinstance(content, list) else ()):
            _validate_block(inner, f"{where}.content.{j}")
    elif block["type"] == "image":
        src = block["source"]
        ok = (src.get("type") == "base64" and isinstance(src.get("data"), str)
              and isinstance(src.get("media_type"), str)) or (src.get("type") == "url" and isinstance(src.get("url"), str))
        expect(ok, f"{where}.source must be base64 (media_type, data) or url", where)


# --------------------------------------------------------------------------- request


def to_chat_request(body: Any, *, fold_system: bool = False) -> dict[str, Any]:
    """The chat-completions body for the engine (validates first). `fold_system`: see `_inline.py`."""
    return translate_request(body, fold_system=fold_system).chat


def translate_request(body: Any, *, count_only: bool = False, fold_system: bool = False) -> ChatTranslation:
    validate_request(body, count_only=count_only)
    return _translate(body, fold_system)


@boundary
def _translate(body: dict[str, Any], fold_system: bool = False) -> ChatTranslation:
    notes: list[str] = []
    messages: list[dict[str, Any]] = []
    for m in body["messages"]:
        messages.extend(_message(m, notes))
    chat: dict[str, Any] = {"model": body["model"], "messages": place_system([_system_text(body.get("system"))], messages,
                                                                    fold=fold_system)}
    tools = _tools(body.get("tools") or [], notes)
    if tools:
        chat["tools"] = tools
        _tool_choice(body.get("tool_choice") or {"type": "auto"}, chat)
    if chat["messages"] and chat["messages"][-1]["role"] == "assistant":
        chat["continue_final_message"] = True
        chat["add_generation_prompt"] = False
    _sampling(body, chat)
    return ChatTranslation(chat, tuple(notes))


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return "" if system.startswith(BILLING_HEADER) else system
    return "".join(b.get("text") or "" for b in system or ()
                   if b["type"] == "text" and not str(b.get("text", "")).startswith(BILLING_HEADER))


def _message(m: dict[str, Any], notes: list[str]) -> list[dict[str, Any]]:
    role, content = m["role"], m["content"]
    if role == "system":
        text = _system_text(content)
        return [{"role": "system", "content": text}] if text else []
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if role == "assistant":
        return [_assistant(content, notes)]
    return _user(content, notes)


def _assistant(blocks: list[dict[str, Any]], notes: list[str]) -> dict[str, Any]:
    texts, thoughts, calls = [], [], []
    for b in blocks:
        kind = b["type"]
        if kind == "text":
            texts.append(b["text"])
        elif kind == "thinking":
            thoughts.append(b["thinking"])
        elif kind == "tool_use":
            args = engine_json(b["input"])  # the exact text vLLM's hermes parser handed out
            calls.append({"id": b["id"], "type": "function", "function": {"name": b["name"], "arguments": args}})
        else:
            notes.append(f"dropped assistant block {kind!r}")
    msg: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if thoughts:
        msg["reasoning"] = "".join(thoughts)
    if calls:
        msg["tool_calls"] = calls
    return msg


def _user(blocks: list[dict[str, Any]], notes: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for b in blocks:
        if b["type"] == "tool_result":
            content = b.get("content")
            # separate result blocks are separate outputs: one per line
            text = content if isinstance(content, str) else join_content(_parts(content or [], notes), "\n")
            out.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": text})
        else:
            parts.extend(_parts([b], notes))
    if parts or not out:
        out.append({"role": "user", "content": join_content(parts, "")})
    return out


def _parts(blocks: list[dict[str, Any]], notes: list[str]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for b in blocks:
        kind = b["type"]
        if kind == "text":
            parts.append({"type": "text", "text": b.get("text") or ""})
        elif kind == "image":
            src = b["source"]
            url = src["url"] if src.get("type") == "url" else f"data:{src['media_type']};base64,{src['data']}"
            parts.append(image_part(url))
        elif kind == "document" and (b.get("source") or {}).get("type") == "text":
            parts.append({"type": "text", "text": str(b["source"].get("data", ""))})
        else:
            notes.append(f"dropped content block {kind!r}")
    return parts


def _tools(tools: list[dict[str, Any]], notes: list[str]) -> list[dict[str, Any]]:
    out = []
    for t in tools:
        if "input_schema" not in t:
            notes.append(f"dropped server tool {t.get('type') or t['name']!r}")
            continue
        fn = {"name": t["name"], "description": t.get("description") or "", "parameters": t["input_schema"]}
        out.append({"type": "function", "function": fn})
    return out


def _tool_choice(choice: dict[str, Any], chat: dict[str, Any]) -> None:
    kind = choice["type"]
    if kind == "tool":
        chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    else:
        chat["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[kind]
    if choice.get("disable_parallel_tool_use"):
        chat["parallel_tool_calls"] = False


def _sampling(body: dict[str, Any], chat: dict[str, Any]) -> None:
    for key in ("max_tokens", "temperature", "top_p", "top_k"):
        if body.get(key) is not None:
            chat[key] = body[key]
    if body.get("stop_sequences"):
        chat["stop"] = body["stop_sequences"]
    if body.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    if (body.get("thinking") or {}).get("type") == "disabled":
        chat["chat_template_kwargs"] = {"enable_thinking": False}
    fmt = (body.get("output_config") or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema" and isinstance(fmt.get("schema"), dict):
        chat["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "output", "schema": fmt["schema"], "strict": True}}


def count_tokens(body: Any, counter: Callable[[dict[str, Any]], int]) -> dict[str, int]:
    """`/v1/messages/count_tokens`: `counter` gets the chat request (messages + tools) and returns
    the prompt length under the engine's template (e.g. vLLM's `/tokenize`)."""
    chat = translate_request(body, count_only=True).chat
    return {"input_tokens": int(counter(chat))}


# --------------------------------------------------------------------------- response


def tool_use_id(chat_id: str) -> str:
    return chat_id if chat_id.startswith("toolu_") else "toolu_" + _ID_JUNK.sub("", chat_id)


def _stop(finish_reason: str | None, stop_reason: Any, has_tools: bool, request: dict[str, Any]) -> tuple[str, Any]:
    if has_tools or finish_reason == "tool_calls":
        return "tool_use", None
    if finish_reason == "length":
        return "max_tokens", None
    if isinstance(stop_reason, str) and stop_reason in (request.get("stop_sequences") or ()):
        return "stop_sequence", stop_reason
    if finish_reason == "content_filter":
        return "refusal", None
    return "end_turn", None


def _usage(u: Usage) -> dict[str, int]:
    return {"input_tokens": u.input_tokens - u.cached_tokens, "output_tokens": u.output_tokens,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": u.cached_tokens}


def from_chat_completion(chat: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed chat.completion as an Anthropic `message`."""
    choice = ChatChoice.read(chat)
    content: list[dict[str, Any]] = []
    if choice.reasoning:
        content.append({"type": "thinking", "thinking": choice.reasoning, "signature": SIGNATURE})
    if choice.content:
        content.append({"type": "text", "text": choice.content})
    for tc in choice.tool_calls:
        call_id, name, args = tool_call_parts(tc)
        content.append({"type": "tool_use", "id": tool_use_id(call_id), "name": name, "input": parse_json_object(args)})
    stop_reason, stop_seq = _stop(choice.finish_reason, choice.stop_reason, bool(choice.tool_calls), request)
    return {"id": new_id("msg_"), "type": "message", "role": "assistant", "model": request.get("model") or "",
            "content": content, "stop_reason": stop_reason, "stop_sequence": stop_seq,
            "usage": _usage(Usage.from_chat(chat.get("usage")))}


_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                429: "rate_limit_error", 503: "overloaded_error", 504: "timeout_error", 529: "overloaded_error"}


def error_body(status: int, message: str, *, kind: str | None = None) -> dict[str, Any]:
    """Anthropic's error shape; `kind` overrides the error type derived from the status."""
    etype = kind or _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": etype, "message": message}}


# --------------------------------------------------------------------------- stream


class AnthropicStream:
    """Turns engine `chat.completion.chunk` dicts into Anthropic Messages SSE events.

    One content block is open at a time (thinking, text, each tool_use, in engine order); the
    thinking block closes with a `signature_delta`; `message_delta` carries stop_reason + usage.
    """

    def __init__(self, request: dict[str, Any], *, message_id: str | None = None) -> None:
        self._request = request
        self.message_id = message_id or new_id("msg_")
        self._started = self._done = False
        self._input_tokens = 0
        self._block = -1  # index of the last block started
        self._open: str | None = None  # kind of the open block
        self._calls: dict[int, int] = {}  # chat tool index -> block index
        self._usage: Usage | None = None
        self._finish_reason: str | None = None
        self._stop_reason: Any = None

    # -- public

    def start(self, input_tokens: int | None = None) -> bytes:
        """`message_start` + `ping` (sent by the first `feed` if not called)."""
        if self._started:
            return b""
        self._started = True
        if input_tokens is not None:
            self._input_tokens = input_tokens
        message: dict[str, Any] = {"id": self.message_id, "type": "message", "role": "assistant",
                   "model": self._request.get("model") or "", "content": [], "stop_reason": None,
                   "stop_sequence": None, "usage": {"input_tokens": self._input_tokens, "output_tokens": 0,
                                                    "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}
        return _event("message_start", {"type": "message_start", "message": message}) + self.ping()

    def ping(self) -> bytes:
        return b'event: ping\ndata: {"type":"ping"}\n\n'

    def feed(self, chunk: dict[str, Any]) -> bytes:
        out = b""
        if not self._started:
            ids = chunk.get("prompt_token_ids")
            out = self.start(len(ids) if isinstance(ids, list) else None)
        if self._done:
            return out
        if chunk.get("usage"):
            self._usage = Usage.from_chat(chunk["usage"])
        choices = chunk.get("choices")
        if not choices:
            return out
        choice = choices[0]
        delta = choice.get("delta") or {}
        text = reasoning_of(delta)
        if text:
            out += self._delta("thinking", {"type": "thinking_delta", "thinking": text})
        text = delta.get("content")
        if text:
            out += self._delta("text", {"type": "text_delta", "text": text})
        for tc in delta.get("tool_calls") or ():
            out += self._tool(tc)
        if choice.get("finish_reason"):
            self._finish_reason = choice["finish_reason"]
            self._stop_reason = choice.get("stop_reason")
        return out

    def finish(self, usage: dict[str, Any] | None = None) -> bytes:
        """Close the open block, then `message_delta` (stop_reason, usage) and `message_stop`."""
        out = self.start()
        if self._done:
            return out
        out += self._close()
        self._done = True
        u = Usage.from_chat(usage) if usage else self._usage or Usage(input_tokens=self._input_tokens)
        reason, seq = _stop(self._finish_reason, self._stop_reason, bool(self._calls), self._request)
        delta = {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": seq}, "usage": _usage(u)}
        return out + _event("message_delta", delta) + b'event: message_stop\ndata: {"type":"message_stop"}\n\n'

    def error_event(self, message: str, *, kind: str | None = None, status: int = 500) -> bytes:
        """A mid-stream failure as Anthropic's `event: error`; the error type comes from `kind` or
        else from `status` (503 -> `overloaded_error`, which Claude Code retries)."""
        out = self.start()
        if self._done:
            return out
        self._done = True
        return out + _event("error", error_body(status, message, kind=kind))

    # -- blocks

    def _delta(self, kind: str, delta: dict[str, Any]) -> bytes:
        out = b"" if self._open == kind else self._begin(kind, _EMPTY_BLOCKS[kind])
        return out + _event("content_block_delta", {"type": "content_block_delta", "index": self._block, "delta": delta})

    def _tool(self, tc: dict[str, Any]) -> bytes:
        index = tc.get("index", 0)
        fn = tc.get("function") or {}
        out = b""
        if index not in self._calls:
            block: dict[str, Any] = {"type": "tool_use", "id": tool_use_id(tc.get("id") or new_id("call_")),
                     "name": fn.get("name") or "", "input": {}}
            out = self._begin("tool_use", block)
            self._calls[index] = self._block
        args = fn.get("arguments")
        if args and self._calls[index] == self._block and self._open == "tool_use":
            out += _event("content_block_delta", {"type": "content_block_delta", "index": self._block,
                                                  "delta": {"type": "input_json_delta", "partial_json": args}})
        return out

    def _begin(self, kind: str, block: dict[str, Any]) -> bytes:
        out = self._close()
        self._block += 1
        self._open = kind
        return out + _event("content_block_start", {"type": "content_block_start", "index": self._block,
                                                     "content_block": block})

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        out = b""
        if self._open == "thinking":
            out = _event("content_block_delta", {"type": "content_block_delta", "index": self._block,
                                                 "delta": {"type": "signature_delta", "signature": SIGNATURE}})
        self._open = None
        return out + _event("content_block_stop", {"type": "content_block_stop", "index": self._block})


_EMPTY_BLOCKS = {"thinking": {"type": "thinking", "thinking": "", "signature": ""}, "text": {"type": "text", "text": ""}}


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + dumps(payload) + b"\n\n"
