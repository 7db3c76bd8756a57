"""A GRPO step on a real (tiny, random) Qwen3 model: infra-dropped rollouts never reach the loss."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from openforgerl.records import Sample
from openforgerl.train.policy import collate, response_logprobs
from openforgerl.train.update import UpdateSettings, grpo_update


def _model() -> Qwen3ForCausalLM:
    torch.manual_seed(0)
    cfg = Qwen3Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=64,
    )
    return Qwen3ForCausalLM(cfg).eval()


def _sample(model, rid: str, prompt: list[int], response: list[int], mask: list[int]) -> Sample:
    s = Sample(
        prompt_ids=prompt,
        response_ids=response,
        response_mask=mask,
        response_logprobs=[0.0] * len(response),
        rollout_id=rid,
        group_id="g",
    )
    with torch.no_grad():
        lp = response_logprobs(model, collate([s]))[0].tolist()
    return s.model_copy(
        update={"response_logprobs": [v if m else 0.0 for v, m in zip(lp, mask, strict=True)]}
    )


def _step(model, samples, adv):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return grpo_update(model, opt, samples, adv, UpdateSettings(micro_batch=2))


def test_infra_dropped_samples_do_not_change_the_update():
    base = _model()
    good = [_sample(base, "a", [1, 2, 3], [4, 5, 6], [1, 0, 1]), _sample(base, "b", [1, 2], [7, 8], [1, 1])]
    dropped = _sample(base, "x", [9, 9], [10, 11], [1, 1])
    adv = {"a": 1.0, "b": -1.0}  # "x" was infra-dropped: it has no advantage
    m1, m2 = copy.deepcopy(base), copy.deepcopy(base)
    s1 = _step(m1, good, adv)
    s2 = _step(m2, [*good, dropped], adv)
    assert s1.samples == s2.samples == 2
    for p1, p2 in zip(m1.parameters(), m2.parameters(), strict=True):
        assert torch.allclose(p1, p2)


def test_update_moves_logprob_in_direction_of_advantage():
    model = _model()
    pos = _sample(model, "a", [1, 2, 3], [4, 5], [1, 1])
    neg = _sample(model, "b", [1, 2, 3], [6, 7], [1, 1])
    before = response_logprobs(model, collate([pos, neg])).detach()
    stats = _step(model, [pos, neg], {"a": 1.0, "b": -1.0})
    after = response_logprobs(model, collate([pos, neg])).detach()
    assert stats.trained_tokens == 4 and stats.grad_norm > 0
    assert after[0].sum() > before[0].sum()
    assert after[1].sum() < before[1].sum()
    # ratio against the recorded logprobs is exactly 1 on the first step: nothing clipped
    assert stats.clip_frac == pytest.approx(0.0)


def test_mask_zero_tokens_get_no_gradient_signal():
    model = _model()
    s = _sample(model, "a", [1, 2], [3, 4, 5], [0, 0, 0])
    stats = _step(model, [s], {"a": 1.0})
    assert stats.samples == 0 and stats.trained_tokens == 0


def test_more_epochs_move_further_until_the_ratio_bound_stops_them():
    base = _model()
    pos = _sample(base, "a", [1, 2, 3], [4, 5], [1, 1])
    neg = _sample(base, "b", [1, 2, 3], [6, 7], [1, 1])
    adv = {"a": 1.0, "b": -1.0}
    moved = {}
    for epochs in (1, 4):
        model = copy.deepcopy(base)
        opt = torch.optim.Adam(model.parameters(), lr=0.05)
        stats = grpo_update(model, opt, [pos, neg], adv, UpdateSettings(micro_batch=2, epochs=epochs))
        after = response_logprobs(model, collate([pos])).detach()[0].sum()
        moved[epochs] = float(after) - sum(pos.response_logprobs)
        # the first pass is measured before any step: trainer and recorded logprobs agree
        assert stats.logprob_diff_max == pytest.approx(0.0, abs=1e-5)
        assert (stats.clip_frac > 0) == (epochs > 1)  # later passes meet the clipped ratio
    assert moved[4] > moved[1] > 0
