"""The trace records a grader receives (messages, tool dispatches, media loads) and what it returns."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from .message import Message


def _now() -> str:
    return datetime.now(UTC).isoformat()


class TokenUsage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0


class DimensionScores(BaseModel):
    """A grader's result; the task score is `scoring.compute_task_score` of it (safety is a multiplier)."""

    completion: float = 0.0
    robustness: float = 0.0
    communication: float = 0.0
    safety: float = 1.0
    efficiency_turns: int = 0
    efficiency_tokens: int = 0
    efficiency_wall_time_s: float = 0.0


class TraceMessage(BaseModel):
    type: Literal["message"] = "message"
    trace_id: str = ""
    message: Message
    usage: TokenUsage = Field(default_factory=TokenUsage)
    timestamp: str = Field(default_factory=_now)


class ToolDispatch(BaseModel):
    """One tool call the agent made, as the task's service saw it (upstream tool name and argument names)."""

    type: Literal["tool_dispatch"] = "tool_dispatch"
    trace_id: str = ""
    tool_use_id: str = ""
    tool_name: str
    endpoint_url: str = ""
    request_body: dict[str, Any] = Field(default_factory=dict)
    response_status: int = 200
    response_body: Any = None
    latency_ms: float = 0.0
    timestamp: str = Field(default_factory=_now)


class MediaLoad(BaseModel):
    type: Literal["media_load"] = "media_load"
    trace_id: str = ""
    modality: Literal["image", "audio", "video", "document"]
    source_path: str
    mime_type: str
    size_bytes: int
    sha256: str
    status: Literal["loaded", "skipped", "error"] = "loaded"
    note: str = ""
    timestamp: str = Field(default_factory=_now)
