"""GRPO maths: advantages over valid rollouts only, masks, ratio clipping, per-rollout weights."""

from __future__ import annotations

import math

import pytest
import torch

from openforgerl.train.grpo import (
    RolloutScore,
    clipped_policy_loss,
    group_advantages,
    k3_kl,
    per_rollout_token_weights,
)


def test_advantages_hand_computed():
    scores = [
        RolloutScore("a", "g", 1.0),
        RolloutScore("b", "g", 0.0),
        RolloutScore("c", "g", 0.0),
        RolloutScore("d", "g", 1.0),
    ]
    adv = group_advantages(scores)
    # mean 0.5, population std 0.5
    assert adv["a"] == pytest.approx(1.0, abs=1e-4)
    assert adv["b"] == pytest.approx(-1.0, abs=1e-4)


def test_infra_dropped_rollouts_excluded_from_statistics():
    base = [RolloutScore("a", "g", 1.0), RolloutScore("b", "g", 0.0)]
    with_infra = [*base, RolloutScore("x", "g", 0.0, valid=False), RolloutScore("y", "g", 0.0, valid=False)]
    assert group_advantages(with_infra) == group_advantages(base)
    assert "x" not in group_advantages(with_infra)


def test_uniform_group_has_zero_advantage_and_groups_are_independent():
    adv = group_advantages(
        [
            RolloutScore("a", "g1", 1.0),
            RolloutScore("b", "g1", 1.0),
            RolloutScore("c", "g2", 0.0),
            RolloutScore("d", "g2", 1.0),
        ]
    )
    assert adv["a"] == adv["b"] == 0.0
    assert adv["c"] < 0 < adv["d"]


def test_loss_ignores_mask_zero_tokens():
    lp = torch.tensor([[-1.0, -2.0, -3.0]], requires_grad=True)
    old = torch.tensor([[-1.0, -2.0, -3.0]])
    mask = torch.tensor([[1.0, 0.0, 1.0]])
    adv = torch.ones(1, 3)
    w = torch.ones(1, 3)
    loss, _ = clipped_policy_loss(lp, old, adv, mask, w)
    loss.backward()
    assert lp.grad[0, 1] == 0.0
    assert lp.grad[0, 0] != 0.0 and lp.grad[0, 2] != 0.0


def test_ratio_clipping_stops_gradient_beyond_trust_region():
    old = torch.zeros(1, 2)
    lp = torch.tensor([[math.log(2.0), math.log(0.5)]], requires_grad=True)  # ratios 2.0 and 0.5
    mask = torch.ones(1, 2)
    loss, stats = clipped_policy_loss(lp, old, torch.ones(1, 2), mask, torch.ones(1, 2))
    loss.backward()
    # positive advantage: ratio 2.0 is clipped (no gradient), ratio 0.5 is not
    assert lp.grad[0, 0] == 0.0
    assert lp.grad[0, 1] != 0.0
    assert stats["clip_frac"] == pytest.approx(0.5)


def test_per_rollout_weights_do_not_reward_splitting():
    # rollout a split into two chains of 2 tokens each; rollout b one chain of 4 tokens
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    w = per_rollout_token_weights(["a", "a", "b"], mask)
    total_a = (w[:2] * mask[:2]).sum()
    total_b = (w[2] * mask[2]).sum()
    assert float(total_a) == pytest.approx(float(total_b))
    assert float(total_a) == pytest.approx(0.5)


def test_k3_kl_nonnegative_and_zero_at_equality():
    a = torch.randn(10)
    assert torch.all(k3_kl(a, a) == 0)
    assert torch.all(k3_kl(a, a + torch.randn(10)) >= 0)
