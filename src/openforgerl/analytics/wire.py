"""The three wire protocols' requests, flattened into one list of items (pure).

A recorded call keeps the harness's raw request (`CallRecord.request`) but not the structured
response, so a call's tool calls are read from the *next* request's history, where the harness
appended them together with their results. Per protocol, the tool call; the tool result; the image:

- chat: assistant `tool_calls[]` (`id`, `function.name`, `function.arguments`); `role: tool`, `tool_call_id`;
  `image_url` part
- responses: `function_call` / `custom_tool_call` / `computer_call` / `local_shell_call` (`call_id`);
  `*_call_output`; `input_image`, `computer_screenshot`
- anthropic: `tool_use` block (`id`, `name`, `input`); `tool_result` block (`tool_use_id`, `is_error`);
  `image` block (base64 source)
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from openforgerl.records import WireProtocol

__all__ = ["WireItem", "offered_tools", "request_items"]


@dataclass(frozen=True, slots=True)
class WireItem:
    kind: str
    """`call` (the model asked for a tool), `result` (what the harness answered), `image`, `text`."""
    id: str = ""
    name: str = ""
    args: Mapping[str, Any] = field(default_factory=dict)
    text: str = ""
    is_error: bool | None = None
    role: str = ""
    image: str = ""
    """A `data:` URL (or a plain URL) for images, also set on a result that carries a screenshot."""


def request_items(protocol: WireProtocol | str, request: Mapping[str, Any]) -> list[WireItem]:
    """Every item of the request's history, in order."""
    proto = WireProtocol(protocol)
    if proto is WireProtocol.ANTHROPIC:
        return list(_anthropic(request))
    if proto is WireProtocol.RESPONSES:
        return list(_responses(request))
    return list(_chat(request))


def offered_tools(protocol: WireProtocol | str, request: Mapping[str, Any]) -> list[str]:
    out = []
    for tool in request.get("tools") or []:
        if isinstance(tool, Mapping):
            fn = tool.get("function")
            name = fn.get("name") if isinstance(fn, Mapping) else tool.get("name") or tool.get("type")
            if name:
                out.append(str(name))
    return out


def _args(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        try:
            value = json.loads(raw or "{}")
        except ValueError:
            return {"_raw": raw}
        return value if isinstance(value, dict) else {"_raw": raw}
    return {}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(p) for p in content if not _image_of(p))
    if isinstance(content, Mapping):
        for key in ("text", "output", "content"):
            if key in content:
                return _text_of(content[key])
        return json.dumps(content)
    return "" if content is None else str(content)


def _image_of(part: Any) -> str:
    """A data URL if `part` is an image in any protocol's shape, else ''."""
    if not isinstance(part, Mapping):
        return ""
    kind = part.get("type")
    if kind == "image_url":
        url = part.get("image_url")
        return str(url.get("url", "") if isinstance(url, Mapping) else url or "")
    if kind in ("input_image", "computer_screenshot"):
        return str(part.get("image_url") or "")
    if kind == "image":
        src = part.get("source") or {}
        if src.get("type") == "base64":
            return f"data:{src.get('media_type', 'image/png')};base64,{src.get('data', '')}"
        return str(src.get("url", ""))
    return ""


def _content_items(role: str, content: Any) -> Iterator[WireItem]:
    parts = content if isinstance(content, list) else [content]
    for part in parts:
        image = _image_of(part)
        if image:
            yield WireItem("image", role=role, image=image)
        elif part not in (None, ""):
            text = _text_of(part)
            if text:
                yield WireItem("text", role=role, text=text)


def _chat(request: Mapping[str, Any]) -> Iterator[WireItem]:
    for msg in request.get("messages") or []:
        role = str(msg.get("role", ""))
        if role == "tool":
            content = msg.get("content")
            yield WireItem(
                "result",
                id=str(msg.get("tool_call_id", "")),
                text=_text_of(content),
                role=role,
                image=_first_image(content),
            )
            continue
        yield from _content_items(role, msg.get("content"))
        for tc in msg.get("tool_calls") or []:
            fn = tc.get("function") or {}
            yield WireItem(
                "call",
                id=str(tc.get("id", "")),
                name=str(fn.get("name", "")),
                args=_args(fn.get("arguments")),
                role=role,
            )


def _first_image(content: Any) -> str:
    if isinstance(content, list):
        return next((i for i in map(_image_of, content) if i), "")
    return _image_of(content)


_RESP_CALLS = {"function_call", "custom_tool_call", "computer_call", "local_shell_call"}
_RESP_OUTPUTS = {
    "function_call_output",
    "custom_tool_call_output",
    "computer_call_output",
    "local_shell_call_output",
}


def _responses(request: Mapping[str, Any]) -> Iterator[WireItem]:
    if request.get("instructions"):
        yield WireItem("text", role="system", text=str(request["instructions"]))
    items = request.get("input")
    if isinstance(items, str):
        yield WireItem("text", role="user", text=items)
        return
    for item in items or []:
        kind = item.get("type", "message")
        cid = str(item.get("call_id") or item.get("id") or "")
        if kind in _RESP_CALLS:
            yield WireItem(
                "call", id=cid, name=_responses_name(item), args=_responses_args(item), role="assistant"
            )
        elif kind in _RESP_OUTPUTS:
            out = item.get("output")
            yield WireItem(
                "result",
                id=cid,
                text=_text_of(out),
                role="tool",
                image=_first_image(out if isinstance(out, list) else [out]),
            )
        elif kind == "message":
            yield from _content_items(str(item.get("role", "")), item.get("content"))


def _responses_name(item: Mapping[str, Any]) -> str:
    if item.get("type") == "computer_call":
        return "computer"
    if item.get("type") == "local_shell_call":
        return "local_shell"
    return str(item.get("name", ""))


def _responses_args(item: Mapping[str, Any]) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "computer_call":
        action = dict(item.get("action") or {})
        return {"action": action.pop("type", ""), **action}
    if kind == "local_shell_call":
        return {"command": (item.get("action") or {}).get("command", [])}
    if kind == "custom_tool_call":
        return {"input": item.get("input", "")}
    return _args(item.get("arguments"))


def _anthropic(request: Mapping[str, Any]) -> Iterator[WireItem]:
    system = request.get("system")
    if system:
        yield WireItem("text", role="system", text=_text_of(system))
    for msg in request.get("messages") or []:
        role = str(msg.get("role", ""))
        content = msg.get("content")
        for block in content if isinstance(content, list) else [content]:
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                yield WireItem(
                    "call",
                    id=str(block.get("id", "")),
                    name=str(block.get("name", "")),
                    args=_args(block.get("input")),
                    role=role,
                )
            elif isinstance(block, Mapping) and block.get("type") == "tool_result":
                inner = block.get("content")
                yield WireItem(
                    "result",
                    id=str(block.get("tool_use_id", "")),
                    text=_text_of(inner),
                    role="tool",
                    is_error=bool(block.get("is_error")) if "is_error" in block else None,
                    image=_first_image(inner),
                )
            elif isinstance(block, Mapping) and block.get("type") in ("thinking", "redacted_thinking"):
                continue
            else:
                yield from _content_items(role, [block])
