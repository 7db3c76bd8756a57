"""Responses API answer side: the non-streamed `response` object, the SSE stream, the error body.

Pure, no I/O; the rules are documented in the package docstring (`responses/__init__.py`).
"""

from __future__ import annotations

import time
from typing import Any

from openforgerl.gateway.protocols import sse
from openforgerl.gateway.protocols._common import (
    ChatChoice,
    Usage,
    is_int,
    new_id,
    parse_json_object,
    reasoning_of,
    tool_call_parts,
)
from openforgerl.gateway.protocols.responses._request import REASONING_MARKER, ToolNames, ToolRef

# --------------------------------------------------------------------------- response


def _include_encrypted(request: dict[str, Any]) -> bool:
    include = request.get("include")
    return isinstance(include, list) and "reasoning.encrypted_content" in include


def _reasoning_item(item_id: str, text: str, encrypted: bool, status: str = "completed") -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": item_id,
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "status": status,
    }
    if encrypted:
        item["encrypted_content"] = REASONING_MARKER + text
    return item


def _message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": [part]}


def _call_item(
    item_id: str, call_id: str, ref: ToolRef, arguments: str, status: str = "completed"
) -> dict[str, Any]:
    if ref.custom:
        parsed = parse_json_object(arguments)
        text = parsed.get("input") if isinstance(parsed.get("input"), str) else arguments
        item: dict[str, Any] = {
            "type": "custom_tool_call",
            "id": item_id,
            "call_id": call_id,
            "name": ref.name,
            "input": text,
            "status": status,
        }
    else:
        item = {
            "type": "function_call",
            "id": item_id,
            "call_id": call_id,
            "name": ref.name,
            "arguments": arguments,
            "status": status,
        }
    if ref.namespace:
        item["namespace"] = ref.namespace
    return item


def _usage(u: Usage) -> dict[str, Any]:
    return {
        "input_tokens": u.input_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": u.input_tokens + u.output_tokens,
    }


