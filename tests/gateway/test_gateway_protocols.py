"""Anthropic Messages and OpenAI Responses through the gateway, driven by the official SDKs."""

from __future__ import annotations

import json

import aiohttp
import anthropic
import pytest
from anthropic import AsyncAnthropic
from gwkit import assert_exact
from openai import AsyncOpenAI

from openforgerl.engines.chat_format import format_tool_call
from openforgerl.engines.scripted import Turn
from openforgerl.records import CallErrorKind, WireProtocol

A_TOOLS = [
    {
        "name": "Bash",
        "description": "run a command",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    }
]
R_TOOLS = [
    {
        "type": "function",
        "name": "exec_command",
        "description": "run",
        "strict": False,
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    },
    {"type": "web_search", "external_web_access": True},
]


def tool_then_answer(tool: str, arg: str) -> object:
    def policy(turn: Turn) -> str:
        if any(m.get("role") == "tool" for m in turn.messages):
            return "<think>\nsaw it\n</think>\n\nThe file is there."
        return "<think>\ncheck\n</think>\n\n" + format_tool_call(tool, {arg: "ls"})

    return policy


@pytest.mark.parametrize("via_http", [False, True], ids=["inproc", "http"])
@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
async def test_anthropic_tool_loop_exact_tokens(make_gateway, via_http, stream):
    setup = await make_gateway(tool_then_answer("Bash", "command"), via_http=via_http)
    ro = await setup.rollout(harness="claude")
    c = AsyncAnthropic(
        base_url=ro["anthropic_base_url"],
        api_key=ro["api_key"],
        max_retries=0,
        default_headers={"x-claude-code-agent-id": "agent-7"},
    )
    messages: list[dict] = [{"role": "user", "content": "is proof.txt there?"}]
    kw = {"model": "claude-x", "max_tokens": 512, "system": "You are Claude Code.", "tools": A_TOOLS}

    async def ask() -> anthropic.types.Message:
        if not stream:
            return await c.beta.messages.create(messages=messages, **kw)  # ?beta=true, like Claude Code
        async with c.messages.stream(messages=messages, **kw) as s:
            return await s.get_final_message()

    first = await ask()
    # streamed, the engine sends the blank line between `</think>` and `<tool_call>` as content (as
    # vLLM's hermes parser does): a whitespace text block; non-streamed, the parse drops it
    kinds = [b.type for b in first.content if b.type != "text" or b.text.strip()]
    assert kinds == ["thinking", "tool_use"] and first.stop_reason == "tool_use"
    use = first.content[-1]
    assert use.name == "Bash" and use.input == {"command": "ls"}
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "proof.txt"}]},
    ]
    second = await ask()
    # vLLM's parsers strip nothing: the content keeps the blank line after `</think>`
    assert second.content[-1].text == "\n\nThe file is there." and second.stop_reason == "end_turn"

    records = await setup.records(ro["rollout_id"])
    assert_exact(records, setup.engine.produced)
    assert all(r.protocol == WireProtocol.ANTHROPIC and r.agent_id == "agent-7" for r in records)
    assert (
        records[1].engine_request is not None and records[1].engine_request["messages"][-1]["role"] == "tool"
    )
    assert records[0].request["system"] == "You are Claude Code."


async def test_anthropic_title_side_call_and_count_tokens(make_gateway):
    setup = await make_gateway(lambda t: '{"title": "Fix bug"}')
    ro = await setup.rollout()
    c = AsyncAnthropic(base_url=ro["anthropic_base_url"], api_key=ro["api_key"], max_retries=0)
    fmt = {
        "format": {
            "type": "json_schema",
            "schema": {"type": "object", "properties": {"title": {"type": "string"}}},
        }
    }
    await c.messages.create(
        model="m",
        max_tokens=64,
        messages=[{"role": "user", "content": "fix it"}],
        extra_body={"output_config": fmt},
    )
    (rec,) = await setup.records(ro["rollout_id"])
    assert rec.side_call
    counted = await c.messages.count_tokens(model="m", messages=[{"role": "user", "content": "fix it"}])
    assert counted.input_tokens == len(rec.prompt_token_ids)


