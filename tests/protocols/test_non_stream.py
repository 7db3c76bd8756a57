"""Non-streamed answers and errors, parsed by the official SDK clients; next-turn round trips."""

from __future__ import annotations

import json

import anthropic as anthropic_sdk
import openai
import orjson
import pytest
from openai.types.responses import Response
from protokit import CAPTURES, chat_completion, load_body, mock_http

from openforgerl.gateway.protocols import anthropic, responses

CODEX = load_body(CAPTURES / "codex__subagent__0001_POST_v1_responses.json.gz")
CLAUDE = load_body(CAPTURES / "claude__turn2_request_with_tool_result.json.gz")


def openai_client(status: int, body: dict) -> openai.OpenAI:
    http = mock_http(status, orjson.dumps(body), "application/json")
    return openai.OpenAI(api_key="k", base_url="http://gw/v1", http_client=http, max_retries=0)


def anthropic_client(status: int, body: dict) -> anthropic_sdk.Anthropic:
    http = mock_http(status, orjson.dumps(body), "application/json")
    return anthropic_sdk.Anthropic(api_key="k", base_url="http://gw", http_client=http, max_retries=0)


def test_responses_non_stream_via_sdk() -> None:
    chat = chat_completion(
        reasoning="plan", content="ok", calls=[("call_1", "multi_agent_v1.spawn_agent", '{"message": "x"}')]
    )
    body = responses.from_chat_completion(chat, CODEX)
    Response.model_validate(body)
    got = openai_client(200, body).responses.create(model="m", input="hi")
    assert [o.type for o in got.output] == ["reasoning", "message", "function_call"]
    assert (
        got.output_text == "ok"
        and got.output[2].namespace == "multi_agent_v1"
        and got.output[2].name == "spawn_agent"
    )
    assert got.usage.total_tokens == 18 and got.status == "completed"


def test_anthropic_non_stream_via_sdk() -> None:
    chat = chat_completion(reasoning="plan", content="ok", calls=[("call_1", "Bash", '{"command": "ls"}')])
    body = anthropic.from_chat_completion(chat, CLAUDE)
    anthropic_sdk.types.Message.model_validate(body)
    got = anthropic_client(200, body).messages.create(
        model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
    )
    assert [b.type for b in got.content] == ["thinking", "text", "tool_use"]
    assert got.content[2].input == {"command": "ls"} and got.stop_reason == "tool_use"


def test_bad_tool_arguments_kept_raw() -> None:
    body = anthropic.from_chat_completion(chat_completion(calls=[("c", "Bash", "{not json")]), CLAUDE)
    assert body["content"][0]["input"] == {"raw": "{not json"}


@pytest.mark.parametrize(
    "status,exc",
    [
        (400, openai.BadRequestError),
        (401, openai.AuthenticationError),
        (404, openai.NotFoundError),
        (503, openai.InternalServerError),
    ],
)
def test_openai_error_shape(status, exc) -> None:
    body = responses.error_body(status, "nope")
    assert set(body["error"]) == {"message", "type", "param", "code"}
    with pytest.raises(exc) as err:
        openai_client(status, body).responses.create(model="m", input="hi")
    assert err.value.message.endswith("nope") or "nope" in str(err.value)


@pytest.mark.parametrize(
    "status,kind,exc",
    [
        (400, "invalid_request_error", anthropic_sdk.BadRequestError),
        (401, "authentication_error", anthropic_sdk.AuthenticationError),
        (404, "not_found_error", anthropic_sdk.NotFoundError),
        (413, "request_too_large", anthropic_sdk.APIStatusError),
        (503, "overloaded_error", anthropic_sdk.InternalServerError),
        (529, "overloaded_error", anthropic_sdk.APIStatusError),
        (500, "api_error", anthropic_sdk.InternalServerError),
    ],
)
def test_anthropic_error_shape(status, kind, exc) -> None:
    body = anthropic.error_body(status, "nope")
    assert body == {"type": "error", "error": {"type": kind, "message": "nope"}}
    with pytest.raises(exc) as err:
        anthropic_client(status, body).messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
    assert err.value.body["error"]["type"] == kind


def test_codex_round_trip_keeps_reasoning_and_arguments() -> None:
    """Codex echoes our output items (dropping reasoning `content`, keeping `encrypted_content`):
    the next chat request holds the same assistant turn the engine produced."""
    args = '{"message": "Create proof.txt"}'
    chat = chat_completion(
        reasoning="\nthink\n", content="\n\nok", calls=[("call_7", "multi_agent_v1.spawn_agent", args)]
    )
    out = responses.from_chat_completion(chat, CODEX)["output"]
    echoed = [
        {k: v for k, v in item.items() if not (item["type"] == "reasoning" and k == "content")}
        for item in out
    ]
    result = {"type": "function_call_output", "call_id": "call_7", "output": "spawned"}
    turn2 = dict(CODEX, input=CODEX["input"] + echoed + [result])
    msgs = responses.to_chat_request(turn2)["messages"]
    engine_msg = chat["choices"][0]["message"]
    assistant = msgs[-2]
    assert assistant == {
        "role": "assistant",
        "content": engine_msg["content"],
        "reasoning": engine_msg["reasoning"],
        "tool_calls": engine_msg["tool_calls"],
    }
    assert msgs[-1] == {"role": "tool", "tool_call_id": "call_7", "content": "spawned"}


def test_claude_round_trip_keeps_reasoning_and_arguments() -> None:
    args = '{"command": "echo \\u00e9t\\u00e9", "timeout": 5}'
    vllm_args = json.dumps(json.loads(args), ensure_ascii=False)  # what vLLM's hermes parser emits
    chat = chat_completion(reasoning="think", content="run", calls=[("chatcmpl-tool-9", "Bash", vllm_args)])
    message = anthropic.from_chat_completion(chat, CLAUDE)
    tool_id = message["content"][2]["id"]
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "été"}]}
    turn2 = dict(
        CLAUDE, messages=CLAUDE["messages"] + [{"role": "assistant", "content": message["content"]}, result]
    )
    msgs = anthropic.to_chat_request(turn2)["messages"]
    assert msgs[-2] == {
        "role": "assistant",
        "content": "run",
        "reasoning": "think",
        "tool_calls": [
            {"id": tool_id, "type": "function", "function": {"name": "Bash", "arguments": vllm_args}}
        ],
    }
    assert msgs[-1] == {"role": "tool", "tool_call_id": tool_id, "content": "été"}


def test_count_tokens() -> None:
    seen = {}

    def counter(chat: dict) -> int:
        seen.update(chat)
        return sum(len(str(m["content"])) for m in chat["messages"])

    body = {k: v for k, v in CLAUDE.items() if k != "max_tokens"}
    got = anthropic.count_tokens(body, counter)
    assert got == {"input_tokens": counter(anthropic.to_chat_request(CLAUDE))} and got["input_tokens"] > 0
    assert len(seen["tools"]) == len(CLAUDE["tools"])
