"""Garbage in, ProtocolError (a 4xx) out: the translators never raise anything else."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protokit import CAPTURES, load_body

from openforgerl.gateway.protocols import ProtocolError, anthropic, responses
from openforgerl.gateway.protocols.anthropic import _request as anthropic_request
from openforgerl.gateway.protocols.responses import _request as responses_request

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
KEYS = st.sampled_from(
    [
        "model",
        "input",
        "messages",
        "tools",
        "system",
        "instructions",
        "tool_choice",
        "type",
        "role",
        "content",
        "text",
        "name",
        "call_id",
        "arguments",
        "output",
        "max_tokens",
        "tool_use_id",
        "input_schema",
        "source",
        "stream",
        "parameters",
        "namespace",
        "id",
    ]
)
SHAPED = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-2, 5)
    | st.sampled_from(
        [
            "message",
            "user",
            "assistant",
            "system",
            "developer",
            "function_call",
            "function_call_output",
            "reasoning",
            "text",
            "tool_use",
            "tool_result",
            "image",
            "thinking",
            "function",
            "namespace",
            "custom",
            "input_text",
            "base64",
            "url",
            "tool",
            "any",
            "auto",
            "m",
            "",
        ]
    ),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=30,
)
SEEDS = {
    "responses": load_body(CAPTURES / "codex__subagent__0002_POST_v1_responses.json.gz"),
    "anthropic": load_body(CAPTURES / "claude__turn2_request_with_tool_result.json.gz"),
}
MODULES = {"responses": responses, "anthropic": anthropic}
RAW_TRANSLATE = {responses: responses_request._translate, anthropic: anthropic_request._translate}
SETTINGS = settings(
    max_examples=int(__import__("os").environ.get("FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def only_protocol_errors(mod: Any, body: Any) -> None:
    """Checked without the `boundary` net: validation alone refuses every body translation can't take."""
    try:
        mod.validate_request.__wrapped__(body)
    except ProtocolError as err:
        assert 400 <= err.status < 500
        with pytest.raises(ProtocolError):
            mod.to_chat_request(body)
        return
    chat = RAW_TRANSLATE[mod].__wrapped__(body).chat
    assert isinstance(chat["messages"], list) and mod.to_chat_request(body) == chat
    folded = RAW_TRANSLATE[mod].__wrapped__(body, True).chat["messages"]
    assert all(m["role"] != "system" for m in folded[1:])


@pytest.mark.parametrize("name", MODULES)
@SETTINGS
@given(body=JSON | SHAPED)
def test_random_bodies(name, body) -> None:
    only_protocol_errors(MODULES[name], body)


@pytest.mark.parametrize("name", MODULES)
@SETTINGS
@given(
    body=st.fixed_dictionaries(
        {
            "model": st.just("m"),
            "max_tokens": st.just(5),
            "input": SHAPED,
            "messages": st.lists(SHAPED, max_size=4),
        },
        optional={"tools": SHAPED, "tool_choice": SHAPED, "system": SHAPED},
    )
)
def test_shaped_bodies(name, body) -> None:
    only_protocol_errors(MODULES[name], body)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:6]):
            out += _paths(v, (*prefix, i))
    return out


@pytest.mark.parametrize("name", MODULES)
@SETTINGS
@given(data=st.data())
def test_mutated_captures(name, data) -> None:
    """A real request with one field anywhere replaced by something random."""
    body = copy.deepcopy(SEEDS[name])
    paths = _paths(body)[1:]
    for _ in range(data.draw(st.integers(1, 3))):
        path = paths[data.draw(st.integers(0, len(paths) - 1))]
        target = body
        try:
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = data.draw(SHAPED | JSON)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed this path
    only_protocol_errors(MODULES[name], body)
