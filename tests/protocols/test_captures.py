"""Every real Codex / Claude Code / OpenClaw request translates to a faithful chat request."""

from __future__ import annotations

import json
from typing import Any

import pytest
from protokit import CAPTURES, captures, load, load_body

from openforgerl.gateway.protocols import ProtocolError, anthropic, responses

RESPONSES = captures("/responses")
MESSAGES = captures("/messages")


def test_captures_present() -> None:
    assert len(RESPONSES) >= 7 and len(MESSAGES) >= 7


def _tool_names(body: dict[str, Any]) -> list[str]:
    names = []
    for t in body.get("tools") or []:
        if t["type"] == "function":
            names.append(t["name"])
        elif t["type"] == "namespace":
            names += [f"{t['name']}.{m['name']}" for m in t["tools"]]
    return names


@pytest.mark.parametrize("path", RESPONSES, ids=lambda p: p.name)
def test_responses_capture(path) -> None:
    body = load_body(path)
    t = responses.translate_request(body)
    chat = t.chat
    assert chat["model"] == body["model"] and chat["stream"] is True
    assert [x["function"]["name"] for x in chat["tools"]] == _tool_names(body)
    hosted = [x["type"] for x in body["tools"] if x["type"] not in ("function", "namespace")]
    assert all(any(h in n for n in t.notes) for h in hosted)
    msgs = chat["messages"]
    # all leading developer/system items fold into the one first system message
    lead = [i for i in body["input"] if i.get("role") in ("developer", "system")]
    assert msgs[0]["role"] == "system" and all(p["content"][0]["text"] in msgs[0]["content"] for p in lead)
    assert sum(m["role"] == "system" for m in msgs) == 1
    _check_calls_and_outputs(body["input"], msgs)


def _check_calls_and_outputs(items: list[dict[str, Any]], msgs: list[dict[str, Any]]) -> None:
    calls = {c["id"]: c["function"] for m in msgs for c in m.get("tool_calls") or []}
    outputs = {m["tool_call_id"]: m["content"] for m in msgs if m["role"] == "tool"}
    for item in items:
        if item["type"] == "function_call":
            fn = calls[item["call_id"]]
            # the engine's json.dumps spacing: byte for byte for Codex, re-spaced for OpenClaw's compact JSON
            assert fn["arguments"] == json.dumps(json.loads(item["arguments"]), ensure_ascii=False)
            assert fn["name"] == (
                f"{item['namespace']}.{item['name']}" if item.get("namespace") else item["name"]
            )
        elif item["type"] == "function_call_output":
            assert outputs[item["call_id"]] == item["output"]
    # a tool message always follows the assistant message that made the call
    for i, m in enumerate(msgs):
        if m["role"] == "tool":
            assert msgs[i - 1]["role"] in ("assistant", "tool")


def test_namespaced_call_maps_back() -> None:
    body = load_body(CAPTURES / "codex__subagent__0002_POST_v1_responses.json.gz")
    names = responses.ToolNames.from_request(body["tools"])
    ref = names.lookup("multi_agent_v1.spawn_agent")
    assert (ref.name, ref.namespace, ref.custom) == ("spawn_agent", "multi_agent_v1", False)
    assert names.lookup("exec_command").namespace is None
    chat = responses.to_chat_request(body)
    call = next(m for m in chat["messages"] if m.get("tool_calls"))["tool_calls"][0]
    assert call["function"]["name"] == "multi_agent_v1.spawn_agent"


def test_previous_response_id_refused() -> None:
    body = load_body(CAPTURES / "codex_ws__0004_previous_response_id.json.gz")
    with pytest.raises(ProtocolError) as err:
        responses.to_chat_request(body)
    assert err.value.status == 400 and "previous_response_id" in err.value.message


@pytest.mark.parametrize("path", MESSAGES, ids=lambda p: p.name)
def test_messages_capture(path) -> None:
    body = load_body(path)
    t = anthropic.translate_request(body)
    chat = t.chat
    assert chat["max_tokens"] == body["max_tokens"] and chat["stream"] is True
    assert [x["function"]["name"] for x in chat.get("tools", [])] == [
        x["name"] for x in body.get("tools") or []
    ]
    assert [x["function"]["parameters"] for x in chat.get("tools", [])] == [
        x["input_schema"] for x in body.get("tools") or []
    ]
    dumped = json.dumps(chat)
    assert "cache_control" not in dumped and anthropic.BILLING_HEADER not in dumped
    msgs = chat["messages"]
    assert msgs[0]["role"] == "system" and msgs[0]["content"]
    _check_anthropic_history(body["messages"], msgs)


