"""The sampler: greedy, top-k/top-p filtering, raw logprobs, EOS ban before min_tokens."""

from __future__ import annotations

import torch

from openforgerl.engines.local.sampling import SamplingParams, _filter_top_k_top_p, sample_rows


def test_greedy_picks_argmax_and_reports_raw_logprob():
    logits = torch.tensor([[0.0, 3.0, 1.0], [2.0, 0.0, 5.0]])
    out = sample_rows(logits, [SamplingParams(4, temperature=0.0, logprobs=1)] * 2, [None, None], [(), ()])
    assert [s.token_id for s in out] == [1, 2]
    raw = torch.log_softmax(logits, -1)
    assert out[0].logprob == float(raw[0, 1]) and out[0].top[0][0] == 1


def test_logprob_ignores_temperature():
    logits = torch.tensor([[0.0, 3.0, 1.0]])
    gen = torch.Generator().manual_seed(0)
    s = sample_rows(logits, [SamplingParams(4, temperature=0.1)], [gen], [()])[0]
    assert s.logprob == float(torch.log_softmax(logits, -1)[0, s.token_id])


def test_top_k_and_top_p_keep_the_head_only():
    logits = torch.tensor([4.0, 3.0, 2.0, -5.0])
    assert torch.isinf(_filter_top_k_top_p(logits, 2, 1.0)).tolist() == [False, False, True, True]
    probs = torch.softmax(logits, -1)
    kept = ~torch.isinf(_filter_top_k_top_p(logits, 0, float(probs[0]) + 1e-3))
    assert kept.tolist() == [True, True, False, False]


def test_banned_tokens_are_never_sampled():
    logits = torch.tensor([[10.0, 0.0, 0.0]])
    s = sample_rows(logits, [SamplingParams(4, temperature=0.0)], [None], [(0,)])[0]
    assert s.token_id != 0
