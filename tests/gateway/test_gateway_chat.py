"""Chat Completions through the gateway with the official openai SDK: exact tokens recorded."""

from __future__ import annotations

import base64
import json

import pytest
from gwkit import TOOLS, assert_exact
from openai import AsyncOpenAI

from openforgerl.engines.chat_format import EOS_TOKEN, format_tool_call
from openforgerl.engines.scripted import Turn, scripted_logprob
from openforgerl.records import BLOB_REF_PREFIX, WireProtocol


def agent_policy(turn: Turn) -> str:
    """Call bash (twice in parallel) until a tool result is present, then answer."""
    if any(m.get("role") == "tool" for m in turn.messages):
        return "<think>\nboth ran\n</think>\n\nAll done: ok."
    return (
        "<think>\nlist files\n</think>\n\n"
        + format_tool_call("bash", {"cmd": "ls"})
        + "\n"
        + format_tool_call("bash", {"cmd": "pwd"})
    )


def client(ro: dict[str, str]) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0)


async def _collect_stream(
    c: AsyncOpenAI, **kw: object
) -> tuple[str, str, dict[int, dict[str, str]], str | None]:
    content, reasoning, calls, finish = "", "", {}, None
    stream = await c.chat.completions.create(model="any", stream=True, **kw)  # type: ignore[call-overload]
    async for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta
        content += delta.content or ""
        reasoning += getattr(delta, "reasoning", None) or ""
        for tc in delta.tool_calls or []:
            slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            slot["id"] = tc.id or slot["id"]
            slot["name"] += tc.function.name or "" if tc.function else ""
            slot["arguments"] += tc.function.arguments or "" if tc.function else ""
        finish = choice.finish_reason or finish
    return content, reasoning, calls, finish


@pytest.mark.parametrize("via_http", [False, True], ids=["inproc", "http"])
@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
async def test_multi_turn_parallel_tools_exact_tokens(make_gateway, fmt, via_http, stream):
    setup = await make_gateway(agent_policy, via_http=via_http)
    ro = await setup.rollout(task_id="t1", harness="qwen")
    c = client(ro)
    messages: list[dict] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "where am I?"},
    ]
    if stream:
        _, reasoning, calls, finish = await _collect_stream(c, messages=messages, tools=TOOLS)
        tool_calls = [
            {"id": v["id"], "type": "function", "function": {"name": v["name"], "arguments": v["arguments"]}}
            for _, v in sorted(calls.items())
        ]
    else:
        r = await c.chat.completions.create(model="any", messages=messages, tools=TOOLS)
        msg, finish, reasoning = (
            r.choices[0].message,
            r.choices[0].finish_reason,
            r.choices[0].message.reasoning,
        )
        tool_calls = [tc.model_dump() for tc in msg.tool_calls or []]
    assert finish == "tool_calls" and reasoning == "\nlist files\n"  # vLLM's qwen3 parser strips nothing
    assert [json.loads(t["function"]["arguments"]) for t in tool_calls] == [{"cmd": "ls"}, {"cmd": "pwd"}]
    messages.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
    for tc in tool_calls:  # Qwen Code sends tool results as content-part arrays
        messages.append(
            {"role": "tool", "tool_call_id": tc["id"], "content": [{"type": "text", "text": "out"}]}
        )
    if stream:
        content, _, _, finish = await _collect_stream(
            c, messages=messages, tools=TOOLS, stream_options={"include_usage": True}
        )
    else:
        r = await c.chat.completions.create(model="any", messages=messages, tools=TOOLS)
        content, finish = r.choices[0].message.content, r.choices[0].finish_reason
    assert content == "\n\nAll done: ok." and finish == "stop"

    records = await setup.records(ro["rollout_id"])
    assert_exact(records, setup.engine.produced)
    assert [r.index for r in records] == [0, 1]
    assert records[0].prompt_token_ids == fmt.prompt_ids(messages[:2], TOOLS)  # real template + tokenizer
    assert (
        fmt.decode(records[1].completion_token_ids)
        == "<think>\nboth ran\n</think>\n\nAll done: ok." + EOS_TOKEN
    )
    assert records[1].completion_logprobs[0] == scripted_logprob(records[1].completion_token_ids[0], 0)
    assert all(r.protocol == WireProtocol.CHAT and not r.side_call for r in records)
    # streamed pass-through forwards token events unread and reads them once at the end: text included
    assert records[1].response_text == "\n\nAll done: ok."
    assert records[0].request["messages"] == messages[:2]