@pytest.mark.parametrize("via_http", [False, True], ids=["inproc", "http"])
@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
async def test_responses_tool_loop_exact_tokens(make_gateway, via_http, stream):
    setup = await make_gateway(tool_then_answer("exec_command", "cmd"), via_http=via_http)
    ro = await setup.rollout(harness="codex")
    c = AsyncOpenAI(
        base_url=ro["openai_base_url"],
        api_key=ro["api_key"],
        max_retries=0,
        default_headers={"thread-id": "thr-1"},
    )
    items: list[dict] = [
        {"type": "message", "role": "developer", "content": "You are Codex."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ls please"}]},
    ]
    kw = {
        "model": "gpt-x",
        "tools": R_TOOLS,
        "store": False,
        "reasoning": {"summary": "auto"},
        "include": ["reasoning.encrypted_content"],
        "parallel_tool_calls": True,
    }

    async def ask():
        if not stream:
            return await c.responses.create(input=items, **kw)
        final = None
        async for ev in await c.responses.create(input=items, stream=True, **kw):
            if ev.type == "response.completed":
                final = ev.response
        return final

    first = await ask()
    calls = [o for o in first.output if o.type == "function_call"]
    assert (
        len(calls) == 1
        and calls[0].name == "exec_command"
        and json.loads(calls[0].arguments) == {"cmd": "ls"}
    )
    items += [o.model_dump(exclude_none=True) for o in first.output]
    items.append({"type": "function_call_output", "call_id": calls[0].call_id, "output": "proof.txt"})
    second = await ask()
    assert second.output_text == "\n\nThe file is there."

    records = await setup.records(ro["rollout_id"])
    assert_exact(records, setup.engine.produced)
    assert all(r.protocol == WireProtocol.RESPONSES and r.agent_id == "thr-1" for r in records)


BAD = [
    ("/v1/messages", b"{oops", "anthropic"),
    ("/v1/messages", json.dumps({"model": "m", "max_tokens": 5, "messages": "hi"}).encode(), "anthropic"),
    ("/v1/messages", json.dumps({"model": "m", "max_tokens": "5", "messages": []}).encode(), "anthropic"),
    ("/v1/messages/count_tokens", b"[]", "anthropic"),
    ("/v1/responses", b"{oops", "openai"),
    ("/v1/responses", json.dumps({"model": "m", "input": 5}).encode(), "openai"),
    ("/v1/responses", json.dumps({"model": "m", "input": "x", "tools": "no"}).encode(), "openai"),
]


@pytest.mark.parametrize(("path", "body", "shape"), BAD, ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(BAD)])
async def test_protocol_bad_bodies_are_4xx(make_gateway, path, body, shape):
    setup = await make_gateway(lambda t: "ok")
    ro = await setup.rollout()
    url = (ro["anthropic_base_url"] if shape == "anthropic" else ro["openai_base_url"][: -len("/v1")]) + path
    async with aiohttp.ClientSession() as http:
        async with http.post(url, data=body, headers={"x-api-key": ro["api_key"]}) as r:
            assert 400 <= r.status < 500, await r.text()
            out = await r.json()
    if shape == "anthropic":
        assert out["type"] == "error" and out["error"]["message"]
    else:
        assert out["error"]["message"] and out["error"]["type"]


async def test_anthropic_engine_fault_shape(make_gateway):
    setup = await make_gateway(lambda t: "ok")
    setup.engine.faults.http_errors = 1
    ro = await setup.rollout()
    c = AsyncAnthropic(base_url=ro["anthropic_base_url"], api_key=ro["api_key"], max_retries=0)
    with pytest.raises(anthropic.InternalServerError) as info:
        await c.messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": "x"}])
    assert info.value.status_code == 502 and info.value.body["type"] == "error"
    (rec,) = await setup.records(ro["rollout_id"])
    assert rec.error is not None and rec.error.kind == CallErrorKind.ENGINE_HTTP
