"""One ordered stream of tool events per rollout (pure: records in, events out).

Two sources, merged:
- **the Claw services' audit log** (`GET /audit`, persisted per rollout as `audit.json`, see
  `capture.py`): authoritative for every Claw tool — outcome (`ok`, HTTP status) and injected faults;
- **the recorded model calls**: a call's tool calls and their results are read from the next request's
  history (`wire.py`: chat `tool_calls`/`tool`, Responses `function_call`/`function_call_output`,
  Anthropic `tool_use`/`tool_result`). This is the only source for harness-native tools (shell, file
  edit, web, computer use), and the source for Claw tools when no audit was kept.

With an audit, a call-log event for a Claw tool (direct, MCP-prefixed or through the shell CLI) is not a
second event: it is matched to its audit entry (same tool, same arguments, in order) and lends it the
full result text and the model call that issued it. Events are ordered by time (audit `t`; a native
tool runs between the end of the call that asked for it and the start of the next call).

A call-log result counts as a failure when the protocol flags it (`is_error`), when it reports a
non-zero exit code (`exit code 2`, `Exit code: 1`, `"exit_code": 1`), or when it starts with an error
prefix (`error`, `Error:`, `[error]`, `Traceback`). A tool call whose result never came back (the
rollout ended first) has `ok=None`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from openforgerl.analytics.effects import Effect, classify, claw_tool_from_shell, normalize_tool
from openforgerl.analytics.wire import WireItem, request_items
from openforgerl.env.world_tools import get_tool
from openforgerl.records import CallRecord

__all__ = ["ToolEvent", "args_key", "audit_events", "call_events", "rollout_events"]


@dataclass(frozen=True, slots=True)
class ToolEvent:
    index: int
    tool: str
    """Normalised name (Claw registry name, else the harness's own)."""
    args: Mapping[str, Any]
    effect: Effect
    service: str
    resources: frozenset[str]
    ok: bool | None
    """None: the result never came back."""
    source: str = "call"
    """`audit` or `call`."""
    status: int | None = None
    fault: str | None = None
    """An injected fault's kind (`error`, `timeout`), from the audit."""
    error: str | None = None
    output: str | None = None
    """The full tool result as the model saw it (never truncated here)."""
    call_index: int | None = None
    """The model call that asked for this tool call."""
    raw_name: str = ""
    t: float | None = None
    call_id: str = ""

    @property
    def key(self) -> tuple[str, str]:
        """Identity for loops and repeats: tool + canonical arguments."""
        return self.tool, args_key(self.args)

    @property
    def failed(self) -> bool:
        return self.ok is False or self.fault is not None


def args_key(args: Mapping[str, Any]) -> str:
    return json.dumps(args, sort_keys=True, default=str)


def _event(tool: str, args: Mapping[str, Any], **kw: Any) -> ToolEvent:
    effect, service, resources = classify(tool, args)
    return ToolEvent(
        index=-1, tool=tool, args=dict(args), effect=effect, service=service, resources=resources, **kw
    )


def audit_events(audit: Sequence[Mapping[str, Any]]) -> list[ToolEvent]:
    """The audit's entries (resets left out) as events, in `seq` order."""
    out = []
    for entry in sorted(audit, key=lambda a: a.get("seq", 0)):
        tool = str(entry.get("tool", ""))
        if tool.startswith("__"):
            continue
        raw = entry.get("args")
        args: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        status = entry.get("status")
        ok = bool(entry.get("ok", status == 200))
        out.append(
            _event(
                tool,
                args,
                ok=ok,
                source="audit",
                status=status,
                fault=entry.get("fault"),
                error=entry.get("error"),
                raw_name=tool,
                t=entry.get("t"),
            )
        )
    return _numbered(out)


_EXIT = re.compile(r"(?:exit code|exit_code|exited with code)[\"':\s]*(-?\d+)", re.IGNORECASE)
_ERROR_PREFIX = re.compile(
    r"^\s*(error\b|\[error\]|traceback|tool_use_error|<tool_use_error>)", re.IGNORECASE
)
_STATUS = re.compile(r"^\s*error \((\d{3})\)")


def result_ok(item: WireItem) -> tuple[bool, int | None]:
    """(ok, status) of a tool result as the model saw it (see the module docstring)."""
    status_match = _STATUS.match(item.text)
    status = int(status_match.group(1)) if status_match else None
    if item.is_error:
        return False, status
    exit_match = _EXIT.search(item.text[:400])
    if exit_match:
        return exit_match.group(1) == "0", status
    return not _ERROR_PREFIX.match(item.text), status


@dataclass
class _Seen:
    calls: dict[str, tuple[int | None, WireItem, int]] = field(default_factory=dict)
    results: dict[str, WireItem] = field(default_factory=dict)
    order: int = 0


def _keyed(items: list[WireItem]) -> list[tuple[str, WireItem]]:
    """Items with a stable identity across requests: their id, else name + ordinal; a result without
    an id answers the oldest id-less call still waiting in that request."""
    counts: dict[str, int] = {}
    waiting: list[str] = []
    out = []
    for item in items:
        if item.kind == "call":
            key = item.id
            if not key:
                n = counts.get(item.name, 0)
                counts[item.name] = n + 1
                key = f"{item.name}#{n}"
                waiting.append(key)
            out.append((key, item))
        elif item.kind == "result":
            key = item.id or (waiting.pop(0) if waiting else "")
            if key:
                out.append((key, item))
    return out


def call_events(calls: Sequence[CallRecord]) -> list[ToolEvent]:
    """Tool calls of the model, with their results, as read from the calls' requests."""
    seen: dict[str | None, _Seen] = {}
    times: dict[int, float] = {}
    last_call: dict[str | None, int] = {}
    for call in sorted(calls, key=lambda c: c.index):
        if call.side_call:
            continue
        agent = seen.setdefault(call.agent_id, _Seen())
        for key, item in _keyed(request_items(call.protocol, call.request)):
            if item.kind == "call" and key not in agent.calls:
                agent.calls[key] = (last_call.get(call.agent_id), item, agent.order)
                agent.order += 1
            elif item.kind == "result":
                agent.results.setdefault(key, item)
        last_call[call.agent_id] = call.index
        times[call.index] = call.finished_at or call.started_at
    events = []
    for agent in seen.values():
        for key, (issuer, item, order) in agent.calls.items():
            events.append(_from_wire(key, issuer, item, agent.results.get(key), times, order))
    events.sort(key=lambda e: (e.t or 0.0, e.call_index if e.call_index is not None else -1))
    return _numbered(events)


def _from_wire(
    key: str,
    issuer: int | None,
    item: WireItem,
    result: WireItem | None,
    times: Mapping[int, float],
    order: int,
) -> ToolEvent:
    tool, args = normalize_tool(item.name), dict(item.args)
    if tool.lower() in ("bash", "shell", "exec_command", "local_shell", "run_shell_command"):
        via_cli = claw_tool_from_shell(_command(args))
        if via_cli is not None:
            tool, args = via_cli
    ok, status = result_ok(result) if result is not None else (None, None)
    t = (times.get(issuer, 0.0) if issuer is not None else 0.0) + 1e-6 * (order + 1)
    return _event(
        tool,
        args,
        ok=ok,
        source="call",
        status=status,
        output=result.text if result else None,
        error=result.text if result is not None and not ok else None,
        call_index=issuer,
        raw_name=item.name,
        t=t,
        call_id=key,
    )


def _command(args: Mapping[str, Any]) -> str:
    cmd = args.get("command", args.get("cmd", ""))
    return str(cmd[-1]) if isinstance(cmd, list) and cmd else str(cmd)


def rollout_events(
    calls: Sequence[CallRecord], audit: Sequence[Mapping[str, Any]] | None = None
) -> list[ToolEvent]:
    """The rollout's one ordered stream (see the module docstring for the merge rule)."""
    from_calls = call_events(calls)
    if not audit:
        return from_calls
    from_audit = audit_events(audit)
    claw = [e for e in from_calls if get_tool(e.tool) is not None]
    native = [e for e in from_calls if get_tool(e.tool) is None]
    merged = _enrich(from_audit, claw)
    if merged and all(e.t is None for e in merged):  # an audit without times: calls' order
        return _numbered(merged + native)
    return _numbered(sorted(merged + native, key=lambda e: e.t or 0.0))


def _enrich(audit: list[ToolEvent], claw: list[ToolEvent]) -> list[ToolEvent]:
    """Audit events, each given the output and issuing call of the call-log event it matches: the first
    unmatched entry with the same tool and arguments and the same outcome, else the first with the same
    tool and arguments (a retry inside the harness or a `cmd || retry` leaves two entries for one call)."""
    out = list(audit)
    taken: set[int] = set()
    for c in claw:
        same = [i for i, a in enumerate(out) if i not in taken and a.key == c.key]
        pick = next((i for i in same if out[i].ok == c.ok), same[0] if same else None)
        if pick is None:
            continue
        taken.add(pick)
        out[pick] = replace(
            out[pick], output=c.output, call_index=c.call_index, raw_name=c.raw_name, call_id=c.call_id
        )
    return out


def _numbered(events: list[ToolEvent]) -> list[ToolEvent]:
    return [replace(e, index=i) for i, e in enumerate(events)]
