"""Response building from token ids: tool calls, reasoning, stream deltas vs the non-stream message.

The ids come from the real tokenizer encoding model-native text (what a policy could sample), so these
tests pin the parsing layer independently of what the tiny model happens to generate.
"""

from __future__ import annotations

import json

import pytest

from openforgerl.engines.chat_format import format_tool_call
from openforgerl.engines.local.generation import Generation
from openforgerl.engines.local.requests import ChatOptions
from openforgerl.engines.local.responses import ChatStreamState, chat_choice, visible_text

EOS = (2, 0)


def _opts(**kw) -> ChatOptions:
    base = dict(
        tools=[{}],
        parse_tools=True,
        include_reasoning=True,
        return_token_ids=True,
        logprobs=True,
        stream=False,
        include_usage=False,
        n=1,
    )
    return ChatOptions(**{**base, **kw})


def _gen(chat, text: str, finish: str = "stop") -> Generation:
    ids = chat.encode(text) + ([chat.eos_token_id] if finish == "stop" else [])
    return Generation(ids, [-0.5] * len(ids), [()] * len(ids), finish, None)


TOOL_TEXT = "<think>\nI need to add a todo.\n</think>\n\n" + format_tool_call(
    "todo_add", {"title": "buy milk"}
)
ANSWER_TEXT = "<think>\nThe tool succeeded.\n</think>\n\nAdded the todo 'buy milk'."


def test_tool_call_choice(chat):
    choice = chat_choice(chat, 0, _gen(chat, TOOL_TEXT), _opts(), EOS)
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "todo_add"
    assert json.loads(call["function"]["arguments"]) == {"title": "buy milk"}
    assert choice["message"]["reasoning"] == "\nI need to add a todo.\n"  # vLLM keeps the newlines
    assert choice["token_ids"][-1] == chat.eos_token_id
    assert chat.decode(choice["token_ids"][:-1]) == TOOL_TEXT
    assert len(choice["logprobs"]["content"]) == len(choice["token_ids"])


def test_tool_choice_none_leaves_text(chat):
    choice = chat_choice(chat, 0, _gen(chat, TOOL_TEXT), _opts(parse_tools=False), EOS)
    assert "tool_calls" not in choice["message"] and "<tool_call>" in choice["message"]["content"]
    assert choice["finish_reason"] == "stop"


def test_include_reasoning_false_hides_reasoning_ids_and_logprobs(chat):
    """vLLM quirk kept on purpose: with include_reasoning=false it drops token_ids and logprobs too."""
    choice = chat_choice(chat, 0, _gen(chat, ANSWER_TEXT), _opts(include_reasoning=False), EOS)
    assert (
        choice["message"]["reasoning"] is None and choice["token_ids"] is None and choice["logprobs"] is None
    )
    assert choice["message"]["content"] == "\n\nAdded the todo 'buy milk'."


def test_length_finish_keeps_all_text(chat):
    gen = _gen(chat, "<think>\nhalf a thou", finish="length")
    assert visible_text(chat, gen.token_ids, "length", None, EOS) == "<think>\nhalf a thou"


@pytest.mark.parametrize(
    "text", [TOOL_TEXT, ANSWER_TEXT, "no think, <tool_ not a call", "<think>\nx</think>\n\nA <tool_ b"]
)
def test_stream_deltas_add_up_to_the_message(chat, text):
    gen = _gen(chat, text)
    opts = _opts()
    message = chat_choice(chat, 0, gen, opts, EOS)["message"]
    state, deltas = ChatStreamState(0), []
    for k, tid in enumerate(gen.token_ids):
        state.ids.append(tid)
        last = k == len(gen.token_ids) - 1
        shown = visible_text(chat, state.ids, "stop" if last else None, None, EOS)
        deltas.append(state.final_delta(shown, opts)[0] if last else state.delta(shown, opts))
    content = "".join(d.get("content", "") for d in deltas)
    assert content.strip() == (message["content"] or "").strip()
    calls = [c for d in deltas for c in d.get("tool_calls", [])]
    assert [c["function"] for c in calls] == [c["function"] for c in message.get("tool_calls", [])]
    reasoning = "".join(d.get("reasoning", "") for d in deltas)
    assert reasoning == (message["reasoning"] or "")
