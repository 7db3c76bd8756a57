"""Anthropic Messages request side: validation and translation to a chat-completions body.

Pure, no I/O; the package (`anthropic/__init__.py`) re-exports everything here and documents the rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openforgerl.gateway.protocols._common import (
    boundary,
    check_optional,
    engine_json,
    expect,
    image_part,
    is_int,
    is_number,
    join_content,
)
from openforgerl.gateway.protocols._inline import place_system

BILLING_HEADER = "x-anthropic-billing-header"
_ROLES = frozenset(("user", "assistant", "system"))
_OPTIONAL_FIELDS = (
    ("system", lambda v: isinstance(v, str) or _is_blocks(v), "a string or an array of text blocks"),
    ("stream", lambda v: isinstance(v, bool), "a boolean"),
    ("temperature", is_number, "a number"),
    ("top_p", is_number, "a number"),
    ("top_k", lambda v: is_int(v) and v >= 0, "a non-negative integer"),
    (
        "stop_sequences",
        lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v),
        "an array of strings",
    ),
    ("tools", lambda v: isinstance(v, list), "an array"),
    (
        "tool_choice",
        lambda v: isinstance(v, dict) and v.get("type") in ("auto", "any", "tool", "none"),
        "an object with type auto, any, tool or none",
    ),
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
        expect(
            isinstance(m, dict) and isinstance(m.get("role"), str) and m["role"] in _ROLES,
            f"{where}.role must be user, assistant or system",
            where,
        )
        content = m.get("content")
        expect(
            isinstance(content, str) or _is_blocks(content),
            f"{where}.content must be a string or blocks",
            where,
        )
        for j, block in enumerate(content if isinstance(content, list) else ()):
            _validate_block(block, f"{where}.content.{j}")
    for i, tool in enumerate(body.get("tools") or ()):
        expect(
            isinstance(tool, dict) and isinstance(tool.get("name"), str),
            f"tools.{i}.name must be a string",
            "tools",
        )
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
        expect(
            content is None or isinstance(content, str) or _is_blocks(content),
            f"{where}.content must be a string or blocks",
            where,
        )
        for j, inner in enumerate(content if isinstance(content, list) else ()):
            _validate_block(inner, f"{where}.content.{j}")
    elif block["type"] == "image":
        src = block["source"]
        ok = (
            src.get("type") == "base64"
            and isinstance(src.get("data"), str)
            and isinstance(src.get("media_type"), str)
        ) or (src.get("type") == "url" and isinstance(src.get("url"), str))
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
    chat: dict[str, Any] = {
        "model": body["model"],
        "messages": place_system([_system_text(body.get("system"))], messages, fold=fold_system),
    }
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
    return "".join(
        b.get("text") or ""
        for b in system or ()
        if b["type"] == "text" and not str(b.get("text", "")).startswith(BILLING_HEADER)
    )


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
            calls.append(
                {"id": b["id"], "type": "function", "function": {"name": b["name"], "arguments": args}}
            )
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
        chat["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": fmt["schema"], "strict": True},
        }


def count_tokens(body: Any, counter: Callable[[dict[str, Any]], int]) -> dict[str, int]:
    """`/v1/messages/count_tokens`: `counter` gets the chat request (messages + tools) and returns
    the prompt length under the engine's template (e.g. vLLM's `/tokenize`)."""
    chat = translate_request(body, count_only=True).chat
    return {"input_tokens": int(counter(chat))}