def _response(
    request: dict[str, Any],
    rid: str,
    created: int,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
    return {
        "id": rid,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": error,
        "incomplete_details": incomplete,
        "model": request.get("model") or "",
        "output": output,
        "instructions": request.get("instructions"),
        "metadata": request.get("metadata") or {},
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "tool_choice": request.get("tool_choice") or "auto",
        "tools": request.get("tools") or [],
        "temperature": request.get("temperature"),
        "top_p": request.get("top_p"),
        "max_output_tokens": request.get("max_output_tokens"),
        "reasoning": request.get("reasoning"),
        "store": False,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "previous_response_id": None,
        "usage": usage,
    }


def _status(finish_reason: str | None) -> str:
    return "incomplete" if finish_reason == "length" else "completed"


def from_chat_completion(chat: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed chat.completion as a Responses `response` object."""
    choice = ChatChoice.read(chat)
    output: list[dict[str, Any]] = []
    if choice.reasoning:
        output.append(_reasoning_item(new_id("rs_"), choice.reasoning, _include_encrypted(request)))
    if choice.content:
        output.append(_message_item(new_id("msg_"), choice.content))
    names = ToolNames.from_request(request.get("tools"))
    for tc in choice.tool_calls:
        call_id, name, args = tool_call_parts(tc)
        output.append(_call_item(new_id("fc_"), call_id, names.lookup(name), args))
    created = int(chat["created"]) if is_int(chat.get("created")) else int(time.time())
    return _response(
        request,
        new_id("resp_"),
        created,
        _status(choice.finish_reason),
        output,
        _usage(Usage.from_chat(chat.get("usage"))),
    )


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}
_ERROR_CODES = {
    401: "invalid_api_key",
    404: "not_found",
    413: "request_too_large",
    429: "rate_limit_exceeded",
    503: "server_overloaded",
}


def error_body(
    status: int, message: str, *, kind: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """OpenAI's error shape; `kind` overrides the `type` derived from the status."""
    etype = kind or _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": etype, "param": param, "code": _ERROR_CODES.get(status)}}


# --------------------------------------------------------------------------- stream


class _Item:
    __slots__ = ("call_id", "id", "index", "kind", "parts", "ref")

    def __init__(
        self, kind: str, item_id: str, index: int, call_id: str = "", ref: ToolRef | None = None
    ) -> None:
        self.kind = kind  # "reasoning" | "message" | "call"
        self.id = item_id
        self.index = index
        self.parts: list[str] = []
        self.call_id = call_id
        self.ref = ref


class ResponsesStream:
    """Turns engine `chat.completion.chunk` dicts into the Responses SSE event sequence Codex expects.

    One output item is open at a time (reasoning, then message, then each function call, in the
    order the engine streams them); every event carries `sequence_number`; no `[DONE]`.
    """

    def __init__(
        self, request: dict[str, Any], *, response_id: str | None = None, created_at: int | None = None
    ) -> None:
        self._request = request
        self._names = ToolNames.from_request(request.get("tools"))
        self._encrypted = _include_encrypted(request)
        self.response_id = response_id or new_id("resp_")
        self._created = created_at if created_at is not None else int(time.time())
        self._seq = 0
        self._started = self._done = False
        self._open: _Item | None = None
        self._calls: dict[int, _Item] = {}
        self._output: list[dict[str, Any]] = []
        self._usage = Usage()
        self._finish_reason: str | None = None

    # -- public

    def start(self, input_tokens: int | None = None) -> bytes:
        """`response.created` + `response.in_progress` (sent by the first `feed` if not called).

        `input_tokens` is accepted for symmetry with `AnthropicStream.start` (usage comes at the end)."""
        if self._started:
            return b""
        self._started = True
        snapshot = _response(self._request, self.response_id, self._created, "in_progress", [])
        return self._event("response.created", {"response": snapshot}) + self._event(
            "response.in_progress", {"response": snapshot}
        )

    def feed(self, chunk: dict[str, Any]) -> bytes:
        out = b"" if self._started else self.start()
        if self._done:
            return out
        usage = chunk.get("usage")
        if usage:
            self._usage = Usage.from_chat(usage)
        choices = chunk.get("choices")
        if not choices:
            return out
        choice = choices[0]
        delta = choice.get("delta") or {}
        text = reasoning_of(delta)
        if text:
            out += self._reasoning(text)
        text = delta.get("content")
        if text:
            out += self._text(text)
        for tc in delta.get("tool_calls") or ():
            out += self._tool(tc)
        if choice.get("finish_reason"):
            self._finish_reason = choice["finish_reason"]
        return out

    def finish(self, usage: dict[str, Any] | None = None) -> bytes:
        """Close open items and send `response.completed` (usage: a chat `usage` override)."""
        out = self.start()
        if self._done:
            return out
        out += self._close()
        self._done = True
        if usage:
            self._usage = Usage.from_chat(usage)
        final = _response(
            self._request,
            self.response_id,
            self._created,
            _status(self._finish_reason),
            self._output,
            _usage(self._usage),
        )
        return out + self._event("response.completed", {"response": final})

    def error_event(self, message: str, *, code: str = "server_error", status: int | None = None) -> bytes:
        """A mid-stream failure: `error` then `response.failed` (Codex retries it unless the code
        is `context_length_exceeded`). `status` is accepted for symmetry with AnthropicStream."""
        out = self.start()
        if self._done:
            return out
        self._done = True
        err = {"code": code, "message": message}
        failed = _response(self._request, self.response_id, self._created, "failed", self._output, None, err)
        return (
            out
            + self._event("error", {"code": code, "message": message, "param": None})
            + self._event("response.failed", {"response": failed})
        )

    @property
    def output(self) -> list[dict[str, Any]]:
        return self._output

    # -- items

    def _event(self, kind: str, payload: dict[str, Any]) -> bytes:
        payload["type"] = kind
        payload["sequence_number"] = self._seq
        self._seq += 1
        return sse.encode(payload, kind)

    def _reasoning(self, text: str) -> bytes:
        item = self._open
        out = b""
        if item is None or item.kind != "reasoning":
            out, item = self._begin("reasoning", "rs_")
        item.parts.append(text)
        return out + self._event(
            "response.reasoning_text.delta",
            {"item_id": item.id, "output_index": item.index, "content_index": 0, "delta": text},
        )

    def _text(self, text: str) -> bytes:
        item = self._open
        out = b""
        if item is None or item.kind != "message":
            out, item = self._begin("message", "msg_")
        item.parts.append(text)
        return out + self._event(
            "response.output_text.delta",
            {
                "item_id": item.id,
                "output_index": item.index,
                "content_index": 0,
                "delta": text,
                "logprobs": [],
            },
        )

    def _tool(self, tc: dict[str, Any]) -> bytes:
        index = tc.get("index", 0)
        fn = tc.get("function") or {}
        item = self._calls.get(index)
        out = b""
        if item is None:
            out, item = self._begin_call(tc.get("id") or new_id("call_"), fn.get("name") or "")
            self._calls[index] = item
        args = fn.get("arguments")
        if args:
            item.parts.append(args)
            if item is self._open and not item.ref.custom:  # type: ignore[union-attr]
                out += self._event(
                    "response.function_call_arguments.delta",
                    {"item_id": item.id, "output_index": item.index, "delta": args},
                )
        return out

    def _begin(self, kind: str, prefix: str) -> tuple[bytes, _Item]:
        out = self._close()
        item = self._open = _Item(kind, new_id(prefix), len(self._output))
        if kind == "reasoning":
            added = _reasoning_item(item.id, "", False, "in_progress")
            added["content"] = []
            part: dict[str, Any] = {"type": "reasoning_text", "text": ""}
        else:
            added = _message_item(item.id, "", "in_progress")
            added["content"] = []
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        out += self._event("response.output_item.added", {"output_index": item.index, "item": added})
        return out + self._event(
            "response.content_part.added",
            {"item_id": item.id, "output_index": item.index, "content_index": 0, "part": part},
        ), item

    def _begin_call(self, call_id: str, name: str) -> tuple[bytes, _Item]:
        out = self._close()
        ref = self._names.lookup(name)
        item = self._open = _Item(
            "call", new_id("ctc_" if ref.custom else "fc_"), len(self._output), call_id, ref
        )
        if ref.custom:  # freeform input is only known once the JSON arguments are complete
            return out, item
        added = _call_item(item.id, call_id, ref, "", "in_progress")
        return out + self._event(
            "response.output_item.added", {"output_index": item.index, "item": added}
        ), item

    def _close(self) -> bytes:
        item = self._open
        if item is None:
            return b""
        self._open = None
        text = "".join(item.parts)
        if item.kind == "call":
            return self._close_call(item, text)
        if item.kind == "reasoning":
            final = _reasoning_item(item.id, text, self._encrypted)
            part: dict[str, Any] = {"type": "reasoning_text", "text": text}
            out = self._event(
                "response.reasoning_text.done",
                {"item_id": item.id, "output_index": item.index, "content_index": 0, "text": text},
            )
        else:
            final = _message_item(item.id, text)
            part = final["content"][0]
            out = self._event(
                "response.output_text.done",
                {
                    "item_id": item.id,
                    "output_index": item.index,
                    "content_index": 0,
                    "text": text,
                    "logprobs": [],
                },
            )
        out += self._event(
            "response.content_part.done",
            {"item_id": item.id, "output_index": item.index, "content_index": 0, "part": part},
        )
        return out + self._done_item(item, final)

    def _close_call(self, item: _Item, arguments: str) -> bytes:
        ref = item.ref
        assert ref is not None
        final = _call_item(item.id, item.call_id, ref, arguments)
        if not ref.custom:
            out = self._event(
                "response.function_call_arguments.done",
                {"item_id": item.id, "output_index": item.index, "name": ref.name, "arguments": arguments},
            )
            return out + self._done_item(item, final)
        added = dict(final, input="", status="in_progress")
        out = self._event("response.output_item.added", {"output_index": item.index, "item": added})
        ids = {"item_id": item.id, "output_index": item.index}
        out += self._event("response.custom_tool_call_input.delta", {**ids, "delta": final["input"]})
        out += self._event("response.custom_tool_call_input.done", {**ids, "input": final["input"]})
        return out + self._done_item(item, final)

    def _done_item(self, item: _Item, final: dict[str, Any]) -> bytes:
        self._output.append(final)
        return self._event("response.output_item.done", {"output_index": item.index, "item": final})
