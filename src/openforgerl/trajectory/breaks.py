"""Why a call did not continue any chain of its agent (a product metric: merge breaks per harness)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, TypeVar

from openforgerl.trajectory.images import image_pruned, shares_image
from openforgerl.trajectory.tokens import common_prefix_len


class ChainView(Protocol):
    """What a break is judged against (`chains.Chain` is one): named here so this module, which
    `chains` imports, does not import it back."""

    @property
    def tokens(self) -> Sequence[int]: ...

    @property
    def image_keys(self) -> Sequence[str]: ...

    def is_sampled_at(self, position: int) -> bool: ...


C = TypeVar("C", bound=ChainView)


class BreakCause(StrEnum):
    SUB_AGENT = "sub_agent"  # first call of an agent other than the main one
    COMPACTION = "compaction"  # prompt much shorter than the chain, same beginning
    PREFIX_MISMATCH = "prefix_mismatch"  # history re-serialized / moved / rewritten
    NEW_CONTEXT = "new_context"  # shares (almost) nothing with the agent's chains
    REWIND = "rewind"  # prompt is a strict prefix of the chain: retry, parallel call, or undo
    LENGTH = "length"  # would overflow max_response_len (overflow policy ``split``)
    IMAGE_PRUNED = "image_pruned"  # an image of the chain was dropped (or replaced) from the prompt


class ExcludeCause(StrEnum):
    SIDE_CALL = "side_call"  # title generation, warm-up: never trained
    ERROR = "error"  # the call failed (client disconnect, refused request)
    EMPTY = "empty"  # no sampled tokens, or no prompt ids recorded
    BAD_LOGPROBS = "bad_logprobs"  # logprobs missing or not one per sampled token


@dataclass(frozen=True, slots=True)
class BreakEvent:
    """One chain start that was not the main agent's first call."""

    call_index: int
    agent: str | None
    cause: BreakCause
    prompt_len: int
    chain_len: int
    common_prefix: int
    at_sampled: bool
    """The divergence falls on a token the model sampled (the harness re-serialized model output)."""

    @property
    def label(self) -> str:
        if self.cause is BreakCause.PREFIX_MISMATCH:
            return f"{self.cause}:{'sampled' if self.at_sampled else 'context'}"
        return str(self.cause)


def closest_chain(prompt: Sequence[int], chains: Sequence[C]) -> tuple[C, int]:
    """The chain sharing the longest prefix with ``prompt`` (most recent first; a chain no longer
    than the best prefix so far cannot beat it and is not compared)."""
    best, best_cpl = chains[-1], common_prefix_len(prompt, chains[-1].tokens)
    for chain in reversed(chains[:-1]):
        if len(chain.tokens) > best_cpl:
            cpl = common_prefix_len(prompt, chain.tokens)
            if cpl > best_cpl:
                best, best_cpl = chain, cpl
    return best, best_cpl


def classify_break(
    prompt: Sequence[int],
    chain: ChainView,
    cpl: int,
    *,
    compaction_ratio: float,
    related_prefix_tokens: int,
    image_keys: Sequence[str] = (),
) -> tuple[BreakCause, bool]:
    """Cause, and whether the divergence (at ``cpl``) hit a token ``chain``'s model sampled.

    ``image_pruned`` wins over the token causes when an image of the chain is missing from the call
    (``image_keys``: the call's image hashes) and the call still belongs to the chain's context (a long
    common prefix, or a shared image), unless the prompt is a plain rewind (a prefix of the chain).
    """
    at_sampled = chain.is_sampled_at(cpl)
    if _pruned(chain, image_keys, cpl, len(prompt), related_prefix_tokens):
        return BreakCause.IMAGE_PRUNED, at_sampled
    if cpl < related_prefix_tokens:
        return BreakCause.NEW_CONTEXT, at_sampled
    if cpl == len(prompt):
        return BreakCause.REWIND, at_sampled
    if len(prompt) < compaction_ratio * len(chain.tokens):
        return BreakCause.COMPACTION, at_sampled
    return BreakCause.PREFIX_MISMATCH, at_sampled


def _pruned(chain: ChainView, keys: Sequence[str], cpl: int, prompt_len: int, related: int) -> bool:
    if cpl == prompt_len or not image_pruned(chain.image_keys, keys):
        return False
    return cpl >= related or shares_image(chain.image_keys, keys)
