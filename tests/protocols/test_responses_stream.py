"""Responses SSE from `ResponsesStream`, read back by the official openai SDK's own stream parser."""

from __future__ import annotations

import typing
from typing import Any

import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from protokit import CAPTURES, chat_completion, load_body, mock_http, stream_chunks

from openforgerl.gateway.protocols import responses
from openforgerl.gateway.protocols.sse import SSEDecoder

# event type -> the SDK's pydantic class for it (validated strictly, one class per event)
EVENTS = {
    cls.model_fields["type"].annotation.__args__[0]: cls
    for cls in typing.get_args(typing.get_args(ResponseStreamEvent)[0])
}
CODEX = load_body(CAPTURES / "codex__turn2_request_with_tool_output.json.gz")
CALL = ("call_abc", "exec_command", '{"cmd": "echo hi > proof.txt"}')


def run(request: dict[str, Any], chunks: list[dict[str, Any]], *, fail: str | None = None) -> bytes:
    s = responses.ResponsesStream(request)
    out = b"".join(s.feed(c) for c in chunks)
    return out + (s.error_event(fail) if fail else s.finish())


def sdk_stream(body: bytes):
    """Drive `client.responses.stream` (SDK accumulator) over our bytes; return (events, final)."""
    client = openai.OpenAI(
        api_key="k", base_url="http://gw/v1", http_client=mock_http(200, body, "text/event-stream")
    )
    with client.responses.stream(model="m", input="hi") as stream:
        events = list(stream)
        return events, stream.get_final_response()


def decode(body: bytes) -> list[dict[str, Any]]:
    dec = SSEDecoder()
    evs = dec.feed(body) + dec.finish()
    for ev in evs:
        assert ev.event == ev.json()["type"]  # `event:` line matches the payload type
    return [ev.json() for ev in evs]


def test_text_only() -> None:
    body = run(CODEX, stream_chunks(content="Hello there, done."))
    events, final = sdk_stream(body)
    assert final.output_text == "Hello there, done."
    assert final.status == "completed" and final.usage.input_tokens == 11 and final.usage.output_tokens == 7
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed" and b"[DONE]" not in body


def test_sequence_numbers_and_strict_event_types() -> None:
    evs = decode(run(CODEX, stream_chunks(reasoning="think", content="ok", calls=[CALL])))
    assert [e["sequence_number"] for e in evs] == list(range(len(evs)))
    for e in evs:
        EVENTS[e["type"]].model_validate(e)  # strict pydantic validation of every event, not construct()


def test_reasoning_text_and_tool_call() -> None:
    body = run(CODEX, stream_chunks(reasoning="Let me write the file.", content="Writing.", calls=[CALL]))
    events, final = sdk_stream(body)
    kinds = [o.type for o in final.output]
    assert kinds == ["reasoning", "message", "function_call"]
    rs, msg, fc = final.output
    assert rs.content[0].text == "Let me write the file."
    assert rs.encrypted_content == responses.REASONING_MARKER + "Let me write the file."  # Codex asked for it
    assert msg.content[0].text == "Writing."
    assert (fc.call_id, fc.name, fc.arguments) == CALL
    deltas = [e for e in events if e.type == "response.function_call_arguments.delta"]
    assert deltas and deltas[-1].snapshot == CALL[2]


def test_reasoning_content_key_and_parallel_calls() -> None:
    calls = [("call_1", "exec_command", '{"cmd": "ls"}'), ("call_2", "view_image", '{"path": "a.png"}')]
    body = run(CODEX, stream_chunks(reasoning="two things", calls=calls, reasoning_key="reasoning_content"))
    _, final = sdk_stream(body)
    assert [(o.call_id, o.name, o.arguments) for o in final.output[1:]] == calls
    assert [o.type for o in final.output] == ["reasoning", "function_call", "function_call"]


