"""`Generation`: what the engine hands back for one finished sequence. A module of its own because the
OpenAI-shaped faces (`responses`, `chat`) read it and the engine (`engine`) uses those faces: both
stand on this, neither on the other.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Generation"]


@dataclass(frozen=True)
class Generation:
    """A finished sequence: exact ids and raw logprobs of every sampled token."""

    token_ids: list[int]
    logprobs: list[float]
    top_logprobs: list[tuple[tuple[int, float], ...]]
    finish_reason: str
    stop_reason: str | int | None
