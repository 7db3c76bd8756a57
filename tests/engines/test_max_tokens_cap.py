"""The gateway's upstream client caps completions by `max_tokens_cap`, also when the client sent no
`max_tokens` (zero and Codex send none; vLLM would then allow the whole remaining context)."""

from __future__ import annotations

import pytest

from openforgerl.engines.base import EngineCall
from openforgerl.engines.openai_compat import OpenAICompatEngine

ASK = [{"role": "user", "content": "Add a todo 'buy milk'."}]


@pytest.mark.parametrize(
    "body_extra", [{}, {"max_tokens": 500}, {"max_completion_tokens": 500}, {"max_tokens": 3}]
)
async def test_cap_applies_with_and_without_max_tokens(local_server, body_extra: dict) -> None:
    engine = OpenAICompatEngine(local_server.url, max_tokens_cap=4)
    try:
        body = {"messages": ASK, "temperature": 1.0, "ignore_eos": True, **body_extra}
        result = await engine.complete(EngineCall(body=body, route_key="r"))
    finally:
        await engine.aclose()
    want = min(4, body_extra.get("max_tokens", 4))
    assert len(result.token_ids) == want


async def test_no_cap_leaves_the_request_alone(local_server) -> None:
    engine = OpenAICompatEngine(local_server.url)
    try:
        body = {"messages": ASK, "max_tokens": 7, "ignore_eos": True}
        result = await engine.complete(EngineCall(body=body, route_key="r"))
    finally:
        await engine.aclose()
    assert len(result.token_ids) == 7
