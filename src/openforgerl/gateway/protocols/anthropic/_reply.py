"""Anthropic Messages answer side: the non-streamed `message`, the SSE stream, the error body.

Pure, no I/O; the rules are documented in the package docstring (`anthropic/__init__.py`).
"""

from __future__ import annotations

import re
from typing import Any

from openforgerl.gateway.protocols import sse
from openforgerl.gateway.protocols._common import (
    ChatChoice,
    Usage,
    new_id,
    parse_json_object,
    reasoning_of,
    tool_call_parts,
)

SIGNATURE = "openforgerl-unsigned"
_ID_JUNK = re.compile(r"[^A-Za-z0-9_-]")
_PING = sse.encode(b'{"type":"ping"}', "ping")
_MESSAGE_STOP = sse.encode(b'{"type":"message_stop"}', "message_stop")


# --------------------------------------------------------------------------- response


def tool_use_id(chat_id: str) -> str:
    return chat_id if chat_id.startswith("toolu_") else "toolu_" + _ID_JUNK.sub("", chat_id)


def _stop(
    finish_reason: str | None, stop_reason: Any, has_tools: bool, request: dict[str, Any]
) -> tuple[str, Any]:
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
    return {
        "input_tokens": u.input_tokens - u.cached_tokens,
        "output_tokens": u.output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": u.cached_tokens,
    }


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
        content.append(
            {"type": "tool_use", "id": tool_use_id(call_id), "name": name, "input": parse_json_object(args)}
        )
    stop_reason, stop_seq = _stop(choice.finish_reason, choice.stop_reason, bool(choice.tool_calls), request)
    return {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": request.get("model") or "",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_seq,
        "usage": _usage(Usage.from_chat(chat.get("usage"))),
    }


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


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
        message: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self._request.get("model") or "",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": self._input_tokens,
                "output_tokens": 0,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
        return sse.encode({"type": "message_start", "message": message}, "message_start") + self.ping()

    def ping(self) -> bytes:
        return _PING

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
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": seq},
            "usage": _usage(u),
        }
        return out + sse.encode(delta, "message_delta") + _MESSAGE_STOP

    def error_event(self, message: str, *, kind: str | None = None, status: int = 500) -> bytes:
        """A mid-stream failure as Anthropic's `event: error`; the error type comes from `kind` or
        else from `status` (503 -> `overloaded_error`, which Claude Code retries)."""
        out = self.start()
        if self._done:
            return out
        self._done = True
        return out + sse.encode(error_body(status, message, kind=kind), "error")

    # -- blocks

    def _delta(self, kind: str, delta: dict[str, Any]) -> bytes:
        out = b"" if self._open == kind else self._begin(kind, _EMPTY_BLOCKS[kind])
        return out + sse.encode(
            {"type": "content_block_delta", "index": self._block, "delta": delta}, "content_block_delta"
        )

    def _tool(self, tc: dict[str, Any]) -> bytes:
        index = tc.get("index", 0)
        fn = tc.get("function") or {}
        out = b""
        if index not in self._calls:
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": tool_use_id(tc.get("id") or new_id("call_")),
                "name": fn.get("name") or "",
                "input": {},
            }
            out = self._begin("tool_use", block)
            self._calls[index] = self._block
        args = fn.get("arguments")
        if args and self._calls[index] == self._block and self._open == "tool_use":
            delta = {"type": "input_json_delta", "partial_json": args}
            out += sse.encode(
                {"type": "content_block_delta", "index": self._block, "delta": delta}, "content_block_delta"
            )
        return out

    def _begin(self, kind: str, block: dict[str, Any]) -> bytes:
        out = self._close()
        self._block += 1
        self._open = kind
        return out + sse.encode(
            {"type": "content_block_start", "index": self._block, "content_block": block},
            "content_block_start",
        )

    def _close(self) -> bytes:
        if self._open is None:
            return b""
        out = b""
        if self._open == "thinking":
            signature = {"type": "signature_delta", "signature": SIGNATURE}
            out = sse.encode(
                {"type": "content_block_delta", "index": self._block, "delta": signature},
                "content_block_delta",
            )
        self._open = None
        return out + sse.encode({"type": "content_block_stop", "index": self._block}, "content_block_stop")


_EMPTY_BLOCKS = {
    "thinking": {"type": "thinking", "thinking": "", "signature": ""},
    "text": {"type": "text", "text": ""},
}
