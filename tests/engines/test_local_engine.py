"""The generation core on the real tiny model: batching, raw logprobs, weight swaps, pause."""

from __future__ import annotations

import asyncio

import pytest
import torch

from openforgerl.engines.local import LocalEngine, SamplingParams


@pytest.fixture
async def engine(tiny_dir):
    eng = LocalEngine.from_pretrained(str(tiny_dir))
    yield eng
    eng.shutdown()


def _prompts(chat) -> list[list[int]]:
    users = [
        "Add a todo 'buy milk'.",
        "Write the text 'hello world' to the file notes.txt.",
        "Send an email to bob@corp.io with subject 'lunch' and body 'see you at noon'.",
    ]
    return [chat.prompt_ids([{"role": "user", "content": u}]) for u in users]


def _greedy(n: int, logprobs: int | None = None, **kw) -> SamplingParams:
    return SamplingParams(max_tokens=n, temperature=0.0, logprobs=logprobs, **kw)


async def test_batched_decode_matches_one_at_a_time(engine, chat):
    """Continuous batching over a left-padded cache must not change any sequence's tokens."""
    prompts = _prompts(chat)
    alone = [await engine.generate(p, _greedy(24, ignore_eos=True)) for p in prompts]
    together = await asyncio.gather(*(engine.generate(p, _greedy(24, ignore_eos=True)) for p in prompts))
    for a, b in zip(alone, together, strict=True):
        assert a.token_ids == b.token_ids
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


async def test_requests_are_stepped_together(engine, chat):
    prompt = _prompts(chat)[0]
    before_steps, before_tokens = engine.core.steps, engine.core.batched_tokens
    await asyncio.gather(*(engine.generate(prompt, _greedy(32, ignore_eos=True)) for _ in range(8)))
    steps = engine.core.steps - before_steps
    tokens = engine.core.batched_tokens - before_tokens
    assert tokens == 8 * 31  # the first token of each comes from its prefill
    assert steps < tokens / 2, f"{steps} decode forwards for {tokens} tokens: not batched"


async def test_logprobs_are_raw_log_softmax_of_the_model(engine, chat):
    """What the trainer recomputes: log_softmax(logits) at each sampled position, no temperature."""
    prompt = _prompts(chat)[1]
    gen = await engine.generate(prompt, SamplingParams(max_tokens=20, temperature=0.7, seed=3, logprobs=2))
    ids = torch.tensor([prompt + gen.token_ids])
    with torch.no_grad():
        logits = engine.loaded.model(input_ids=ids).logits[0].float()
    lp = torch.log_softmax(logits, -1)[len(prompt) - 1 : -1].gather(1, torch.tensor(gen.token_ids)[:, None])
    assert lp[:, 0].tolist() == pytest.approx(gen.logprobs, abs=1e-4)
    assert all(len(top) == 2 for top in gen.top_logprobs)
    assert all(top[0][1] >= lp_i - 1e-6 for top, lp_i in zip(gen.top_logprobs, gen.logprobs, strict=True))


async def test_seeded_sampling_is_reproducible(engine, chat):
    prompt = _prompts(chat)[2]
    params = SamplingParams(max_tokens=16, temperature=1.0, seed=11)
    a, b = await asyncio.gather(engine.generate(prompt, params), engine.generate(prompt, params))
    assert a.token_ids == b.token_ids


async def test_stops_on_eos_and_on_length(engine, chat):
    gen = await engine.generate(_prompts(chat)[0], _greedy(200))
    if gen.finish_reason == "stop":
        assert gen.token_ids[-1] in engine.loaded.eos_token_ids
    short = await engine.generate(_prompts(chat)[0], _greedy(3, ignore_eos=True))
    assert short.finish_reason == "length" and len(short.token_ids) == 3


async def test_load_state_dict_changes_and_restores_output(engine, chat, tmp_path):
    from safetensors.torch import save_file

    prompt, params = _prompts(chat)[0], _greedy(12, ignore_eos=True)
    original = {k: v.detach().clone() for k, v in engine.loaded.model.state_dict().items()}
    save_file(
        {k: v for k, v in original.items() if k != "lm_head.weight"}, str(tmp_path / "model.safetensors")
    )
    before = await engine.generate(prompt, params)
    noisy = {
        k: v + 0.5 * torch.randn_like(v) for k, v in original.items() if k.endswith("mlp.down_proj.weight")
    }
    assert await engine.load_state_dict(noisy, version=7) == len(noisy)
    assert engine.weight_version == 7
    changed = await engine.generate(prompt, params)
    assert changed.token_ids != before.token_ids or changed.logprobs != pytest.approx(
        before.logprobs, abs=1e-3
    )
    await engine.reload_weights(tmp_path)
    assert (await engine.generate(prompt, params)).token_ids == before.token_ids


async def test_unknown_weight_name_is_rejected(engine):
    with pytest.raises(KeyError):
        await engine.load_state_dict({"nope.weight": torch.zeros(1)})


async def test_pause_holds_new_requests_until_resume(engine, chat):
    await engine.pause("abort")
    task = asyncio.create_task(engine.generate(_prompts(chat)[0], _greedy(4, ignore_eos=True)))
    await asyncio.sleep(0.3)
    assert not task.done()
    engine.resume()
    assert len((await asyncio.wait_for(task, 60)).token_ids) == 4


async def test_pause_abort_finishes_running_requests(engine, chat):
    task = asyncio.create_task(engine.generate(_prompts(chat)[0], _greedy(5000, ignore_eos=True)))
    while not engine.core.num_running:  # noqa: ASYNC110 - polling the core thread's counter
        await asyncio.sleep(0.01)
    await engine.pause("abort")
    assert (await asyncio.wait_for(task, 60)).finish_reason == "abort"
    engine.resume()


async def test_reload_equals_a_fresh_load(engine, chat, tmp_path):
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(1)
    noisy = {
        k: v.detach() + 0.05 * torch.randn(v.shape, generator=gen)
        for k, v in engine.loaded.model.state_dict().items()
        if k != "lm_head.weight"
    }
    save_file(noisy, str(tmp_path / "model.safetensors"))
    await engine.reload_weights(tmp_path)
    prompt, params = _prompts(chat)[0], _greedy(8, logprobs=0, ignore_eos=True)
    got = await engine.generate(prompt, params)
    with torch.no_grad():
        ids = torch.tensor([prompt + got.token_ids])
        fresh = type(engine.loaded.model)(engine.loaded.model.config)
        fresh.load_state_dict({**noisy, "lm_head.weight": noisy["model.embed_tokens.weight"]})
        lp = torch.log_softmax(fresh.eval()(input_ids=ids).logits[0].float(), -1)[len(prompt) - 1 : -1]
    assert lp.gather(1, torch.tensor(got.token_ids)[:, None])[:, 0].tolist() == pytest.approx(
        got.logprobs, abs=1e-4
    )
