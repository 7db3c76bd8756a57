"""The mask-aware GRPO estimator (pure torch; veRL's own ``grpo`` compared in the veRL venv)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from openforgerl.train.verl.advantage import masked_grpo_advantage, register_with_verl

VENV_PYTHON = Path(__file__).resolve().parents[2] / ".venv-verl" / "bin" / "python"


def _batch(scores: list[float], masks: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    mask = torch.tensor(masks, dtype=torch.float32)
    rewards = torch.zeros_like(mask)
    for i, s in enumerate(scores):
        rewards[i, -1] = s
    return rewards, mask


def test_dropped_rows_leave_group_statistics_and_get_no_advantage() -> None:
    rewards, mask = _batch([1.0, 0.0, 0.0, 1.0], [[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1]])
    adv, ret = masked_grpo_advantage(rewards, mask, ["g", "g", "g", "h"])
    per_row = (adv.sum(-1) / mask.sum(-1).clamp(min=1)).tolist()
    std = torch.tensor([1.0, 0.0]).std().item()
    assert per_row[0] == pytest.approx(0.5 / (std + 1e-6))
    assert per_row[1] == pytest.approx(-0.5 / (std + 1e-6))
    assert per_row[2] == 0.0 and adv[2].abs().sum() == 0, "dropped row"
    assert per_row[3] == pytest.approx(1.0 / (1.0 + 1e-6)), (
        "a group with one valid row: (0, 1) like veRL's grpo"
    )
    assert torch.equal(adv, ret) and torch.all(adv[mask == 0] == 0)


def test_without_std_normalisation_and_config_override() -> None:
    rewards, mask = _batch([3.0, 1.0, 9.0], [[1], [1], [0]])
    adv, _ = masked_grpo_advantage(rewards, mask, ["g"] * 3, config={"norm_adv_by_std_in_grpo": False})
    assert adv[:, 0].tolist() == [1.0, -1.0, 0.0]


def test_register_without_verl_is_a_no_op() -> None:
    try:
        import verl  # noqa: F401
    except ImportError:
        assert register_with_verl() is False
    else:  # pragma: no cover - main env has no veRL
        assert register_with_verl() is True


_SAME_AS_VERL = """
import torch
from verl.trainer.ppo import core_algos
from openforgerl.train.verl.advantage import register_with_verl
assert register_with_verl() and register_with_verl()  # idempotent
torch.manual_seed(0)
rewards = torch.zeros(12, 5); rewards[:, -1] = torch.randint(0, 3, (12,)).float()
mask = (torch.rand(12, 5) > 0.3).float(); mask[:, 0] = 1
index = [f"g{i % 4}" for i in range(12)]
ours, _ = core_algos.get_adv_estimator_fn("openforgerl_grpo")(token_level_rewards=rewards, response_mask=mask,
                                                               index=index, config=None)
theirs, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, index)
assert torch.allclose(ours, theirs, atol=1e-5), (ours - theirs).abs().max()
print("same")
"""


@pytest.mark.skipif(not VENV_PYTHON.exists(), reason="veRL venv missing: run scripts/install_verl.sh")
def test_equals_verls_grpo_when_nothing_is_dropped() -> None:
    proc = subprocess.run(
        [str(VENV_PYTHON), "-c", _SAME_AS_VERL], capture_output=True, text=True, timeout=280
    )
    assert proc.returncode == 0 and proc.stdout.strip().endswith("same"), proc.stderr[-3000:]
