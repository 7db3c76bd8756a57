"""Where system messages go in the chat list the engine templates.

Harnesses put system text in three places: a top-level field (`instructions`, `system`), leading
`system`/`developer` messages (Codex sends two developer items first), and system messages in the
middle of the conversation (Claude Code's mid-conversation-system beta). Policy, shared by both
translators so every protocol renders the same way:

* the top-level text and all *leading* system messages become one first system message, parts
  joined with a blank line (chat templates put the tool block into the first system message);
* a system message in the middle stays where it is, as `role: "system"` (Qwen-style templates
  render it as its own turn, so later calls still extend earlier prompts token for token);
* one that sits between an assistant's tool calls and their results is moved after the results,
  because templates require tool results to follow their call.

`fold=True` is for templates that reject or drop a system message after the first: the text is
appended to the user or tool message before it, or else prepended to the next user message (a new
user message if none follows). Only the end of the conversation changes, so calls stay prefix-stable.
"""

from __future__ import annotations

from typing import Any


def place_system(
    top: list[str], messages: list[dict[str, Any]], *, fold: bool = False
) -> list[dict[str, Any]]:
    lead = 0
    while lead < len(messages) and messages[lead]["role"] == "system":
        lead += 1
    texts = [t for t in top if t] + [_text(m) for m in messages[:lead] if _text(m)]
    head = [{"role": "system", "content": "\n\n".join(texts)}] if texts else []
    rest = _after_tool_results(messages[lead:])
    return head + (_fold(rest) if fold else rest)


def _fold(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    pending: list[str] = []  # system text seen right after an assistant turn
    for m in messages:
        if m["role"] == "system":
            if out and out[-1]["role"] in ("user", "tool") and not pending:
                out[-1] = {**out[-1], "content": _join_text(out[-1]["content"], _text(m), at_end=True)}
            else:
                pending.append(_text(m))
            continue
        if pending:
            text, pending = "\n\n".join(pending), []
            if m["role"] == "user":
                m = {**m, "content": _join_text(m["content"], text, at_end=False)}
            else:
                out.append({"role": "user", "content": text})
        out.append(m)
    if pending:
        out.append({"role": "user", "content": "\n\n".join(pending)})
    return out


def _join_text(content: Any, text: str, *, at_end: bool) -> Any:
    if isinstance(content, str):
        return "\n\n".join([content, text] if at_end else [text, content]) if content else text
    part = {"type": "text", "text": text}
    return [*content, part] if at_end else [part, *content]


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if p.get("type") == "text")


def _after_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    awaiting = False  # inside the run between an assistant's tool calls and its last result
    for m in messages:
        role = m["role"]
        if role == "system" and awaiting:
            held.append(m)
            continue
        if role != "tool" and held:
            out.extend(held)
            held.clear()
        out.append(m)
        awaiting = (role == "assistant" and bool(m.get("tool_calls"))) or (role == "tool" and awaiting)
    return out + held
