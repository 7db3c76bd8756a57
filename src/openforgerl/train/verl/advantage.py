"""Mask-aware GRPO advantage for veRL's classic path: dropped rows stay out of group statistics.

veRL's classic trainer needs exactly one ``AgentLoopOutput`` per row, so an infra-dropped rollout
travels as a placeholder whose ``response_mask`` is all zero. veRL's own ``grpo`` estimator would still
put that row's score (0) into its group's mean and std, i.e. train the group as if the fault were the
model's failure. This estimator takes the same inputs veRL passes to any
registered estimator (``token_level_rewards``, ``response_mask``, ``index`` = uid, ``config``) and
computes each group's mean/std over the rows that have at least one trained token only; dropped rows get
advantage 0 (and their mask is 0, so they never reach the loss). Registered under
``ADV_ESTIMATOR_NAME`` when veRL is importable (``algorithm.adv_estimator=openforgerl_grpo``).

On veRL's V1 path use plain ``grpo``: a drop there is a real drop (the loop returns ``[]``), and V1's
GRPO only calls the estimator for its built-in name when it restricts statistics to final outputs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch

ADV_ESTIMATOR_NAME = "openforgerl_grpo"


def _norm_by_std(config: Any, default: bool) -> bool:
    if config is None:
        return default
    getter = getattr(config, "get", None)
    value = (
        getter("norm_adv_by_std_in_grpo", default)
        if getter
        else getattr(config, "norm_adv_by_std_in_grpo", default)
    )
    return bool(value)


def group_stats(
    scores: torch.Tensor, valid: torch.Tensor, index: Sequence[Any]
) -> dict[Any, tuple[float, float]]:
    """(mean, std) per group over valid rows; a group with one valid row gets (0, 1) like veRL's grpo."""
    members: dict[Any, list[float]] = defaultdict(list)
    for i, key in enumerate(index):
        if bool(valid[i]):
            members[key].append(float(scores[i]))
    stats: dict[Any, tuple[float, float]] = {}
    for key, values in members.items():
        t = torch.tensor(values, dtype=torch.float64)
        stats[key] = (0.0, 1.0) if len(values) == 1 else (float(t.mean()), float(t.std()))
    return stats


def masked_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Sequence[Any],
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    **_: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """veRL estimator signature; returns (advantages, returns), both [B, R], zero on dropped rows."""
    norm = _norm_by_std(config, norm_adv_by_std_in_grpo)
    scores = token_level_rewards.sum(dim=-1)
    valid = response_mask.sum(dim=-1) > 0
    stats = group_stats(scores, valid, index)
    out = torch.zeros_like(scores)
    for i, key in enumerate(index):
        if bool(valid[i]):
            mean, std = stats[key]
            centered = float(scores[i]) - mean
            out[i] = centered / (std + epsilon) if norm else centered
    adv = out.unsqueeze(-1) * response_mask
    return adv, adv


def register_with_verl() -> bool:
    """Register ``masked_grpo_advantage`` as ``openforgerl_grpo`` (idempotent); False without veRL."""
    try:
        from verl.trainer.ppo import core_algos
    except ImportError:
        return False
    if core_algos.ADV_ESTIMATOR_REGISTRY.get(ADV_ESTIMATOR_NAME) is not masked_grpo_advantage:
        core_algos.register_adv_est(ADV_ESTIMATOR_NAME)(masked_grpo_advantage)
    return True
