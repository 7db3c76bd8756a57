"""Sampling parameters and the batched token sampler of the local engine.

Logprobs are *raw*: the log-softmax of the model's logits before temperature, top-p or top-k, which is
vLLM's default (`--logprobs-mode raw_logprobs`). The trainer computes the same quantity from the same
weights, so importance ratios start at exactly 1 for greedy/T=1 sampling.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class SamplingParams:
    """What one request asks of the sampler (vLLM names and defaults)."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 or -1: off
    seed: int | None = None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    min_tokens: int = 0
    logprobs: int | None = None  # None: none; k >= 0: sampled token + k alternatives
    include_stop_str_in_output: bool = False


@dataclass(frozen=True)
class TokenSample:
    """One sampled token with its raw logprob and the requested top alternatives."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = field(default_factory=tuple)


def make_generator(seed: int | None) -> torch.Generator | None:
    """A per-request generator so a seeded request is reproducible whatever it is batched with."""
    if seed is None:
        return None
    gen = torch.Generator()
    gen.manual_seed(int(seed))
    return gen


def _filter_top_k_top_p(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    if top_k and top_k > 0 and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        drop_sorted = (probs.cumsum(-1) - probs) >= top_p  # keep the smallest prefix reaching top_p
        drop = torch.zeros_like(drop_sorted).scatter(0, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def _pick(logits: torch.Tensor, params: SamplingParams, gen: torch.Generator | None) -> int:
    if params.temperature <= 0.0:
        return int(torch.argmax(logits))
    filtered = _filter_top_k_top_p(logits / params.temperature, params.top_k, params.top_p)
    probs = torch.softmax(filtered, dim=-1)
    return int(torch.multinomial(probs, 1, generator=gen))


def sample_rows(
    logits: torch.Tensor,
    params: list[SamplingParams],
    gens: list[torch.Generator | None],
    banned: list[tuple[int, ...]],
) -> list[TokenSample]:
    """Sample one token per row of `logits` [B, V]; `banned` ids are masked (EOS before min_tokens)."""
    logits = logits.float()
    logprobs = torch.log_softmax(logits, dim=-1)
    out = []
    for row, (p, g, ban) in enumerate(zip(params, gens, banned, strict=True)):
        row_logits = logits[row]
        if ban:
            row_logits = row_logits.clone()
            row_logits[list(ban)] = float("-inf")
        tid = _pick(row_logits, p, g)
        top: tuple[tuple[int, float], ...] = ()
        if p.logprobs:
            vals, ids = torch.topk(logprobs[row], p.logprobs)
            top = tuple(zip(ids.tolist(), vals.tolist(), strict=True))
        out.append(TokenSample(tid, float(logprobs[row, tid]), top))
    return out
