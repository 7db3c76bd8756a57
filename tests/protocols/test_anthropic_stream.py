"""Anthropic SSE from `AnthropicStream`, read back by the official anthropic SDK's stream accumulator."""

from __future__ import annotations

import json
import typing
from typing import Any

import anthropic as sdk
import pytest
from anthropic.types import Message, RawMessageStreamEvent
from hypothesis import given, settings
from hypothesis import strategies as st
from protokit import CAPTURES, chat_completion, chunk, load_body, mock_http, stream_chunks

from openforgerl.gateway.protocols import anthropic
from openforgerl.gateway.protocols.sse import SSEDecoder

EVENTS = {
    cls.model_fields["type"].annotation.__args__[0]: cls
    for cls in typing.get_args(typing.get_args(RawMessageStreamEvent)[0])
}
CLAUDE = load_body(CAPTURES / "claude__turn2_request_with_tool_result.json.gz")
CALL = ("chatcmpl-tool-1a2b", "Bash", '{"command": "echo hi > proof.txt"}')


def run(request: dict[str, Any], chunks: list[dict[str, Any]], *, fail: str | None = None) -> bytes:
    s = anthropic.AnthropicStream(request)
    out = b"".join(s.feed(c) for c in chunks)
    return out + (s.error_event(fail, kind="overloaded_error") if fail else s.finish())


def sdk_stream(body: bytes) -> tuple[list[Any], Message]:
    client = sdk.Anthropic(
        api_key="k", base_url="http://gw", http_client=mock_http(200, body, "text/event-stream")
    )
    with client.messages.stream(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        events = list(stream)
        return events, stream.get_final_message()


def decode(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    dec = SSEDecoder()
    return [(ev.event, ev.json()) for ev in dec.feed(body) + dec.finish()]


def test_text_only() -> None:
    body = run(CLAUDE, stream_chunks(content="DONE: all good"))
    _, final = sdk_stream(body)
    assert [b.type for b in final.content] == ["text"] and final.content[0].text == "DONE: all good"
    assert (
        final.stop_reason == "end_turn" and final.usage.input_tokens == 11 and final.usage.output_tokens == 7
    )
    names = [n for n, _ in decode(body)]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]


def test_every_event_validates_strictly() -> None:
    for name, data in decode(run(CLAUDE, stream_chunks(reasoning="hmm", content="ok", calls=[CALL]))):
        assert name == data["type"]
        if name != "ping":
            EVENTS[name].model_validate(data)


def test_thinking_text_tool_use() -> None:
    body = run(CLAUDE, stream_chunks(reasoning="I should run Bash.", content="Running.", calls=[CALL]))
    events, final = sdk_stream(body)
    thinking, text, tool = final.content
    assert (thinking.type, thinking.thinking, thinking.signature) == (
        "thinking",
        "I should run Bash.",
        anthropic.SIGNATURE,
    )
    assert text.text == "Running."
    assert tool.type == "tool_use" and tool.id.startswith("toolu_") and tool.name == "Bash"
    assert tool.input == json.loads(CALL[2])
    assert final.stop_reason == "tool_use"
    assert any(e.type == "input_json" for e in events) and any(e.type == "signature" for e in events)


def test_parallel_tool_calls_each_own_block() -> None:
    calls = [("call_1", "Read", '{"file_path": "/a"}'), ("call_2", "Read", '{"file_path": "/b"}')]
    _, final = sdk_stream(run(CLAUDE, stream_chunks(calls=calls, reasoning_key="reasoning_content")))
    assert [(b.id, b.input) for b in final.content] == [
        ("toolu_call_1", {"file_path": "/a"}),
        ("toolu_call_2", {"file_path": "/b"}),
    ]


def test_max_tokens_and_stop_sequence() -> None:
    _, final = sdk_stream(run(CLAUDE, stream_chunks(content="cut", finish="length")))
    assert final.stop_reason == "max_tokens"
    request = dict(CLAUDE, stop_sequences=["END"])
    chunks = stream_chunks(content="abc")
    chunks[-2] = chunk({}, "stop", stop_reason="END")
    _, final = sdk_stream(run(request, chunks))
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", "END")


def test_input_tokens_known_at_start() -> None:
    s = anthropic.AnthropicStream(CLAUDE)
    first = dict(stream_chunks(content="x")[0], prompt_token_ids=list(range(42)))
    (name, data), _ping = decode(s.feed(first))
    assert name == "message_start" and data["message"]["usage"]["input_tokens"] == 42


def test_error_mid_stream_raises_in_sdk() -> None:
    body = run(CLAUDE, stream_chunks(content="partial")[:3], fail="engine overloaded")
    assert decode(body)[-1] == (
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "engine overloaded"}},
    )
    with pytest.raises(sdk.APIStatusError) as err:
        sdk_stream(body)
    assert "engine overloaded" in str(err.value)


def test_cached_tokens_reported_as_cache_read() -> None:
    s = anthropic.AnthropicStream(CLAUDE)
    s.feed(stream_chunks(content="x")[1])
    _, (_, delta), _ = decode(
        s.finish(
            {"prompt_tokens": 100, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 60}}
        )
    )
    assert delta["usage"]["input_tokens"] == 40 and delta["usage"]["cache_read_input_tokens"] == 60


@pytest.mark.parametrize(
    "kw",
    [
        {"content": "hello"},
        {"reasoning": "r", "content": "c", "calls": [CALL]},
        {"calls": [CALL, ("call_2", "Read", "{}")]},
        {"content": "cut", "finish": "length"},
    ],
)
def test_stream_equals_non_stream(kw) -> None:
    _, streamed = sdk_stream(run(CLAUDE, stream_chunks(**kw)))
    whole = Message.model_validate(anthropic.from_chat_completion(chat_completion(**kw), CLAUDE))
    assert [b.model_dump() for b in streamed.content] == [b.model_dump() for b in whole.content]
    assert (streamed.stop_reason, streamed.usage.output_tokens) == (
        whole.stop_reason,
        whole.usage.output_tokens,
    )


@settings(max_examples=25, deadline=None)
@given(
    st.text(max_size=30),
    st.text(max_size=30),
    st.lists(st.text(min_size=1, max_size=12), max_size=3),
    st.integers(1, 7),
)
def test_any_text_any_split(reasoning, content, args, size) -> None:
    calls = [(f"call_{i}", "Bash", json.dumps({"command": a})) for i, a in enumerate(args)]
    chunks = stream_chunks(reasoning=reasoning, content=content, calls=calls)
    pieces = [chunks[0]]
    pieces += [chunk({"reasoning": reasoning[i : i + size]}) for i in range(0, len(reasoning), size)]
    pieces += [chunk({"content": content[i : i + size]}) for i in range(0, len(content), size)]
    for i, (cid, name, a) in enumerate(calls):
        pieces.append(
            chunk({"tool_calls": [{"index": i, "id": cid, "function": {"name": name, "arguments": ""}}]})
        )
        pieces += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": a[j : j + size]}}]})
            for j in range(0, len(a), size)
        ]
    pieces += chunks[-2:]
    _, final = sdk_stream(run(CLAUDE, pieces))
    expect = chat_completion(reasoning=reasoning, content=content, calls=calls)
    whole = Message.model_validate(anthropic.from_chat_completion(expect, CLAUDE))
    assert [b.model_dump() for b in final.content] == [b.model_dump() for b in whole.content]
