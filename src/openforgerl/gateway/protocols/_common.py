"""Pieces shared by the wire-protocol translators: the one error type, ids, JSON, chunk reading.

Everything here is pure and cheap; it runs once per request or once per streamed chunk.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, ParamSpec, TypeVar

import orjson

P = ParamSpec("P")
R = TypeVar("R")


class ProtocolError(Exception):
    """A request the gateway refuses: answer `status` (4xx) in the protocol's own error shape.

    The translators raise only this on bad input, so the gateway can map it with one `except`.
    """

    def __init__(self, status: int, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


def refuse(message: str, *, param: str | None = None) -> ProtocolError:
    return ProtocolError(400, message, param=param)


def boundary(fn: Callable[P, R]) -> Callable[P, R]:
    """Re-type anything a malformed body provokes in `fn` as a 400 ProtocolError.

    Validation catches the known shapes first; this is the net that keeps "never 5xx on garbage"
    true for shapes nobody thought of (classified once, here, at the protocol boundary).
    """

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except ProtocolError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError) as exc:
            raise refuse(f"malformed request: {type(exc).__name__}: {exc}") from None

    return wrapper


def new_id(prefix: str) -> str:
    """A random id with the vendor's prefix (`resp_`, `msg_`, `fc_`, `toolu_`, ...)."""
    return prefix + os.urandom(12).hex()


def parse_json_object(text: Any) -> Any:
    """Tool-call arguments as an object; text that is not a JSON object is kept under `raw`."""
    if isinstance(text, dict):
        return text
    if not isinstance(text, str) or not text.strip():
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {"raw": text}
    return value if isinstance(value, dict) else {"raw": text}


def engine_json(obj: Any) -> str:
    """JSON text as vLLM's and SGLang's hermes parsers write tool arguments: `json.dumps(obj,
    ensure_ascii=False)`. History re-rendered with it reproduces the text the engine handed out,
    even when a harness re-serialized it (OpenClaw and Qwen Code write compact JSON)."""
    return json.dumps(obj, ensure_ascii=False)


def canonical_arguments(text: str) -> str:
    """`engine_json` of a JSON-object argument string; any other text is kept as it is."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return engine_json(value) if isinstance(value, dict) else text


def expect(cond: bool, message: str, param: str | None = None) -> None:
    if not cond:
        raise refuse(message, param=param)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def check_optional(body: dict[str, Any], key: str, pred: Callable[[Any], bool], what: str) -> None:
    """400 unless `body[key]` is absent, null, or satisfies `pred`."""
    value = body.get(key)
    if value is not None and not pred(value):
        raise refuse(f"'{key}' must be {what}", param=key)


def image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def join_content(parts: list[dict[str, Any]], sep: str) -> str | list[dict[str, Any]]:
    """Chat content: a string when it is all text (what chat templates expect), else the part list."""
    if all(p["type"] == "text" for p in parts):
        return sep.join(p["text"] for p in parts)
    return parts


@dataclass
class Usage:
    """Token counts from the engine's chat `usage`, in the names both vendors need."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    @classmethod
    def from_chat(cls, usage: Any) -> Usage:
        if not isinstance(usage, dict):
            return cls()
        prompt_details = usage.get("prompt_tokens_details") or {}
        completion_details = usage.get("completion_tokens_details") or {}
        return cls(
            input_tokens=_int(usage.get("prompt_tokens")),
            output_tokens=_int(usage.get("completion_tokens")),
            cached_tokens=_int(prompt_details.get("cached_tokens"))
            if isinstance(prompt_details, dict)
            else 0,
            reasoning_tokens=(
                _int(completion_details.get("reasoning_tokens"))
                if isinstance(completion_details, dict)
                else 0
            ),
        )


def _int(v: Any) -> int:
    return v if is_int(v) else 0


@dataclass(frozen=True)
class ChatChoice:
    """The first choice of a non-streamed chat.completion, read defensively."""

    content: str
    reasoning: str
    tool_calls: list[dict[str, Any]]
    finish_reason: str | None
    stop_reason: Any

    @classmethod
    def read(cls, chat: dict[str, Any]) -> ChatChoice:
        choices = chat.get("choices") or [{}]
        choice = choices[0] if isinstance(choices[0], dict) else {}
        msg = choice.get("message") or {}
        return cls(
            content=msg.get("content") or "",
            reasoning=msg.get("reasoning") or msg.get("reasoning_content") or "",
            tool_calls=[tc for tc in msg.get("tool_calls") or [] if isinstance(tc, dict)],
            finish_reason=choice.get("finish_reason"),
            stop_reason=choice.get("stop_reason"),
        )


def tool_call_parts(tc: dict[str, Any]) -> tuple[str, str, str]:
    """(id, name, arguments) of one chat tool call."""
    fn = tc.get("function") or {}
    return tc.get("id") or new_id("call_"), fn.get("name") or "", fn.get("arguments") or ""


def reasoning_of(delta: dict[str, Any]) -> str | None:
    """A streamed reasoning delta: vLLM says `reasoning`, SGLang and older vLLM `reasoning_content`."""
    text = delta.get("reasoning")
    if text is None:
        text = delta.get("reasoning_content")
    return text


def leading_system(items: Any) -> list[Any]:
    """The contents of the system/developer messages among the first two of `items` (OpenAI shapes)."""
    if not isinstance(items, list):
        return []
    return [
        m.get("content")
        for m in items[:2]
        if isinstance(m, dict) and m.get("role") in ("system", "developer")
    ]
