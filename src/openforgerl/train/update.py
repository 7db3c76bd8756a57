"""One optimisation step of GRPO on reconstructed samples (torch; no I/O).

The batch's per-token weights are computed over the whole step (every rollout's trained tokens sum to
1 / num_rollouts), then the step is split into micro-batches whose gradients accumulate, so the
result does not depend on the micro-batch size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from openforgerl.records import Sample
from openforgerl.train.grpo import clipped_policy_loss, k3_kl, per_rollout_token_weights
from openforgerl.train.policy import collate, response_logprobs


@dataclass(frozen=True)
class UpdateSettings:
    clip_low: float = 0.2
    clip_high: float = 0.28
    kl_coef: float = 0.0
    micro_batch: int = 16
    max_grad_norm: float = 1.0


@dataclass(frozen=True)
class UpdateStats:
    loss: float
    grad_norm: float
    clip_frac: float
    kl: float
    trained_tokens: int
    samples: int


def trainable_samples(samples: Sequence[Sample], advantages: Mapping[str, float]) -> list[Sample]:
    """Only samples of rollouts that got an advantage (valid, in-batch) and have a trained token."""
    return [s for s in samples if s.rollout_id in advantages and any(s.response_mask)]


def grpo_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    samples: Sequence[Sample],
    advantages: Mapping[str, float],
    settings: UpdateSettings,
    *,
    ref_model: torch.nn.Module | None = None,
    pad_id: int = 0,
) -> UpdateStats:
    rows = trainable_samples(samples, advantages)
    if not rows:
        return UpdateStats(0.0, 0.0, 0.0, 0.0, 0, 0)
    device = next(model.parameters()).device
    full_mask = collate(rows, pad_id).response_mask
    weights = per_rollout_token_weights([s.rollout_id for s in rows], full_mask).to(device)
    model.train()
    optimizer.zero_grad(set_to_none=True)
    total_loss = clip_sum = kl_sum = 0.0
    for start in range(0, len(rows), settings.micro_batch):
        part = rows[start : start + settings.micro_batch]
        batch = collate(part, pad_id).to(device)
        w = weights[start : start + len(part), : batch.response_mask.shape[1]]
        adv = torch.tensor([advantages[s.rollout_id] for s in part], device=device)[:, None]
        adv = adv.expand_as(batch.response_mask)
        logp = response_logprobs(model, batch)
        loss, stats = clipped_policy_loss(
            logp, batch.old_logprobs, adv, batch.response_mask, w,
            clip_low=settings.clip_low, clip_high=settings.clip_high,
        )
        if ref_model is not None and settings.kl_coef > 0:
            with torch.no_grad():
                ref_logp = response_logprobs(ref_model, batch)
            kl = (k3_kl(logp, ref_logp) * batch.response_mask * w).sum()
            loss = loss + settings.kl_coef * kl
            kl_sum += float(kl)
        loss.backward()
        total_loss += float(loss.detach())
        clip_sum += stats["clip_frac"] * len(part)
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), settings.max_grad_norm)
    optimizer.step()
    model.eval()
    return UpdateStats(
        loss=total_loss,
        grad_norm=float(grad_norm),
        clip_frac=clip_sum / len(rows),
        kl=kl_sum,
        trained_tokens=int(full_mask.sum()),
        samples=len(rows),
    )
