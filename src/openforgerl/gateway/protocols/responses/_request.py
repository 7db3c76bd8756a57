"""Responses API request side: validation and translation to a chat-completions body.

The package (`responses/__init__.py`) re-exports everything here and documents the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openforgerl.gateway.protocols._common import (
    boundary,
    canonical_arguments,
    check_optional,
    engine_json,
    expect,
    image_part,
    is_int,
    is_number,
    join_content,
)
from openforgerl.gateway.protocols._inline import place_system

REASONING_MARKER = "openforgerl.reasoning.v1:"
_TEXT_PARTS = frozenset(("input_text", "output_text", "text", "summary_text", "reasoning_text"))
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
_OPTIONAL_FIELDS = (
    ("instructions", lambda v: isinstance(v, str), "a string"),
    ("model", lambda v: isinstance(v, str), "a string"),
    ("stream", lambda v: isinstance(v, bool), "a boolean"),
    ("temperature", is_number, "a number"),
    ("top_p", is_number, "a number"),
    ("max_output_tokens", lambda v: is_int(v) and v > 0, "a positive integer"),
    ("parallel_tool_calls", lambda v: isinstance(v, bool), "a boolean"),
    ("reasoning", lambda v: isinstance(v, dict), "an object"),
    ("text", lambda v: isinstance(v, dict), "an object"),
    ("include", lambda v: isinstance(v, list), "an array"),
    ("tools", lambda v: isinstance(v, list), "an array"),
    ("metadata", lambda v: isinstance(v, dict), "an object"),
    ("tool_choice", lambda v: isinstance(v, str | dict), "a string or an object"),
)


@dataclass(frozen=True)
class ChatTranslation:
    chat: dict[str, Any]
    notes: tuple[str, ...]  # what the chat request cannot express and was dropped


# --------------------------------------------------------------------------- validation


@boundary
def validate_request(body: Any) -> None:
    """Refuse (400) a body whose types are wrong; never raises anything but ProtocolError."""
    expect(isinstance(body, dict), "request body must be a JSON object")
    for key, pred, what in _OPTIONAL_FIELDS:
        check_optional(body, key, pred, what)
    expect(
        body.get("previous_response_id") is None,
        "previous_response_id is not supported: this endpoint is stateless, send the full input",
        "previous_response_id",
    )
    inp = body.get("input")
    expect(isinstance(inp, str | list), "'input' must be a string or an array of items", "input")
    if isinstance(inp, list):
        for i, item in enumerate(inp):
            _validate_item(item, f"input[{i}]")
    for i, tool in enumerate(body.get("tools") or []):
        _validate_tool(tool, f"tools[{i}]")


def _validate_item(item: Any, where: str) -> None:
    expect(isinstance(item, dict), f"{where} must be an object", where)
    kind = item.get("type", "message")
    expect(isinstance(kind, str), f"{where}.type must be a string", where)
    if kind == "message":
        expect(
            isinstance(item.get("role"), str) and item["role"] in _ROLES,
            f"{where}.role must be one of {sorted(_ROLES)}",
            where,
        )
        _validate_content(item.get("content"), where)
    elif kind in ("function_call", "custom_tool_call"):
        expect(
            isinstance(item.get("name"), str) and isinstance(item.get("call_id"), str),
            f"{where} needs string 'name' and 'call_id'",
            where,
        )
        field = "arguments" if kind == "function_call" else "input"
        expect(isinstance(item.get(field), str), f"{where}.{field} must be a string", where)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        expect(isinstance(item.get("call_id"), str), f"{where}.call_id must be a string", where)
        _validate_content(item.get("output"), where)
    elif kind == "reasoning":
        for key in ("summary", "content"):
            expect(
                item.get(key) is None or _is_part_list(item.get(key)),
                f"{where}.{key} must be an array",
                where,
            )


def _validate_content(content: Any, where: str) -> None:
    expect(
        isinstance(content, str) or _is_part_list(content),
        f"{where} content must be a string or an array of parts",
        where,
    )


def _is_part_list(v: Any) -> bool:
    return isinstance(v, list) and all(
        isinstance(p, dict) and isinstance(p.get("type"), str) and isinstance(p.get("text", ""), str)
        for p in v
    )


def _validate_tool(tool: Any, where: str) -> None:
    expect(
        isinstance(tool, dict) and isinstance(tool.get("type"), str),
        f"{where} must be an object with a type",
        where,
    )
    if tool["type"] in ("function", "custom"):
        expect(
            isinstance(tool.get("name"), str) and tool["name"] != "", f"{where}.name must be a string", where
        )
        check_optional(tool, "parameters", lambda v: isinstance(v, dict), "an object")
        check_optional(tool, "description", lambda v: isinstance(v, str), "a string")
    elif tool["type"] == "namespace":
        expect(
            isinstance(tool.get("name"), str) and isinstance(tool.get("tools"), list),
            f"{where} needs a string 'name' and a 'tools' array",
            where,
        )
        for j, member in enumerate(tool["tools"]):
            expect(
                isinstance(member, dict) and member.get("type") in ("function", "custom"),
                f"{where}.tools[{j}] must be a function or custom tool",
                where,
            )
            _validate_tool(member, f"{where}.tools[{j}]")


# --------------------------------------------------------------------------- tools


@dataclass(frozen=True)
class ToolRef:
    name: str
    namespace: str | None
    custom: bool


class ToolNames:
    """Maps the flat function names the engine sees back to Responses tool identities."""

    def __init__(self, refs: dict[str, ToolRef]) -> None:
        self._refs = refs

    @classmethod
    def from_request(cls, tools: Any) -> ToolNames:
        refs: dict[str, ToolRef] = {}
        for tool in tools if isinstance(tools, list) else []:
            if not isinstance(tool, dict):
                continue
            if tool.get("type") in ("function", "custom"):
                refs[tool.get("name", "")] = ToolRef(tool.get("name", ""), None, tool["type"] == "custom")
            elif tool.get("type") == "namespace":
                ns = tool.get("name", "")
                for m in tool.get("tools") or []:
                    if isinstance(m, dict):
                        refs[flat_name(ns, m.get("name", ""))] = ToolRef(
                            m.get("name", ""), ns, m.get("type") == "custom"
                        )
        return cls(refs)

    def lookup(self, flat: str) -> ToolRef:
        return self._refs.get(flat) or ToolRef(flat, None, False)


def flat_name(namespace: str | None, name: str) -> str:
    return f"{namespace}.{name}" if namespace else name


def _chat_tools(tools: list[Any], notes: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in tools:
        if tool["type"] in ("function", "custom"):
            out.append(_chat_tool(tool, None))
        elif tool["type"] == "namespace":
            out.extend(_chat_tool(m, tool["name"]) for m in tool["tools"])
        else:
            notes.append(f"dropped hosted tool type {tool['type']!r}")
    return out


def _chat_tool(tool: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    if tool["type"] == "custom":
        params: Any = {
            "type": "object",
            "properties": {"input": {"type": "string"}},
            "required": ["input"],
            "additionalProperties": False,
        }
    else:
        params = tool.get("parameters") or {"type": "object", "properties": {}}
    fn = {
        "name": flat_name(namespace, tool["name"]),
        "description": tool.get("description") or "",
        "parameters": params,
    }
    return {"type": "function", "function": fn}


def _tool_choice(choice: Any, notes: list[str]) -> Any:
    if isinstance(choice, str):
        return choice if choice in ("auto", "none", "required") else "auto"
    kind = choice.get("type")
    if kind in ("function", "custom") and isinstance(choice.get("name"), str):
        name = flat_name(choice.get("namespace"), choice["name"])
        return {"type": "function", "function": {"name": name}}
    if kind == "allowed_tools" and choice.get("mode") in ("auto", "required"):
        notes.append("tool_choice allowed_tools: tool subset not enforced")
        return choice["mode"]
    notes.append(f"tool_choice {kind!r} not supported, using auto")
    return "auto"


# --------------------------------------------------------------------------- request


def to_chat_request(body: Any, *, fold_system: bool = False) -> dict[str, Any]:
    """The chat-completions body for the engine (validates first). `fold_system`: see `_inline.py`."""
    return translate_request(body, fold_system=fold_system).chat


def translate_request(body: Any, *, fold_system: bool = False) -> ChatTranslation:
    validate_request(body)
    return _translate(body, fold_system)


@boundary
def _translate(body: dict[str, Any], fold_system: bool = False) -> ChatTranslation:
    notes: list[str] = []
    inp = body["input"]
    items = [{"type": "message", "role": "user", "content": inp}] if isinstance(inp, str) else inp
    messages = _History(notes).build(items)
    instructions = body.get("instructions") or ""
    chat: dict[str, Any] = {
        "model": body.get("model") or "",
        "messages": place_system([instructions], messages, fold=fold_system),
    }
    tools = _chat_tools(body.get("tools") or [], notes)
    if tools:
        chat["tools"] = tools
        chat["tool_choice"] = _tool_choice(body.get("tool_choice") or "auto", notes)
        chat["parallel_tool_calls"] = body.get("parallel_tool_calls", True)
    _sampling(body, chat, notes)
    return ChatTranslation(chat, tuple(notes))


def _sampling(body: dict[str, Any], chat: dict[str, Any], notes: list[str]) -> None:
    for src, dst in (("temperature", "temperature"), ("top_p", "top_p"), ("max_output_tokens", "max_tokens")):
        if body.get(src) is not None:
            chat[dst] = body[src]
    if body.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    if (body.get("reasoning") or {}).get("effort") == "none":
        chat["chat_template_kwargs"] = {"enable_thinking": False}
    fmt = (body.get("text") or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        chat["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": fmt.get("name") or "output",
                "schema": fmt.get("schema") or {},
                "strict": bool(fmt.get("strict")),
            },
        }
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        chat["response_format"] = {"type": "json_object"}


class _History:
    """Folds Responses input items into chat messages (one assistant message per model turn)."""

    def __init__(self, notes: list[str]) -> None:
        self.notes = notes
        self.out: list[dict[str, Any]] = []
        self.turn: dict[str, Any] | None = None  # the assistant message being assembled

    def build(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for item in items:
            kind = item.get("type", "message")
            handler = getattr(self, "_" + kind) if isinstance(kind, str) and kind in _ITEM_KINDS else None
            if handler is None:
                self.notes.append(f"dropped input item type {kind!r}")
            else:
                handler(item)
        return self.out

    def _assistant(self, *, fresh_if: tuple[str, ...]) -> dict[str, Any]:
        if self.turn is None or any(self.turn.get(k) for k in fresh_if):
            self.turn = {"role": "assistant", "content": ""}
            self.out.append(self.turn)
        return self.turn

    def _message(self, item: dict[str, Any]) -> None:
        role = _ROLES[item["role"]]
        content = _content(item["content"], self.notes)
        if role == "assistant":
            turn = self._assistant(fresh_if=("content", "tool_calls"))
            turn["content"] = content if isinstance(content, str) else _plain(content)
            return
        self.turn = None
        self.out.append({"role": role, "content": content})

    def _reasoning(self, item: dict[str, Any]) -> None:
        turn = self._assistant(fresh_if=("content", "tool_calls", "reasoning"))
        text = _reasoning_text(item)
        if text:
            turn["reasoning"] = text

    def _function_call(self, item: dict[str, Any]) -> None:
        self._call(item, canonical_arguments(item["arguments"]))

    def _custom_tool_call(self, item: dict[str, Any]) -> None:
        self._call(item, engine_json({"input": item["input"]}))

    def _call(self, item: dict[str, Any], arguments: str) -> None:
        turn = self._assistant(fresh_if=())
        name = flat_name(item.get("namespace"), item["name"])
        call = {"id": item["call_id"], "type": "function", "function": {"name": name, "arguments": arguments}}
        turn.setdefault("tool_calls", []).append(call)

    def _function_call_output(self, item: dict[str, Any]) -> None:
        self.turn = None
        output = _content(item["output"], self.notes)
        self.out.append({"role": "tool", "tool_call_id": item["call_id"], "content": output})

    _custom_tool_call_output = _function_call_output


_ITEM_KINDS = frozenset(
    (
        "message",
        "reasoning",
        "function_call",
        "custom_tool_call",
        "function_call_output",
        "custom_tool_call_output",
    )
)


def _content(content: Any, notes: list[str]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for p in content:
        kind = p["type"]
        if kind in _TEXT_PARTS:
            parts.append({"type": "text", "text": p.get("text", "")})
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(p.get("refusal", ""))})
        elif kind == "input_image":
            # never dropped: the model would see a prompt without the image the harness sent
            expect(
                isinstance(p.get("image_url"), str),
                "input_image needs an image_url (a base64 data URL); file_id is not supported",
                "input",
            )
            parts.append(image_part(p["image_url"]))
        else:
            notes.append(f"dropped content part {kind!r}")
    return join_content(parts, "\n")


def _plain(parts: list[dict[str, Any]]) -> str:
    return "\n".join(p["text"] for p in parts if p["type"] == "text")


def _reasoning_text(item: dict[str, Any]) -> str:
    texts = [p.get("text", "") for p in item.get("content") or [] if p.get("type") in _TEXT_PARTS]
    if texts:
        return "".join(texts)
    enc = item.get("encrypted_content")
    if isinstance(enc, str) and enc.startswith(REASONING_MARKER):
        return enc[len(REASONING_MARKER) :]
    return "\n\n".join(p.get("text", "") for p in item.get("summary") or [])
