"""`LocalEngine` is an `Engine`: in process, `complete`/`stream` give what the gateway reads off
`openforgerl engine`'s wire (same ids, logprobs, finish, parsed message), and a gateway in front of
it records the call token for token."""

from __future__ import annotations

import pytest

from openforgerl.engines.base import Engine, EngineCall, EngineError
from openforgerl.engines.openai_compat import OpenAICompatEngine

TODO_TOOL = {
    "type": "function",
    "function": {
        "name": "todo_add",
        "description": "Add a todo item.",
        "parameters": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
    },
}
BODY = {
    "model": "tiny",
    "messages": [{"role": "user", "content": "Add a todo 'buy milk'."}],
    "tools": [TODO_TOOL],
    "temperature": 0,
    "max_tokens": 48,
}


@pytest.fixture(scope="module")
def local(tiny_dir):
    from openforgerl.engines.local import LocalEngine

    engine = LocalEngine.from_pretrained(str(tiny_dir))
    yield engine
    engine.shutdown()


async def _collect(engine: Engine, body: dict) -> tuple[list[int], list[int], list[float], str | None, str]:
    prompt: list[int] = []
    ids: list[int] = []
    lps: list[float] = []
    finish, text = None, ""
    async for chunk in engine.stream(EngineCall({**body, "stream": True}, "r")):
        prompt = chunk.prompt.ids if chunk.prompt is not None else prompt
        ids, lps = ids + chunk.token_ids, lps + chunk.logprobs
        finish = chunk.finish_reason or finish
        text += chunk.content or ""
    return prompt, ids, lps, finish, text


async def test_in_process_equals_the_server(local, local_server):
    """Greedy: the same prompt ids, sampled ids, logprobs and message in process as over HTTP."""
    http = OpenAICompatEngine(local_server.url + "/v1")
    try:
        ours, wire = (
            await local.complete(EngineCall(dict(BODY), "r")),
            await http.complete(EngineCall(dict(BODY), "r")),
        )
        streamed, wire_streamed = await _collect(local, BODY), await _collect(http, BODY)
    finally:
        await http.aclose()
    assert ours.prompt == wire.prompt and ours.token_ids == wire.token_ids
    assert (
        ours.logprobs == pytest.approx(wire.logprobs, abs=1e-4) and ours.finish_reason == wire.finish_reason
    )
    mine, theirs = ours.body["choices"][0]["message"], wire.body["choices"][0]["message"]
    assert [c["function"] for c in mine.get("tool_calls") or []] == [
        c["function"] for c in theirs.get("tool_calls") or []
    ]
    assert (mine["content"], mine["reasoning"]) == (theirs["content"], theirs["reasoning"])
    assert streamed[:2] == wire_streamed[:2] == (ours.prompt.ids, ours.token_ids)
    assert streamed[3:] == wire_streamed[3:] and streamed[3] == ours.finish_reason


async def test_refusals_are_engine_errors_with_the_servers_status(local):
    with pytest.raises(EngineError) as err:
        await local.complete(EngineCall({**BODY, "max_tokens": 10**6}, "r"))
    assert err.value.status == 400 and err.value.is_context_overflow
    with pytest.raises(EngineError) as err:
        async for _ in local.stream(EngineCall({**BODY, "messages": []}, "r")):
            pass
    assert err.value.status == 400 and err.value.is_client_error


async def test_a_gateway_in_front_records_the_call(local, tmp_path):
    from openai import AsyncOpenAI

    from openforgerl.gateway.server import start_gateway
    from openforgerl.store.sqlite import SQLiteCallStore

    store = SQLiteCallStore(tmp_path / "calls.db")
    gw = await start_gateway(local, store)
    try:
        ro = await gw.open_rollout(harness="test")
        client = AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0)
        out = await client.chat.completions.create(**BODY)
        await client.close()
        (rec,) = await store.list_calls(ro["rollout_id"])
    finally:
        await gw.aclose()
        await store.aclose()
    ours = await local.complete(EngineCall(dict(BODY), "r"))
    assert rec.error is None and rec.prompt_token_ids == ours.prompt.ids
    assert rec.completion_token_ids == ours.token_ids and out.choices[0].finish_reason == ours.finish_reason
