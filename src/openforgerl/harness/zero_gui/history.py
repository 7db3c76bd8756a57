"""The messages `zero-gui` sends, and the screenshot pruning rule (pure: messages in, messages out).

Screenshots are Chat `image_url` parts with a `data:image/png;base64,...` URL: the first one in the
user message with the instruction, every later one inside the `tool` message answering the action
that produced it.

**Pruning in chunks.** The last `keep` screenshots are always sent. Older ones are not dropped one by
one (that would change the prompt's prefix on every call, one training chain per call): they stay
until `keep + chunk` screenshots have accumulated, then the oldest `chunk` are replaced at once by the
text part `PLACEHOLDER`, leaving `keep`. So a prompt carries between `keep` and `keep + chunk - 1`
screenshots, and between two drops each request's messages extend the previous request's (append-only);
a drop happens every `chunk` screenshots. `chunk = 1` is a plain sliding window.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["PLACEHOLDER", "Pruning", "count_images", "image_part", "observation", "prune", "task_message"]

PLACEHOLDER = "[an older screenshot was removed]"


@dataclass(frozen=True)
class Pruning:
    keep: int = 3
    """Screenshots always kept (the most recent ones)."""
    chunk: int = 3
    """How many old screenshots are dropped at once, when `keep + chunk` have accumulated."""

    def __post_init__(self) -> None:
        if self.keep < 1 or self.chunk < 1:
            raise ValueError("keep and chunk must be >= 1")


def image_part(png: bytes) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()},
    }


def task_message(instruction: str, png: bytes, image_first: bool = False) -> dict[str, Any]:
    """The first user message: the instruction and the first screenshot (in that order, or the image
    first, as `tiny-vl`'s warm-up prompts have it)."""
    parts = [{"type": "text", "text": instruction}, image_part(png)]
    return {"role": "user", "content": parts[::-1] if image_first else parts}


def observation(call_id: str, text: str, png: bytes | None = None) -> dict[str, Any]:
    """The `tool` message answering one call; with the screenshot taken after it, if any."""
    if png is None:
        return {"role": "tool", "tool_call_id": call_id, "content": text}
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "content": [{"type": "text", "text": text}, image_part(png)],
    }


def _is_image(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "image_url"


def count_images(messages: Sequence[dict[str, Any]]) -> int:
    return sum(_is_image(p) for m in messages if isinstance(m.get("content"), list) for p in m["content"])


def prune(messages: list[dict[str, Any]], rule: Pruning) -> list[dict[str, Any]]:
    """`messages` with the oldest screenshots replaced by `PLACEHOLDER` when `keep + chunk` are there
    (leaving `keep`); otherwise `messages` itself. Changed messages are copies; the input is untouched."""
    total = count_images(messages)
    if total < rule.keep + rule.chunk:
        return messages
    drop = total - rule.keep
    out = []
    for m in messages:
        content = m.get("content")
        if drop and isinstance(content, list) and any(_is_image(p) for p in content):
            parts = []
            for p in content:
                if _is_image(p) and drop:
                    drop -= 1
                    p = {"type": "text", "text": PLACEHOLDER}
                parts.append(p)
            m = {**m, "content": parts}
        out.append(m)
    return out
