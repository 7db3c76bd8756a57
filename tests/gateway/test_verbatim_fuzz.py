"""Garbage echoed back, a 400 out: verbatim history never raises anything but a client's refusal.

Verbatim history reads every assistant turn a rollout echoes once the rollout has an answer, on the
chat body the engine gets (a Chat client's own, or a Responses / Anthropic body translated). Any
turn it cannot read is either left alone or the client's 400 (`GatewayError`), in every protocol.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openforgerl.gateway.errors import GatewayError
from openforgerl.gateway.protocols import ProtocolError, anthropic, responses
from openforgerl.gateway.verbatim import EchoMemory

SAMPLED = ["ok", '<tool_call>{"name": "bash", "arguments": {"cmd": "ls"}}</tool_call>']
KEYS = st.sampled_from(
    [
        "role",
        "content",
        "tool_calls",
        "function",
        "name",
        "arguments",
        "id",
        "type",
        "reasoning_content",
        "reasoning",
        "text",
        "input",
        "call_id",
        "tool_use_id",
    ]
)
LEAF = (
    st.none()
    | st.booleans()
    | st.integers(-2, 2**70)
    | st.floats(allow_nan=False)
    | st.sampled_from(
        [
            "assistant",
            "user",
            "function",
            "bash",
            "ok",
            '{"cmd": "ls"}',
            "text",
            "tool_use",
            "function_call",
            "",
        ]
    )
)
SHAPED = st.recursive(
    LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=5), max_leaves=25
)
ASSISTANT = st.fixed_dictionaries(
    {"role": st.just("assistant")},
    optional={"content": SHAPED, "tool_calls": SHAPED, "reasoning_content": SHAPED},
)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _memory() -> EchoMemory:
    memory = EchoMemory()
    for raw in SAMPLED:
        memory.remember(raw)
    return memory


def _rewrite_or_400(body: dict[str, Any]) -> None:
    try:
        asyncio.run(_memory().rewrite(body, None, "r"))
    except GatewayError as err:
        assert err.status == 400 and err.message


@SETTINGS
@given(turns=st.lists(ASSISTANT | SHAPED, min_size=1, max_size=4))
def test_chat_echoes(turns: list[Any]) -> None:
    _rewrite_or_400({"model": "m", "messages": [{"role": "user", "content": "hi"}, *turns]})


@pytest.mark.parametrize("mod", [responses, anthropic], ids=["responses", "anthropic"])
@SETTINGS
@given(items=st.lists(SHAPED, min_size=1, max_size=4))
def test_translated_echoes(mod: Any, items: list[Any]) -> None:
    body = {"model": "m", "max_tokens": 5, "input": items, "messages": items}
    try:
        chat = mod.to_chat_request(body)
    except ProtocolError:
        return  # refused by the translator: a 4xx already
    _rewrite_or_400(chat)


def test_control_a_well_formed_echo_is_rewritten() -> None:
    """The fuzzed path is the one that runs: a turn that means what the model sampled is replaced."""
    turn = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd":"ls"}'}}
        ],
    }
    out = asyncio.run(_memory().rewrite({"messages": [{"role": "user", "content": "hi"}, turn]}, None, "r"))
    assert out is not None and out["messages"][1] == {"role": "assistant", "content": SAMPLED[1]}
