"""After a push, the engine samples from exactly the trainer's weights, for both ways the local engine
runs in training: its own process (save + `/collective_rpc reload_weights`) and a background thread."""

from __future__ import annotations

import aiohttp
import pytest
import torch
from transformers import AutoModelForCausalLM

from openforgerl.engines.local.model import resolve_model_path
from openforgerl.engines.weight_push import DiskReloadPusher
from openforgerl.stack import InProcessPusher

PROMPT = [1, 5, 9, 14, 2, 7]


async def _engine_logprobs(url: str) -> tuple[list[int], list[float]]:
    body = {
        "model": "tiny",
        "prompt": PROMPT,
        "max_tokens": 6,
        "temperature": 0.0,
        "logprobs": 0,
        "return_token_ids": True,
        "ignore_eos": True,
    }
    async with aiohttp.ClientSession() as http, http.post(url + "/v1/completions", json=body) as resp:
        data = await resp.json()
    choice = data["choices"][0]
    return choice["token_ids"], choice["logprobs"]["token_logprobs"]


def _policy_logprobs(model: torch.nn.Module, sampled: list[int]) -> list[float]:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([PROMPT + sampled])).logits[0].float()
    lp = torch.log_softmax(logits, -1)[len(PROMPT) - 1 : -1]
    return lp.gather(1, torch.tensor(sampled)[:, None])[:, 0].tolist()


def _perturbed_policy() -> torch.nn.Module:
    model = AutoModelForCausalLM.from_pretrained(resolve_model_path("tiny"), torch_dtype=torch.float32).eval()
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    return model


@pytest.mark.parametrize("mode", ["process", "thread"])
async def test_pushed_weights_are_the_ones_sampled(mode: str, tmp_path) -> None:
    policy = _perturbed_policy()
    if mode == "process":
        from openforgerl.engines.local.process import LocalEngineProcess

        server = await LocalEngineProcess.start(resolve_model_path("tiny"), tmp_path / "engine.log")
        pusher = DiskReloadPusher([server.url], tmp_path / "weights")
    else:
        from openforgerl.engines.local.background import BackgroundServer

        server = BackgroundServer.start(str(resolve_model_path("tiny")))
        pusher = InProcessPusher(server)
    try:
        before_ids, before_lps = await _engine_logprobs(server.url)
        await pusher.push(policy, version=1)
        ids, lps = await _engine_logprobs(server.url)
    finally:
        server.close()
    assert (ids, lps) != (before_ids, before_lps)
    assert lps == pytest.approx(_policy_logprobs(policy, ids), abs=1e-4)
