"""Request translation details the captures do not exercise: images, choices, formats, prefill."""

from __future__ import annotations

import pytest

from openforgerl.gateway.protocols import ProtocolError, anthropic, responses

PNG = "iVBORw0KGgo="


def test_anthropic_image_and_tool_result_blocks() -> None:
    body = {
        "model": "m",
        "max_tokens": 9,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "is_error": True,
                        "content": [
                            {"type": "text", "text": "boom"},
                            {"type": "image", "source": {"type": "url", "url": "http://x/y.png"}},
                        ],
                    },
                    {"type": "text", "text": "and?", "cache_control": {"type": "ephemeral"}},
                ],
            },
        ],
    }
    msgs = anthropic.to_chat_request(body)["messages"]
    assert msgs[0] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ],
    }
    assert msgs[1]["tool_calls"][0]["function"] == {"name": "Read", "arguments": "{}"}
    assert msgs[2] == {
        "role": "tool",
        "tool_call_id": "toolu_1",
        "content": [
            {"type": "text", "text": "boom"},
            {"type": "image_url", "image_url": {"url": "http://x/y.png"}},
        ],
    }
    assert msgs[3] == {"role": "user", "content": "and?"}


def test_anthropic_options() -> None:
    body = {
        "model": "m",
        "max_tokens": 9,
        "system": "sys",
        "stop_sequences": ["X"],
        "temperature": 0.5,
        "top_k": 4,
        "thinking": {"type": "disabled"},
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure:"}],
        "tools": [
            {"name": "t", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search"},
        ],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
    }
    t = anthropic.translate_request(body)
    chat = t.chat
    assert chat["messages"][0] == {"role": "system", "content": "sys"}
    assert (chat["stop"], chat["temperature"], chat["top_k"]) == (["X"], 0.5, 4)
    assert chat["chat_template_kwargs"] == {"enable_thinking": False}
    assert chat["tool_choice"] == "required" and chat["parallel_tool_calls"] is False
    assert [x["function"]["name"] for x in chat["tools"]] == ["t"] and any("web_search" in n for n in t.notes)
    assert chat["continue_final_message"] is True and chat["add_generation_prompt"] is False
    body["tool_choice"] = {"type": "tool", "name": "t"}
    assert anthropic.to_chat_request(body)["tool_choice"] == {"type": "function", "function": {"name": "t"}}


def test_anthropic_system_between_tool_use_and_result_moves_after() -> None:
    body = {
        "model": "m",
        "max_tokens": 9,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
            {"role": "system", "content": "note"},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "r"}]},
        ],
    }
    roles = [m["role"] for m in anthropic.to_chat_request(body)["messages"]]
    assert roles == ["user", "assistant", "tool", "system"]


def test_responses_items_and_options() -> None:
    body = {
        "model": "m",
        "instructions": "be brief",
        "max_output_tokens": 50,
        "temperature": 0.2,
        "reasoning": {"effort": "none"},
        "text": {"format": {"type": "json_schema", "name": "o", "schema": {}}},
        "tool_choice": {"type": "function", "name": "f"},
        "tools": [
            {"type": "function", "name": "f", "strict": True, "parameters": {"type": "object"}},
            {"type": "file_search"},
        ],
        "input": [
            {"role": "developer", "content": "dev"},
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "see"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AA"},
                ],
            },
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "sum"}]},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "f", "arguments": '{"x":1}'},
            {"type": "function_call_output", "call_id": "c1", "output": "r1"},
            {
                "type": "function_call_output",
                "call_id": "c2",
                "output": [{"type": "input_text", "text": "r2"}],
            },
            {"type": "item_reference", "id": "x"},
            {"role": "system", "content": "later"},
        ],
    }
    t = responses.translate_request(body)
    chat = t.chat
    assert chat["messages"] == [
        {"role": "system", "content": "be brief\n\ndev"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "see"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
            ],
        },
        {
            "role": "assistant",
            "content": "a",
            "reasoning": "sum",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
        {"role": "tool", "tool_call_id": "c2", "content": "r2"},
        {"role": "system", "content": "later"},
    ]
    assert chat["max_tokens"] == 50 and chat["temperature"] == 0.2
    assert chat["chat_template_kwargs"] == {"enable_thinking": False}
    assert chat["response_format"]["json_schema"]["name"] == "o"
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert any("file_search" in n for n in t.notes) and any("item_reference" in n for n in t.notes)


def test_responses_string_input() -> None:
    chat = responses.to_chat_request({"model": "m", "input": "hello"})
    assert chat == {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


@pytest.mark.parametrize(
    "body,param",
    [
        ([], None),
        ({"model": "m"}, "input"),
        ({"model": "m", "input": 3}, "input"),
        ({"model": "m", "input": [{"type": "message", "role": "robot", "content": "x"}]}, "input[0]"),
        (
            {
                "model": "m",
                "input": [{"type": "function_call", "name": "f", "call_id": "c", "arguments": {}}],
            },
            "input[0]",
        ),
        ({"model": "m", "input": "x", "temperature": "hot"}, "temperature"),
        ({"model": "m", "input": "x", "tools": [{"type": "function"}]}, "tools[0]"),
        ({"model": "m", "input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ],
)
def test_responses_refusals(body, param) -> None:
    with pytest.raises(ProtocolError) as err:
        responses.to_chat_request(body)
    assert err.value.status == 400 and err.value.param == param


@pytest.mark.parametrize(
    "body,param",
    [
        ({"max_tokens": 5, "messages": []}, "model"),
        ({"model": "m", "messages": []}, "max_tokens"),
        ({"model": "m", "max_tokens": 5}, "messages"),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "x"}]}],
            },
            "messages.0.content.0",
        ),
        (
            {"model": "m", "max_tokens": 5, "messages": [], "tool_choice": {"type": "sometimes"}},
            "tool_choice",
        ),
        (
            {
                "model": "m",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]}],
            },
            "messages.0.content.0",
        ),
    ],
)
def test_anthropic_refusals(body, param) -> None:
    with pytest.raises(ProtocolError) as err:
        anthropic.to_chat_request(body)
    assert err.value.status == 400 and err.value.param == param


def test_fold_system_into_neighbours() -> None:
    body = {
        "model": "m",
        "max_tokens": 9,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "system", "content": "s1"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "r"}]},
            {"role": "system", "content": "s2"},
            {"role": "assistant", "content": "done"},
            {"role": "system", "content": "s3"},
            {"role": "user", "content": [{"type": "text", "text": "more"}, {"type": "text", "text": "!"}]},
            {"role": "assistant", "content": "ok"},
            {"role": "system", "content": "s4"},
        ],
    }
    msgs = anthropic.to_chat_request(body, fold_system=True)["messages"]
    assert msgs == [
        {"role": "user", "content": "go\n\ns1"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "a", "type": "function", "function": {"name": "t", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "a", "content": "r\n\ns2"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "s3\n\nmore!"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "s4"},
    ]
    assert all(m["role"] != "system" for m in msgs)
