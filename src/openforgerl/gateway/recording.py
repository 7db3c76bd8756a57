"""What one call leaves in the log: the accumulator a call fills, and its `CallRecord`.

The gateway tees ids/logprobs out of the engine's answer into a `CallTape` as they pass, and turns
it into exactly one `CallRecord` at the end (success or typed error). Harness headers give the
agent tree (Codex `thread-id`/`x-codex-parent-thread-id`, Claude `x-claude-code-agent-id`/
`x-claude-code-parent-agent-id`); side calls (title generation, warm-up) are flagged so they are
never trained.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from openforgerl.engines.base import EngineChunk, EngineResult
from openforgerl.records import CallError, CallErrorKind, CallRecord, WireProtocol

# Harness headers worth keeping (lower-case); secrets (authorization, x-api-key) never are.
RECORDED_HEADERS = (
    "thread-id", "session-id", "x-codex-parent-thread-id", "x-openai-subagent", "x-codex-turn-metadata",
    "x-codex-window-id", "x-client-request-id", "x-claude-code-session-id", "x-claude-code-agent-id",
    "x-claude-code-parent-agent-id", "x-session-id", "x-session-affinity", "traceparent", "user-agent",
    "anthropic-beta", "anthropic-version",
)
_AGENT_HEADERS = ("x-claude-code-agent-id", "thread-id")
_PARENT_HEADERS = ("x-claude-code-parent-agent-id", "x-codex-parent-thread-id")
_SIDE_CALL_PROMPTS = ("title generator", "generate a title", "generate a short title", "summarize this coding conversation")


_RECORDED = frozenset(RECORDED_HEADERS)
_SYSTEM_HEAD = 2048


def harness_headers(headers: Any) -> dict[str, str]:
    """The subset of request headers that describe the harness/agent, keyed in lower case."""
    out = {}
    for name, value in headers.items():
        low = name.lower()
        if low in _RECORDED:
            out[low] = value
    return out


def agent_ids(headers: dict[str, str]) -> tuple[str | None, str | None]:
    agent = next((headers[h] for h in _AGENT_HEADERS if h in headers), None)
    parent = next((headers[h] for h in _PARENT_HEADERS if h in headers), None)
    return agent, parent


def _system_text(protocol: WireProtocol, request: dict[str, Any]) -> str:
    """The leading system/instructions text of a request, flattened."""
    parts: list[Any] = []
    if protocol == WireProtocol.ANTHROPIC:
        parts.append(request.get("system"))
    elif protocol == WireProtocol.RESPONSES:
        parts.append(request.get("instructions"))
        items = request.get("input")
        if isinstance(items, list):
            parts += [i.get("content") for i in items[:2] if isinstance(i, dict) and i.get("role") in
                      ("system", "developer")]
    else:
        msgs = request.get("messages")
        if isinstance(msgs, list):
            parts += [m.get("content") for m in msgs[:2] if isinstance(m, dict) and m.get("role") in
                      ("system", "developer")]
    # Side-call prompts announce themselves in their opening lines; the head of each part is enough
    # (long agent system prompts are not lower-cased whole on every call).
    return " ".join(_flatten(p)[:_SYSTEM_HEAD] for p in parts).lower()


def _flatten(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return " ".join(_flatten(v.get("text", "") if isinstance(v, dict) else v) for v in value)
    return ""


def is_side_call(protocol: WireProtocol, request: dict[str, Any]) -> bool:
    """Title generation / warm-up calls: never part of the trained trajectory."""
    if request.get("generate") is False:
        return True
    if request.get("tools"):
        return False
    fmt = (request.get("output_config") or {}).get("format") if isinstance(request.get("output_config"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return True
    system = _system_text(protocol, request)
    return any(p in system for p in _SIDE_CALL_PROMPTS)


@dataclass
class CallTape:
    """Accumulates what the engine produced for one call, as it streams past."""

    prompt_token_ids: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    engine_id: str | None = None
    first_token_at: float | None = None

    def take_result(self, result: EngineResult) -> None:
        self.prompt_token_ids = result.prompt_token_ids
        self.token_ids = result.token_ids
        self.logprobs = result.logprobs
        self.finish_reason = result.finish_reason
        self.engine_id = result.engine_id
        self.first_token_at = time.time()
        choices = result.body.get("choices") or [{}]
        content = (choices[0].get("message") or {}).get("content")
        if isinstance(content, str):
            self.text.append(content)

    def take_chunk(self, chunk: EngineChunk) -> None:
        if chunk.prompt_token_ids is not None:
            self.prompt_token_ids = chunk.prompt_token_ids
        if chunk.token_ids:
            if self.first_token_at is None:
                self.first_token_at = time.time()
            self.token_ids += chunk.token_ids
            self.logprobs += chunk.logprobs
        if chunk.finish_reason is not None:
            self.finish_reason = chunk.finish_reason
        if chunk.engine_id:
            self.engine_id = chunk.engine_id
        if chunk.content is not None:
            if chunk.content:
                self.text.append(chunk.content)
            return
        for body in chunk.all_bodies():
            choices = body.get("choices")
            if choices:
                content = (choices[0].get("delta") or {}).get("content")
                if content:
                    self.text.append(content)


@dataclass
class CallMeta:
    """Who made the call and how: fixed when the call is admitted."""

    rollout_id: str
    index: int
    protocol: WireProtocol
    request: dict[str, Any]
    engine_request: dict[str, Any] | None
    headers: dict[str, str]
    policy_version: int
    started_at: float
    side_call: bool


def build_record(meta: CallMeta, tape: CallTape, error: CallError | None = None) -> CallRecord:
    """One CallRecord (constructed without re-validation: every field is already typed)."""
    agent, parent = agent_ids(meta.headers)
    return CallRecord.model_construct(
        rollout_id=meta.rollout_id, index=meta.index, protocol=meta.protocol, request=meta.request,
        engine_request=meta.engine_request, response_text="".join(tape.text) if tape.text else None,
        prompt_token_ids=tape.prompt_token_ids, completion_token_ids=tape.token_ids,
        completion_logprobs=tape.logprobs, finish_reason=tape.finish_reason,
        policy_version=meta.policy_version, engine=tape.engine_id, started_at=meta.started_at,
        first_token_at=tape.first_token_at, finished_at=time.time(), error=error,
        side_call=meta.side_call, agent_id=agent, parent_agent_id=parent, headers=meta.headers,
    )


def call_error(kind: CallErrorKind, message: str, status: int | None = None) -> CallError:
    return CallError(kind=kind, message=message[:2000], status=status)
