"""Batching samples for a causal LM and computing token logprobs (the torch side of the trainer).

A `Sample` is prompt_ids + response_ids; the model scores every response position from the
concatenation. Logprobs are raw log-softmax of the logits (what the local engine and vLLM's default
`raw_logprobs` report), so the importance ratio against the recorded rollout logprobs is 1 at step 0.

A vision-language model is scored one sample at a time (`vision_response_logprobs`): each sample has
its own images, grids and M-RoPE positions, computed by the engine's own `vlm_logprobs`, and the rows
are padded back to the batch's [B, R] shape.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from openforgerl.records import Sample


@dataclass
class TokenBatch:
    """Right-padded [B, L] inputs plus response-aligned [B, R] tensors."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    response_start: torch.Tensor  # [B] index of the first response token in input_ids
    response_mask: torch.Tensor  # [B, R] float
    old_logprobs: torch.Tensor  # [B, R] recorded at sampling time
    rollout_ids: list[str]

    def to(self, device: torch.device) -> TokenBatch:
        return TokenBatch(
            self.input_ids.to(device),
            self.attention_mask.to(device),
            self.response_start.to(device),
            self.response_mask.to(device),
            self.old_logprobs.to(device),
            self.rollout_ids,
        )


def collate(samples: Sequence[Sample], pad_id: int = 0) -> TokenBatch:
    lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
    width = max(lengths)
    resp_width = max(len(s.response_ids) for s in samples)
    n = len(samples)
    input_ids = torch.full((n, width), pad_id, dtype=torch.long)
    attention = torch.zeros((n, width), dtype=torch.long)
    mask = torch.zeros((n, resp_width))
    old = torch.zeros((n, resp_width))
    for i, s in enumerate(samples):
        seq = s.prompt_ids + s.response_ids
        input_ids[i, : len(seq)] = torch.tensor(seq)
        attention[i, : len(seq)] = 1
        mask[i, : len(s.response_ids)] = torch.tensor(s.response_mask, dtype=torch.float)
        old[i, : len(s.response_ids)] = torch.tensor(s.response_logprobs, dtype=torch.float)
    starts = torch.tensor([len(s.prompt_ids) for s in samples])
    return TokenBatch(input_ids, attention, starts, mask, old, [s.rollout_id for s in samples])


def response_logprobs(model: torch.nn.Module, batch: TokenBatch) -> torch.Tensor:
    """[B, R] logprob of each response token under `model` (0 beyond each row's response)."""
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits.float()
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    targets = batch.input_ids[:, 1:]
    token_logp = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # [B, L-1]: logp of token t+1
    width = batch.response_mask.shape[1]
    idx = (batch.response_start[:, None] - 1 + torch.arange(width, device=token_logp.device)[None, :]).clamp(
        max=token_logp.shape[1] - 1
    )
    return token_logp.gather(1, idx)


VisionInputs = Callable[[Sample], Any]
"""A sample -> its `ProcessedImages` (pixel_values, image_grid_thw) or None (`train/vision.py`)."""


def vision_response_logprobs(
    model: torch.nn.Module, samples: Sequence[Sample], vision: VisionInputs, width: int
) -> torch.Tensor:
    """[B, width] logprobs of each sample's response under a vision-language `model`, with its pixels."""
    from openforgerl.engines.local.vlm import vlm_logprobs

    device = next(model.parameters()).device
    rows = []
    for s in samples:
        images = vision(s)
        pixels = images.pixel_values.to(device) if images is not None else None
        grid = images.image_grid_thw.to(device) if images is not None else None
        lp = vlm_logprobs(model, s.prompt_ids, s.response_ids, pixels, grid)
        rows.append(torch.nn.functional.pad(lp, (0, width - lp.shape[0])))
    return torch.stack(rows)
