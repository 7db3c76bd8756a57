"""Chains: calls of one agent merged into one masked token sequence.

A chain holds prompt+response ids as one list. A call continues it when the call's prompt ids start
with those ids exactly; the tokens in between (tool output, template glue) join the response with
mask 0 / logprob 0.0, the sampled ids with mask 1 and their recorded logprobs. Every call lands in
exactly one chain, so every sampled token is trained exactly once.

With images the rule has a second half (``images.py``): the call's image hashes must also start with
the chain's, in order; the chain then holds the call's images (the new ones arrived in the gap).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from openforgerl.records import CallRecord
from openforgerl.trajectory.breaks import BreakEvent
from openforgerl.trajectory.images import ImageDict, call_images, image_keys, images_extend
from openforgerl.trajectory.tokens import extends


@dataclass(slots=True, eq=False)
class Chain:
    """Mutable while calls are merged in; turned into a frozen ``Sample`` at the end."""

    index: int
    agent: str | None
    tokens: list[int]
    prompt_len: int
    mask: list[int]
    logprobs: list[float]
    call_indices: list[int]
    version_min: int
    version_max: int
    started_by: BreakEvent | None = None
    tokens_seen: int = field(default=0)
    images: tuple[ImageDict, ...] = ()
    """The images of ``tokens`` in order (the last merged call's prompt images)."""
    image_keys: tuple[str, ...] = ()
    processor: dict[str, Any] | None = None
    """The image processor identity the engine recorded (last merged call with one)."""

    @classmethod
    def start(cls, index: int, agent: str | None, call: CallRecord, started_by: BreakEvent | None) -> Chain:
        prompt, comp = call.prompt_token_ids, call.completion_token_ids
        images = call_images(call)
        return cls(
            index=index,
            agent=agent,
            tokens=[*prompt, *comp],
            prompt_len=len(prompt),
            mask=[1] * len(comp),
            logprobs=list(call.completion_logprobs),
            call_indices=[call.index],
            version_min=call.policy_version,
            version_max=call.policy_version,
            started_by=started_by,
            tokens_seen=len(prompt) + len(comp),
            images=images,
            image_keys=image_keys(images),
            processor=call_processor(call),
        )

    @property
    def response_len(self) -> int:
        return len(self.tokens) - self.prompt_len

    def merged_response_len(self, call: CallRecord) -> int:
        """Response length after merging ``call`` (which must extend this chain)."""
        return len(call.prompt_token_ids) + len(call.completion_token_ids) - self.prompt_len

    def append(self, call: CallRecord) -> None:
        gap = call.prompt_token_ids[len(self.tokens) :]
        comp = call.completion_token_ids
        self.tokens += gap
        self.tokens += comp
        self.mask += [0] * len(gap)
        self.mask += [1] * len(comp)
        self.logprobs += [0.0] * len(gap)
        self.logprobs += call.completion_logprobs
        self.call_indices.append(call.index)
        self.version_min = min(self.version_min, call.policy_version)
        self.version_max = max(self.version_max, call.policy_version)
        self.tokens_seen += len(call.prompt_token_ids) + len(comp)
        self.images = call_images(call)
        self.image_keys = image_keys(self.images)
        self.processor = call_processor(call) or self.processor

    def is_sampled_at(self, position: int) -> bool:
        offset = position - self.prompt_len
        return 0 <= offset < len(self.mask) and self.mask[offset] == 1


def call_processor(call: object) -> dict[str, Any] | None:
    processor = getattr(call, "processor", None)
    return dict(processor) if isinstance(processor, dict) and processor else None


def continues(chain: Chain, prompt: Sequence[int], keys: Sequence[str]) -> bool:
    """Both halves of the prefix rule: token ids, then image hashes."""
    return extends(prompt, chain.tokens) and images_extend(keys, chain.image_keys)


def find_extended(chains: Sequence[Chain], prompt: Sequence[int], keys: Sequence[str] = ()) -> Chain | None:
    """The chain ``prompt`` (with image hashes ``keys``) continues: the agent's most recent chain if it
    fits, else the longest.

    Lengths are checked before any token compare, so a call costs one C-level slice compare in the
    common (append-only) case.
    """
    if not chains:
        return None
    recent = chains[-1]
    if continues(recent, prompt, keys):
        return recent
    best: Chain | None = None
    for chain in chains[:-1]:
        longer = best is None or len(chain.tokens) > len(best.tokens)
        if longer and continues(chain, prompt, keys):
            best = chain
    return best