def _check_anthropic_history(src: list[dict[str, Any]], msgs: list[dict[str, Any]]) -> None:
    calls = {c["id"]: c["function"] for m in msgs for c in m.get("tool_calls") or []}
    results = {m["tool_call_id"]: m["content"] for m in msgs if m["role"] == "tool"}
    mid_system = [m["content"] for m in src if m["role"] == "system"]
    assert [m["content"] for m in msgs[1:] if m["role"] == "system"] == mid_system  # kept in place, in order
    for m in src:
        for b in m["content"] if isinstance(m["content"], list) else ():
            if b["type"] == "tool_use":
                assert (
                    json.loads(calls[b["id"]]["arguments"]) == b["input"]
                    and calls[b["id"]]["name"] == b["name"]
                )
            elif b["type"] == "tool_result":
                c = b["content"]
                assert results[b["tool_use_id"]] == (
                    c if isinstance(c, str) else "\n".join(x["text"] for x in c)
                )


def test_claude_system_in_the_middle_stays_between_user_and_assistant() -> None:
    body = load_body(CAPTURES / "claude__turn2_request_with_tool_result.json.gz")
    roles = [m["role"] for m in anthropic.to_chat_request(body)["messages"]]
    assert roles == ["system", "user", "system", "assistant", "tool"]


def test_claude_title_side_call_gets_json_schema() -> None:
    body = load_body(CAPTURES / "claude__side_call_title_generation.json.gz")
    chat = anthropic.to_chat_request(body)
    assert chat["response_format"]["json_schema"]["schema"] == body["output_config"]["format"]["schema"]
    assert "tools" not in chat


def test_turn2_extends_turn1() -> None:
    """The next call's chat messages start with the previous call's messages (prefix-stable)."""
    for a, b in (
        ("codex__turn1_request", "codex__turn2_request_with_tool_output"),
        ("claude__turn1_request", "claude__turn2_request_with_tool_result"),
        ("openclaw__responses_turn1_request", "openclaw__responses_turn2_request"),
    ):
        mod = anthropic if a.startswith("claude") else responses
        m1 = mod.to_chat_request(load_body(CAPTURES / f"{a}.json.gz"))["messages"]
        m2 = mod.to_chat_request(load_body(CAPTURES / f"{b}.json.gz"))["messages"]
        assert m2[: len(m1)] == m1, a


@pytest.mark.parametrize("path", RESPONSES + MESSAGES, ids=lambda p: p.name)
def test_translation_is_pure(path) -> None:
    """The request is left untouched (the gateway records it as received)."""
    body = load_body(path)
    before = json.dumps(body, sort_keys=True)
    mod = responses if "/responses" in load(path)["path"] else anthropic
    try:
        mod.to_chat_request(body)
    except ProtocolError:
        pass
    assert json.dumps(body, sort_keys=True) == before


def test_codex_arguments_byte_for_byte_openclaw_respaced() -> None:
    codex = load_body(CAPTURES / "codex__turn2_request_with_tool_output.json.gz")
    sent = next(i for i in codex["input"] if i["type"] == "function_call")["arguments"]
    chat = responses.to_chat_request(codex)
    assert (
        next(m for m in chat["messages"] if m.get("tool_calls"))["tool_calls"][0]["function"]["arguments"]
        == sent
    )
    claw = load_body(CAPTURES / "openclaw__responses_turn2_request.json.gz")
    sent = next(i for i in claw["input"] if i["type"] == "function_call")["arguments"]
    assert sent.startswith('{"command":"')  # OpenClaw re-serialized our answer compactly
    chat = responses.to_chat_request(claw)
    got = next(m for m in chat["messages"] if m.get("tool_calls"))["tool_calls"][0]["function"]["arguments"]
    assert got == '{"command": "' + json.loads(sent)["command"] + '"}'
