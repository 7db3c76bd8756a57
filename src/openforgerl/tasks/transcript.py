"""A rollout's transcript, built on the host from the gateway's call log (never from the sandbox).

The gateway records every model call with the chat-completions body it sent to the engine
(`CallRecord.engine_request`, the same shape whatever the harness's wire protocol) and the text the
engine answered. The conversation of the main agent is the history of its last call plus that call's
answer: harnesses send the whole history each turn. Side calls (title generation and the like) and
sub-agents are left out. Two shapes are produced:

- `messages`: `[{role, content, tool_calls?}]` (chat roles; `Evidence.transcript`, Claw-Eval's text
  checks and judge);
- `media_events`: Claw-Eval's `MediaLoad` events (image-QA graders: did an image reach the model?), one per
  distinct image the gateway recorded in the main agent's prompts, in first-seen order;
- `openclaw_events`: QwenClawBench's `grade(transcript, ...)` input, the OpenClaw session events
  (`{"type": "message", "message": {"role": "assistant" | "user" | "toolResult", "content": [...]}}`,
  assistant blocks `{"type": "text"}` / `{"type": "toolCall", "name", "arguments"}`), as upstream's
  graders and `_summarize_transcript` read them.

Everything here is agent-written text: callers cap and delimit it before a judge sees it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["actions_text", "conversation_text", "media_events", "messages_from_calls", "openclaw_events"]


def _text(content: Any) -> str:
    from openforgerl.engines.chat_format import content_to_text

    return content_to_text(content)


def _main_calls(calls: Sequence[Any]) -> list[Any]:
    usable = [c for c in calls if not getattr(c, "side_call", False) and c.error is None
              and isinstance(c.engine_request or c.request, dict)]
    if not usable:
        return []
    roots = [c for c in usable if not c.parent_agent_id]
    pool = roots or usable
    agent = Counter(c.agent_id for c in pool).most_common(1)[0][0]
    return sorted((c for c in pool if c.agent_id == agent), key=lambda c: c.index)


def _answer(text: str) -> dict[str, Any]:
    from openforgerl.engines.chat_format import parse_output

    parsed = parse_output(text)
    msg: dict[str, Any] = {"role": "assistant", "content": parsed.content or ""}
    if parsed.tool_calls:
        msg["tool_calls"] = [{"id": t.id, "type": "function",
                              "function": {"name": t.name, "arguments": t.arguments}} for t in parsed.tool_calls]
    return msg


def messages_from_calls(calls: Iterable[Any]) -> list[dict[str, Any]]:
    """The main agent's conversation: its last call's messages plus the answer to that call."""
    main = _main_calls(list(calls))
    if not main:
        return []
    last = main[-1]
    body = last.engine_request or last.request
    history = [m for m in body.get("messages", []) if isinstance(m, Mapping)]
    out = [_echoed(m, history[i + 1:]) if _verbatim_turn(m) else _plain(m) for i, m in enumerate(history)]
    if last.response_text is not None:
        out.append(_answer(last.response_text))
    return out


def _verbatim_turn(m: Mapping[str, Any]) -> bool:
    """An assistant turn the gateway put back as the model's raw text (`gateway/verbatim.py`): its tool
    calls are markup in the content, no longer structured."""
    return m.get("role") == "assistant" and not m.get("tool_calls") and isinstance(m.get("content"), str)


def _echoed(m: Mapping[str, Any], after: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The raw text parsed as the engine's answer was; each tool call gets the id of the tool result that
    answers it (the harness's id, which the raw text never had), matched by order."""
    msg = _answer(str(m["content"]))
    ids = [str(r.get("tool_call_id")) for r in _results(after) if r.get("tool_call_id")]
    for call, rid in zip(msg.get("tool_calls", []), ids, strict=False):
        call["id"] = rid
    return msg


def _results(after: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    out = []
    for r in after:
        if r.get("role") != "tool":
            break
        out.append(r)
    return out


def media_events(calls: Iterable[Any]) -> list[dict[str, Any]]:
    """Upstream's runner writes a `media_load` event for each attachment it put in the model's input; here
    the gateway's record of what the engine was sent says it (the images' bytes, hashed), whichever way
    the harness delivered them (a read tool's image block, a screenshot). A URL image has no bytes here
    and counts as loaded too: the engine fetched it."""
    seen: dict[str, dict[str, Any]] = {}
    for call in _main_calls(list(calls)):
        for ref in getattr(call, "images", None) or []:
            key = ref.sha256 or str(ref.url)
            seen.setdefault(key, {"modality": "image", "source_path": ref.url or f"sha256:{ref.sha256}",
                                  "mime_type": ref.media_type, "size_bytes": 0, "sha256": ref.sha256,
                                  "status": "loaded", "note": f"call {call.index} of the gateway's call log"})
    return list(seen.values())


def _plain(m: Mapping[str, Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": str(m.get("role", "")), "content": _text(m.get("content"))}
    if m.get("tool_calls"):
        msg["tool_calls"] = list(m["tool_calls"])
    if m.get("tool_call_id"):
        msg["tool_call_id"] = m["tool_call_id"]
    return msg


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def openclaw_events(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages as OpenClaw session events (QwenClawBench graders' `transcript`)."""
    events: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "system":
            continue
        if role == "tool":
            message: dict[str, Any] = {"role": "toolResult", "toolCallId": m.get("tool_call_id", ""),
                                       "content": [{"type": "text", "text": str(m.get("content", ""))}]}
        else:
            blocks: list[dict[str, Any]] = []
            if str(m.get("content", "")):
                blocks.append({"type": "text", "text": str(m.get("content", ""))})
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function", tc) if isinstance(tc, Mapping) else {}
                blocks.append({"type": "toolCall", "id": tc.get("id", "") if isinstance(tc, Mapping) else "",
                               "name": fn.get("name", ""), "arguments": _arguments(fn.get("arguments", {}))})
            message = {"role": "assistant" if role == "assistant" else "user", "content": blocks}
        events.append({"type": "message", "message": message})
    return events


def conversation_text(messages: Sequence[Mapping[str, Any]], *, tools: bool = True) -> str:
    """`[ROLE]: text` lines (Claw-Eval's `format_conversation`), tool calls and results as lines too."""
    lines = []
    for m in messages:
        role = str(m.get("role", "")).upper()
        if role == "SYSTEM":
            continue
        text = str(m.get("content", "") or "")
        if text and (role != "TOOL" or tools):
            lines.append(f"[{role}]: {text}")
        for tc in (m.get("tool_calls") or []) if tools else []:
            fn = tc.get("function", tc) if isinstance(tc, Mapping) else {}
            lines.append(f"[TOOL CALL]: {fn.get('name', '')}({fn.get('arguments', '')})")
    return "\n".join(lines)


def actions_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The agent's tool calls and their results, in order (Claw-Eval's judge "Actions Taken")."""
    lines = []
    for m in messages:
        if m.get("role") == "tool":
            lines.append(f"[TOOL RESULT]: {m.get('content', '')}")
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function", tc) if isinstance(tc, Mapping) else {}
            lines.append(f"[TOOL CALL]: {fn.get('name', '')}({fn.get('arguments', '')})")
    return "\n".join(lines)
