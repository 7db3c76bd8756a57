"""`AbstractGrader` (what task graders subclass) with the helpers graders call, and `load_peer_grader`.

Behaviour follows upstream's documented semantics (the numbers graders get from the helpers must be the
same as upstream's for their scores to be), implemented here for openforgerl.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from ..models.content import ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock
from ..models.task import TaskDefinition
from ..models.trace import DimensionScores, MediaLoad, ToolDispatch, TraceMessage

# Where peer graders live: the importer copies them to tests/claw_eval/peers/<task id>/grader.py and the
# verifier names that folder here (upstream's default is its repository's tasks/ folder).
PEERS_ENV = "OPENFORGERL_CLAW_EVAL_PEERS"

# The services' audit as JSON: service name -> its audit document (calls, actions by key).
AuditData = dict[str, dict[str, Any]]


def load_peer_grader(task_id: str, tasks_dir: str | Path | None = None) -> type:
    """The grader class of another task (English variants subclass their Chinese original's grader)."""
    folder = Path(tasks_dir if tasks_dir is not None else os.environ.get(PEERS_ENV, "peers"))
    path = folder / task_id / "grader.py"
    if not path.is_file():
        raise FileNotFoundError(f"no peer grader {path} for task_id={task_id!r}")
    spec = importlib.util.spec_from_file_location(f"peer_grader_{task_id}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load peer grader {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = [
        c
        for _, c in inspect.getmembers(module, inspect.isclass)
        if issubclass(c, AbstractGrader) and c is not AbstractGrader
    ]
    if not found:
        raise ValueError(f"no AbstractGrader subclass in {path}")
    return found[0]


class AbstractGrader(ABC):
    @abstractmethod
    def grade(
        self,
        messages: list[TraceMessage],
        dispatches: list[ToolDispatch],
        task: TaskDefinition,
        audit_data: AuditData | None = None,
        judge: Any | None = None,
        media_events: list[MediaLoad] | None = None,
        env_snapshot: dict[str, Any] | None = None,
    ) -> DimensionScores: ...

    # ---- the conversation

    @staticmethod
    def _get_final_assistant_text(messages: list[TraceMessage]) -> str:
        said = [m.message.text for m in messages if m.message.role == "assistant"]
        return said[-1] if said else ""

    @staticmethod
    def _get_all_assistant_text(messages: list[TraceMessage]) -> str:
        return "\n".join(m.message.text for m in messages if m.message.role == "assistant")

    @staticmethod
    def format_conversation(messages: list[TraceMessage]) -> str:
        """`[ROLE]: text` per message with text (what upstream's judges read as the conversation)."""
        return "\n".join(f"[{m.message.role.upper()}]: {m.message.text}" for m in messages if m.message.text)

    @staticmethod
    def format_conversation_detailed(
        messages: list[TraceMessage],
        *,
        include_user_text: bool = True,
        include_assistant_text: bool = True,
        include_reasoning: bool = False,
        include_tool_use: bool = False,
        include_tool_result: bool = False,
        include_image: bool = False,
    ) -> str:
        lines: list[str] = []
        for m in messages:
            role = m.message.role
            if include_reasoning and role == "assistant" and m.message.reasoning_content:
                lines.append(f"[ASSISTANT THINKING]: {m.message.reasoning_content}")
            for block in m.message.content:
                if isinstance(block, TextBlock) and block.text.strip():
                    if (role == "user" and include_user_text) or (
                        role == "assistant" and include_assistant_text
                    ):
                        lines.append(f"[{role.upper()}]: {block.text}")
                elif isinstance(block, ToolUseBlock) and include_tool_use and role == "assistant":
                    lines.append(f"[TOOL CALL]: {block.name}({json.dumps(block.input, ensure_ascii=False)})")
                elif isinstance(block, ToolResultBlock) and include_tool_result:
                    text = "\n".join(t.text for t in block.content)
                    lines.append(f"[{'TOOL RESULT ERROR' if block.is_error else 'TOOL RESULT'}]: {text}")
                elif isinstance(block, ImageBlock) and include_image:
                    lines.append(f"[IMAGE]: {block.source_path or 'inline image'} ({block.mime_type})")
        return "\n".join(lines)

    # ---- tool calls

    @staticmethod
    def compute_robustness(dispatches: list[ToolDispatch]) -> float:
        """1.0 for a run without failed calls; else the share of failing tools later called successfully,
        floored at min(share of successful calls, 0.5) (working around errors also counts)."""
        failed = [d for d in dispatches if d.response_status >= 400]
        if not failed:
            return 1.0
        failing_tools = {d.tool_name for d in failed}
        seen_failing: set[str] = set()
        recovered: set[str] = set()
        for d in dispatches:
            if d.response_status >= 400:
                seen_failing.add(d.tool_name)
            elif d.tool_name in seen_failing:
                recovered.add(d.tool_name)
        floor = round(min((len(dispatches) - len(failed)) / len(dispatches), 0.5), 2)
        return round(max(len(recovered) / len(failing_tools), floor), 2)

    @staticmethod
    def compute_communication_substance(
        final_text: str, tool_entities: list[str], format_score: float
    ) -> float:
        """Half for formatting, half for naming the entities the tools returned (full at 40% of them)."""
        if not tool_entities:
            return min(format_score, 0.7)
        rate = sum(1 for e in tool_entities if e in final_text) / len(tool_entities)
        return round(min(0.5 * min(rate / 0.4, 1.0) + 0.5 * format_score, 1.0), 2)

    # ---- the services' audit (server-side: the agent cannot forge it)

    @staticmethod
    def get_service_actions(
        audit_data: AuditData | None, service: str, action_key: str
    ) -> list[dict[str, Any]]:
        found = (audit_data or {}).get(service, {}).get(action_key, [])
        return found if isinstance(found, list) else []

    @staticmethod
    def get_audit_calls(audit_data: AuditData | None, service: str) -> list[dict[str, Any]]:
        return list((audit_data or {}).get(service, {}).get("calls", []))

    @staticmethod
    def summarize_actions(audit_data: AuditData | None) -> str:
        if not audit_data:
            return "No audit data available."
        parts = [
            f"{name}: {len(calls)} calls — {', '.join(c.get('endpoint', '?') for c in calls)}"
            for name, data in audit_data.items()
            if (calls := data.get("calls", []))
        ]
        return "\n".join(parts) if parts else "No actions recorded."

    @staticmethod
    def format_audit_artifacts(
        audit_data: AuditData | None,
        *,
        services: list[str] | None = None,
        endpoints: list[str] | None = None,
        include_request: bool = True,
        include_response: bool = False,
        response_status_only: bool = False,
    ) -> str:
        if not audit_data:
            return "No audit data available."
        sections = []
        for name, data in audit_data.items():
            if services is not None and name not in services:
                continue
            for call in data.get("calls", []):
                endpoint = call.get("endpoint", "")
                if endpoints is not None and endpoint not in endpoints:
                    continue
                parts = [f"[{name}] {endpoint}"]
                if include_request:
                    parts.append(f"  Request: {json.dumps(call.get('request_body', {}), ensure_ascii=False)}")
                if include_response:
                    response = call.get("response_body", {})
                    if response_status_only and isinstance(response, dict):
                        response = {k: response[k] for k in ("status", "error") if k in response}
                    parts.append(f"  Response: {json.dumps(response, ensure_ascii=False)}")
                sections.append("\n".join(parts))
        return "\n\n".join(sections) if sections else "No matching artifacts."
