"""One conversation message: a role and content blocks; `.text` joins its text blocks."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from .content import ContentBlock, TextBlock


class Message(BaseModel):
    role: Literal["user", "assistant", "system"]
    content: list[ContentBlock] = Field(default_factory=list)
    reasoning_content: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _text_content(cls, values: Any) -> Any:
        # graders (and their tests) build messages with content="..."
        if isinstance(values, dict) and isinstance(values.get("content"), str):
            values = {**values, "content": [TextBlock(text=values["content"]).model_dump()]}
        return values

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))
