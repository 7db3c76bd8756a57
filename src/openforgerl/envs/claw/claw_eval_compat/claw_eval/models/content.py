"""Message content blocks (Anthropic Messages shapes), as graders `isinstance`-check them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field


class TextBlock(BaseModel):
    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(BaseModel):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class ToolResultBlock(BaseModel):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: list[TextBlock] = Field(default_factory=list)
    is_error: bool = False


class _Media(BaseModel):
    data: str
    mime_type: str
    source_path: str | None = None


class ImageBlock(_Media):
    type: Literal["image"] = "image"


class AudioBlock(_Media):
    type: Literal["audio"] = "audio"


class VideoBlock(_Media):
    type: Literal["video"] = "video"


ContentBlock = Annotated[
    TextBlock | ToolUseBlock | ToolResultBlock | ImageBlock | AudioBlock | VideoBlock,
    Field(discriminator="type"),
]