def test_namespaced_call_comes_back_with_namespace() -> None:
    request = load_body(CAPTURES / "codex__subagent__0001_POST_v1_responses.json.gz")
    call = ("call_9", "multi_agent_v1.spawn_agent", '{"message": "Create proof.txt"}')
    evs = decode(run(request, stream_chunks(calls=[call])))
    done = [e["item"] for e in evs if e["type"] == "response.output_item.done"]
    assert done == [
        {
            "type": "function_call",
            "id": done[0]["id"],
            "call_id": "call_9",
            "name": "spawn_agent",
            "arguments": call[2],
            "status": "completed",
            "namespace": "multi_agent_v1",
        }
    ]
    _, final = sdk_stream(run(request, stream_chunks(calls=[call])))
    assert final.output[0].namespace == "multi_agent_v1"


def test_custom_tool_call() -> None:
    request = {
        "model": "m",
        "input": "x",
        "tools": [{"type": "custom", "name": "apply_patch", "description": "p"}],
    }
    chat = responses.to_chat_request(request)
    assert chat["tools"][0]["function"]["parameters"]["required"] == ["input"]
    patch = "*** Begin Patch\n*** End Patch"
    args = '{"input": ' + __import__("json").dumps(patch) + "}"
    _, final = sdk_stream(run(request, stream_chunks(calls=[("call_p", "apply_patch", args)])))
    item = final.output[0]
    assert (item.type, item.name, item.input, item.call_id) == (
        "custom_tool_call",
        "apply_patch",
        patch,
        "call_p",
    )


def test_length_finish_is_completed_but_incomplete() -> None:
    evs = decode(run(CODEX, stream_chunks(content="trunc", finish="length")))
    last = evs[-1]
    assert last["type"] == "response.completed"  # Codex fails a stream without response.completed
    assert last["response"]["status"] == "incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_error_mid_stream() -> None:
    body = run(CODEX, stream_chunks(content="partial")[:3], fail="engine went away")
    evs = decode(body)
    assert [e["type"] for e in evs[-2:]] == ["error", "response.failed"]
    failed = Response.model_validate(evs[-1]["response"])
    assert failed.status == "failed" and failed.error.message == "engine went away"
    assert failed.error.code == "server_error"  # Codex retries anything but context_length_exceeded
    client = openai.OpenAI(
        api_key="k", base_url="http://gw/v1", http_client=mock_http(200, body, "text/event-stream")
    )
    seen = [e.type for e in client.responses.create(model="m", input="hi", stream=True)]
    assert seen[-2:] == ["error", "response.failed"]
    with pytest.raises(RuntimeError):  # the SDK helper reports the stream as failed, not completed
        sdk_stream(body)


def test_finish_without_chunks_and_idempotent() -> None:
    s = responses.ResponsesStream(CODEX)
    first = s.finish()
    assert s.finish() == b"" and s.feed(stream_chunks(content="x")[1]) == b""
    evs = decode(first)
    assert [e["type"] for e in evs] == ["response.created", "response.in_progress", "response.completed"]


def test_usage_override_on_finish() -> None:
    s = responses.ResponsesStream(CODEX)
    s.feed(stream_chunks(content="x")[1])
    evs = decode(s.finish({"prompt_tokens": 100, "completion_tokens": 3}))
    assert evs[-1]["response"]["usage"]["total_tokens"] == 103


@pytest.mark.parametrize(
    "kw",
    [
        {"content": "hello"},
        {"reasoning": "r", "content": "c", "calls": [CALL]},
        {"calls": [CALL, ("call_x", "multi_agent_v1.wait_agent", "{}")]},
        {"content": "cut", "finish": "length"},
    ],
)
def test_stream_equals_non_stream(kw) -> None:
    """The streamed final response and `from_chat_completion` agree item for item (ids aside)."""
    request = load_body(CAPTURES / "codex__subagent__0001_POST_v1_responses.json.gz")
    body = run(request, stream_chunks(**kw))
    sdk_stream(body)  # the SDK accepts it ...
    streamed = Response.model_validate(decode(body)[-1]["response"])  # ... and the final object is typed
    whole = Response.model_validate(responses.from_chat_completion(chat_completion(**kw), request))
    strip = lambda o: {k: v for k, v in o.model_dump().items() if k != "id"}  # noqa: E731
    assert [strip(o) for o in streamed.output] == [strip(o) for o in whole.output]
    assert (streamed.status, streamed.usage) == (whole.status, whole.usage)
