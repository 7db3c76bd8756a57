"""A left-padded KV cache holding every running sequence, so one forward decodes them all.

Why left padding: each sequence's newest token then sits in the last column, a decode step is a single
[B, 1] forward, and the model's own cache append keeps the layout. Rows join after their own prefill
(no padded prefill, so no fully-masked query rows that could poison the cache with NaNs) and leave when
they finish; all-padding columns on the left are trimmed.
"""

from __future__ import annotations

import torch


def _left_pad(t: torch.Tensor, length: int) -> torch.Tensor:
    """Pad dim -2 of a [B, H, L, D] tensor on the left with zeros up to `length`."""
    missing = length - t.shape[-2]
    if missing <= 0:
        return t
    pad = t.new_zeros((*t.shape[:-2], missing, t.shape[-1]))
    return torch.cat([pad, t], dim=-2)


def _pad_mask(mask: torch.Tensor, length: int) -> torch.Tensor:
    missing = length - mask.shape[-1]
    if missing <= 0:
        return mask
    return torch.cat([mask.new_zeros((mask.shape[0], missing)), mask], dim=-1)


class BatchKV:
    """Per-layer keys/values [B, H, L, D] plus the validity mask [B, L]."""

    def __init__(self) -> None:
        self._empty()

    def _empty(self) -> None:
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.mask = torch.zeros((0, 0), dtype=torch.long)

    @property
    def size(self) -> int:
        return self.mask.shape[0]

    def add(self, keys: list[torch.Tensor], values: list[torch.Tensor]) -> None:
        """Append rows (from a prefill forward) to the batch."""
        new_mask = torch.ones((keys[0].shape[0], keys[0].shape[-2]), dtype=torch.long)
        if self.size == 0:
            self.keys, self.values, self.mask = list(keys), list(values), new_mask
            return
        length = max(self.mask.shape[1], new_mask.shape[1])
        # layer by layer in place: a whole new list beside the old one would hold the batch's KV twice
        for i, (k, v) in enumerate(zip(keys, values, strict=True)):
            self.keys[i] = torch.cat([_left_pad(self.keys[i], length), _left_pad(k, length)])
            self.values[i] = torch.cat([_left_pad(self.values[i], length), _left_pad(v, length)])
        self.mask = torch.cat([_pad_mask(self.mask, length), _pad_mask(new_mask, length)])

    def keep(self, rows: list[int]) -> None:
        """Keep only `rows` (in that order) and drop left columns that are padding everywhere."""
        if not rows:
            self._empty()
            return
        idx = torch.tensor(rows, dtype=torch.long)
        mask = self.mask.index_select(0, idx)
        start = int((mask.sum(0) > 0).nonzero()[0]) if mask.numel() else 0
        self.mask = mask[:, start:]
        for i in range(len(self.keys)):  # in place, layer by layer (see `add`)
            self.keys[i] = self.keys[i].index_select(0, idx)[:, :, start:]
            self.values[i] = self.values[i].index_select(0, idx)[:, :, start:]

    def decode_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(attention_mask [B, L+1], position_ids [B, 1]) for the next one-token step."""
        attn = torch.cat([self.mask, torch.ones((self.size, 1), dtype=torch.long)], dim=1)
        return attn, self.mask.sum(1, keepdim=True)

    def release(self) -> None:
        """Drop the references to the layers (a decode step's cache holds them and replaces each as it
        grows; kept here too, every layer would exist twice until `absorb`). The mask stays."""
        self.keys, self.values = [], []

    def absorb(self, keys: list[torch.Tensor], values: list[torch.Tensor]) -> None:
        """Take the grown per-layer tensors after a decode step."""
        self.keys, self.values = keys, values
        self.mask = torch.cat([self.mask, torch.ones((self.size, 1), dtype=torch.long)], dim=1)
