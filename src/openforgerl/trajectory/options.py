"""Knobs of trajectory reconstruction (what the trainer can take, and how to treat what it cannot).

A stage contract of the pure layer (no pydantic here): users set the `reconstruction` section of the one
config schema, and `openforgerl.config.Config.reconstruction_options()` builds this from it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class OverflowPolicy(StrEnum):
    """What to do with a chain longer than the trainer's prompt/response lengths. Always counted.

    - ``truncate``: keep the last ``max_prompt_len`` prompt tokens and the first ``max_response_len``
      response tokens (veRL's own behaviour); sampled tokens cut off are counted as truncated.
    - ``drop``: drop the whole chain; its sampled tokens are counted as dropped.
    - ``split``: never grow a chain past ``max_response_len``; the call that would overflow starts a
      new chain (break cause ``length``), so no sampled token is lost unless one call alone is too
      long (then ``truncate`` applies).

    A chain with images is never truncated (a cut pad run no longer matches its image, and veRL
    refuses multimodal prompts over ``prompt_length``): where ``truncate`` would cut it, it is dropped.
    """

    TRUNCATE = "truncate"
    DROP = "drop"
    SPLIT = "split"


@dataclass(frozen=True, slots=True)
class ReconstructionOptions:
    max_prompt_len: int | None = None
    """Trainer's prompt length (veRL ``rollout.prompt_length``); None = unlimited."""
    max_response_len: int | None = None
    """Trainer's response length (veRL ``rollout.response_length``); None = unlimited."""
    overflow: OverflowPolicy = OverflowPolicy.TRUNCATE
    compaction_ratio: float = 0.5
    """A break is a compaction when the new prompt is shorter than this fraction of the chain."""
    related_prefix_tokens: int = 16
    """A break whose prompt shares fewer leading tokens with every chain of its agent is a new context."""
    image_token_id: int | None = None
    """``<|image_pad|>`` id for the pad-count check when a call records no processor identity
    (``CallRecord.processor["image_token_id"]`` wins); None with no processor: not checked."""
