"""The transcript's tool results of task-service tools, checked against the service's own audit.

The host builds the transcript from turns the gateway vouched for (`tasks/transcript.py`), but a tool
result is text the harness relayed, and the agent holds the rollout's key: for the turn during which it
ended its harness, the one request that answered that turn may be its own. The task's service records
every call it ran (`GET /audit`: tool, arguments, status), so here a result of one of its tools counts
only as the audit has it:

- a call the audit has (same tool, same arguments, each audit entry used once) and ran: kept;
- a call the audit has as failed: the audit's account replaces the text (`FAILED`), so a forged
  "sent" cannot stand for a refusal;
- a call the audit does not have: the text is withheld (`UNAUDITED`).

Replace, never label: a label leaves the forged words for a string check to find. Results of other tools
(the harness's shell, its file tools) have no audit and are left as the host built them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["FAILED", "UNAUDITED", "audited"]

UNAUDITED = "[tool result withheld: the task's service has no record of this call]"
FAILED = "[the task's service recorded this call as failed ({status}): {error}]"


def _canonical(arguments: Any) -> str:
    if isinstance(arguments, str):
        text: str = arguments
        try:
            arguments = json.loads(text) if text.strip() else {}
        except ValueError:
            return text
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def _calls(message: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(tool_call_id, service tool name, canonical arguments) of an assistant turn's tool calls."""
    from openforgerl.env.world_tools import normalize_tool  # harness prefixes: mcp__claw__x, claw.x

    out = []
    for tc in message.get("tool_calls") or []:
        fn = tc.get("function", tc) if isinstance(tc, Mapping) else {}
        out.append(
            (
                str(tc.get("id", "")) if isinstance(tc, Mapping) else "",
                normalize_tool(str(fn.get("name", ""))),
                _canonical(fn.get("arguments", {})),
            )
        )
    return out


def _serviced(tool: str, audited_tools: set[str]) -> bool:
    from openforgerl.env.world_tools import get_tool

    return get_tool(tool) is not None or tool in audited_tools


def audited(
    transcript: Sequence[Mapping[str, Any]], audit: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """`transcript` with each result of a task-service tool as the service's audit has it."""
    tools = {str(c.get("tool", "")) for c in audit}
    calls: dict[str, tuple[str, str]] = {}
    used: set[int] = set()
    out: list[dict[str, Any]] = []
    for m in transcript:
        msg = dict(m)
        if msg.get("role") == "assistant":
            calls |= {cid: (tool, args) for cid, tool, args in _calls(msg)}
        call = calls.get(str(msg.get("tool_call_id", ""))) if msg.get("role") == "tool" else None
        if call is not None and _serviced(call[0], tools):
            seq = next(
                (
                    i
                    for i, c in enumerate(audit)
                    if i not in used
                    and str(c.get("tool", "")) == call[0]
                    and _canonical(c.get("args", {})) == call[1]
                ),
                None,
            )
            if seq is None:
                msg["content"] = UNAUDITED
            else:
                used.add(seq)
                entry = audit[seq]
                status = int(entry.get("status", 200))
                if not entry.get("ok", status < 400):
                    msg["content"] = FAILED.format(status=status, error=str(entry.get("error") or "")[:500])
        out.append(msg)
    return out
