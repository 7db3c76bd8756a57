"""GRPO / PPO-clip maths as pure functions (no I/O, no model code).

Advantages are group-relative over the *valid* rollouts of a group only: a rollout dropped for an
infrastructure fault is excluded from the group's mean and std and never reaches the loss. The loss is
token-level on mask-1 tokens, with the importance ratio taken against the logprobs the engine recorded
at sampling time, and normalised per rollout (each rollout's tokens share one unit of weight, however
many chains it split into).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class RolloutScore:
    rollout_id: str
    group_id: str
    reward: float
    valid: bool = True  # False: infra-dropped, excluded from statistics and loss


def group_advantages(
    scores: Sequence[RolloutScore], *, normalize_std: bool = True, eps: float = 1e-6
) -> dict[str, float]:
    """Advantage per valid rollout: (r - mean_group) / (std_group + eps), invalid ones omitted."""
    groups: dict[str, list[RolloutScore]] = defaultdict(list)
    for s in scores:
        if s.valid:
            groups[s.group_id].append(s)
    out: dict[str, float] = {}
    for members in groups.values():
        rewards = torch.tensor([m.reward for m in members], dtype=torch.float64)
        centered = rewards - rewards.mean()
        if normalize_std and len(members) > 1:
            centered = centered / (rewards.std(unbiased=False) + eps)
        for m, adv in zip(members, centered.tolist(), strict=True):
            out[m.rollout_id] = adv
    return out


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    token_weights: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO-clip surrogate, summed over mask-1 tokens with per-token weights.

    All tensors are [B, T]. `advantages` is broadcast per token, `token_weights` carries the per-rollout
    normalisation (weight / tokens of that rollout), so the loss is a mean over rollouts.
    """
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    w = mask * token_weights
    loss = (per_token * w).sum()
    with torch.no_grad():
        m = mask.bool()
        clip_frac = ((clipped < unclipped) & m).float().sum() / m.sum().clamp(min=1)
        stats = {"clip_frac": float(clip_frac), "ratio_mean": float(ratio[m].mean()) if m.any() else 1.0}
    return loss, stats


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi || ref): exp(ref - pi) - (ref - pi) - 1 (always >= 0)."""
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1.0


def per_rollout_token_weights(rollout_ids: Sequence[str], mask: torch.Tensor) -> torch.Tensor:
    """[B, T] weights so that every rollout's mask-1 tokens sum to 1 / num_rollouts."""
    counts: dict[str, float] = defaultdict(float)
    row_tokens = mask.sum(dim=1)
    for rid, n in zip(rollout_ids, row_tokens.tolist(), strict=True):
        counts[rid] += n
    n_rollouts = max(len(counts), 1)
    scale = torch.tensor(
        [1.0 / (max(counts[rid], 1.0) * n_rollouts) for rid in rollout_ids], dtype=mask.dtype
    )
    return scale[:, None].expand_as(mask)