async def test_headers_agents_and_side_calls(make_gateway):
    setup = await make_gateway(lambda t: "A title")
    ro = await setup.rollout()
    c = AsyncOpenAI(
        base_url=ro["openai_base_url"],
        api_key=ro["api_key"],
        max_retries=0,
        default_headers={
            "thread-id": "th-child",
            "x-codex-parent-thread-id": "th-root",
            "x-session-id": "ses_1",
        },
    )
    await c.chat.completions.create(
        model="m",
        messages=[
            {"role": "system", "content": "You are a title generator. Output a short title."},
            {"role": "user", "content": "fix the bug"},
        ],
    )
    await c.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "fix the bug"}], tools=TOOLS
    )
    title, work = await setup.records(ro["rollout_id"])
    assert title.side_call and not work.side_call
    assert work.agent_id == "th-child" and work.parent_agent_id == "th-root"
    assert work.headers["x-session-id"] == "ses_1"
    assert "authorization" not in {k.lower() for k in work.headers}


async def test_length_finish_and_models(make_gateway):
    setup = await make_gateway(lambda t: "one two three four five six seven eight nine ten")
    ro = await setup.rollout()
    c = client(ro)
    r = await c.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "count"}], max_tokens=4
    )
    assert r.choices[0].finish_reason == "length"
    (rec,) = await setup.records(ro["rollout_id"])
    assert len(rec.completion_token_ids) == 4 and rec.finish_reason == "length"
    models = await c.models.list()
    assert [m.id for m in models.data] == ["scripted-tiny"]


async def test_policy_version_stamped(make_gateway):
    setup = await make_gateway(lambda t: "hi")
    ro = await setup.rollout()
    c = client(ro)
    await c.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
    await setup.gateway.pause()
    assert setup.gateway.resume() == 1
    await c.chat.completions.create(model="m", messages=[{"role": "user", "content": "b"}])
    recs = await setup.records(ro["rollout_id"])
    assert [r.policy_version for r in recs] == [0, 1]
    rollout = await setup.store.get_rollout(ro["rollout_id"])
    assert rollout is not None and rollout.policy_versions == [0, 1]


async def test_images_and_content_parts_pass_through(make_gateway, fmt):
    setup = await make_gateway(lambda t: "a red pixel")
    ro = await setup.rollout()
    pixel = (
        "data:image/png;base64,"
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8AAAAMBAQAYhHcWAAAAAElFTkSuQmCC"
    )
    content = [{"type": "text", "text": "what is this? "}, {"type": "image_url", "image_url": {"url": pixel}}]
    r = await client(ro).chat.completions.create(model="m", messages=[{"role": "user", "content": content}])
    assert r.choices[0].message.content == "a red pixel"
    (rec,) = await setup.records(ro["rollout_id"])
    # recorded as the harness sent it, the image's base64 replaced by its blob reference
    ref = rec.request["messages"][0]["content"][1]["image_url"]["url"]
    assert rec.request["messages"][0]["content"][0] == content[0] and ref.startswith(BLOB_REF_PREFIX)
    assert setup.store.read_blob(ref[len(BLOB_REF_PREFIX) :]) == base64.b64decode(pixel.split(",")[1])
    assert [(i.width, i.height, i.media_type) for i in rec.images] == [(1, 1, "image/png")]
    assert rec.prompt_token_ids == fmt.prompt_ids([{"role": "user", "content": "what is this? <image>"}])
