"""Fit a chain to the trainer's prompt/response lengths, counting every token cut (never silent)."""

from __future__ import annotations

from dataclasses import dataclass

from openforgerl.trajectory.chains import Chain
from openforgerl.trajectory.options import OverflowPolicy, ReconstructionOptions


@dataclass(frozen=True, slots=True)
class FittedChain:
    """The chain's four aligned sequences after fitting, or ``dropped`` with the counts."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float]
    prompt_tokens_truncated: int = 0
    sampled_tokens_truncated: int = 0
    sampled_tokens_dropped: int = 0
    dropped: bool = False

    @property
    def truncated(self) -> bool:
        return self.prompt_tokens_truncated > 0 or self.sampled_tokens_truncated > 0


def fit_chain(chain: Chain, options: ReconstructionOptions) -> FittedChain:
    prompt = chain.tokens[: chain.prompt_len]
    response = chain.tokens[chain.prompt_len :]
    prompt_over = _excess(len(prompt), options.max_prompt_len)
    response_over = _excess(len(response), options.max_response_len)
    if (prompt_over or response_over) and (options.overflow is OverflowPolicy.DROP or chain.images):
        return FittedChain([], [], [], [], sampled_tokens_dropped=sum(chain.mask), dropped=True)
    if not (prompt_over or response_over):
        return FittedChain(prompt, response, chain.mask, chain.logprobs)
    keep = len(response) - response_over
    return FittedChain(
        prompt_ids=prompt[prompt_over:],
        response_ids=response[:keep],
        response_mask=chain.mask[:keep],
        response_logprobs=chain.logprobs[:keep],
        prompt_tokens_truncated=prompt_over,
        sampled_tokens_truncated=sum(chain.mask[keep:]),
    )


def _excess(length: int, limit: int | None) -> int:
    return max(0, length - limit) if limit is not None else 0
