"""The control of the forged-history tests: how the host read a rollout's transcript before it was
built from witnessed turns (`tasks/transcript.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openforgerl.engines.chat_format import parse_output


def last_call_history(calls: Sequence[Any]) -> list[dict[str, Any]]:
    """How the host read the transcript before: the last main call's history as the client sent it, plus
    that call's answer (raw-text assistant turns parsed back into tool calls)."""
    usable = sorted((c for c in calls if not c.side_call and c.error is None), key=lambda c: c.index)
    if not usable:
        return []
    last = usable[-1]
    out: list[dict[str, Any]] = []
    for m in (last.engine_request or last.request).get("messages", []):
        if m.get("role") == "assistant" and not m.get("tool_calls") and isinstance(m.get("content"), str):
            out.append(_answer(m["content"]))
            continue
        msg = {
            "role": m.get("role"),
            "content": m.get("content") if isinstance(m.get("content"), str) else "",
        }
        msg |= {k: m[k] for k in ("tool_calls", "tool_call_id") if m.get(k)}
        out.append(msg)
    if last.response_text is not None:
        out.append(_answer(last.response_text))
    return out


def _answer(text: str) -> dict[str, Any]:
    parsed = parse_output(text)
    msg: dict[str, Any] = {"role": "assistant", "content": parsed.content or ""}
    if parsed.tool_calls:
        msg["tool_calls"] = [
            {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}}
            for t in parsed.tool_calls
        ]
    return msg
