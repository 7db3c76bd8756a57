"""The default clamp on one answer's `max_tokens`, derived from the rollout budget: a client's huge
`max_tokens` (100000 after its first answer) is clamped on its way to the engine, and a body without one
is left alone (the derived clamp may exceed a small model's context, which vLLM would then refuse)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import orjson

from openforgerl.config import Config
from openforgerl.engines.base import EngineCall
from openforgerl.engines.openai_compat import OpenAICompatEngine
from openforgerl.stack import _open_engine

ASK = [{"role": "user", "content": "Add a todo 'buy milk'."}]


def test_the_default_clamp_is_derived_from_the_budget() -> None:
    assert Config.model_validate({"rollout": {"budget_s": 300}}).max_tokens_cap == 15000
    assert Config().max_tokens_cap == 15000  # no budget: the task format's default, 300 s
    assert Config.model_validate({"rollout": {"budget_s": 1200}}).max_tokens_cap == 60000
    assert (
        Config.model_validate({"rollout": {"budget_s": 5}}).max_tokens_cap == 1024
    )  # floor: tool-call turns
    assert Config.model_validate({"engine": {"max_tokens_cap": 64}}).max_tokens_cap == 64  # the user's wins


def _sent(engine: OpenAICompatEngine, body: dict) -> dict:
    payload, _ = engine._prepare(body, "m", stream=False)
    return orjson.loads(payload)


def test_the_clamp_lowers_a_huge_max_tokens_and_adds_none() -> None:
    clamp = OpenAICompatEngine("http://127.0.0.1:9", max_tokens_clamp=15000)
    assert _sent(clamp, {"messages": ASK, "max_tokens": 100000})["max_tokens"] == 15000
    assert _sent(clamp, {"messages": ASK, "max_completion_tokens": 100000})["max_completion_tokens"] == 15000
    assert _sent(clamp, {"messages": ASK, "max_tokens": 300})["max_tokens"] == 300
    assert "max_tokens" not in _sent(clamp, {"messages": ASK})
    # control: without it the huge request goes through as sent; an explicit cap also fills an absent one
    assert (
        _sent(OpenAICompatEngine("http://127.0.0.1:9"), {"messages": ASK, "max_tokens": 100000})["max_tokens"]
        == 100000
    )
    assert (
        _sent(OpenAICompatEngine("http://127.0.0.1:9", max_tokens_cap=64), {"messages": ASK})["max_tokens"]
        == 64
    )


async def test_the_stack_hands_the_derived_clamp_to_the_engine(tmp_path: Path) -> None:
    cfg = Config.model_validate(
        {"engine": {"kind": "remote", "urls": ["http://127.0.0.1:9"]}, "rollout": {"budget_s": 120}}
    )
    async with AsyncExitStack() as stack:
        engine, _, _ = await _open_engine(
            cfg.engine, cfg.model, tmp_path, stack, False, clamp=cfg.max_tokens_cap
        )
    assert isinstance(engine, OpenAICompatEngine)
    assert engine.max_tokens_clamp == 6000 and engine.max_tokens_cap is None


async def test_a_real_engine_writes_no_more_than_the_clamp(local_server) -> None:
    engine = OpenAICompatEngine(local_server.url, max_tokens_clamp=4)
    try:
        body = {"messages": ASK, "temperature": 1.0, "ignore_eos": True, "max_tokens": 100000}
        result = await engine.complete(EngineCall(body=body, route_key="r"))
    finally:
        await engine.aclose()
    assert len(result.token_ids) == 4
