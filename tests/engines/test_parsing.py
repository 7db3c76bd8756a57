"""The reasoning/tool split matches vLLM 0.32 (hermes + qwen3). Expected values were produced by vLLM's own
parser classes (`ParserManager.get_parser("hermes", "qwen3")`) on the same texts; the contract suite
checks the live servers agree too."""

from __future__ import annotations

import json

import pytest

from openforgerl.engines.local.parsing import parse_vllm, stream_view

CALL = '<tool_call>\n{"name": "todo_add", "arguments": {"title": "x"}}\n</tool_call>'
X = '{"title": "x"}'
CASES = [  # text, parse_tools, (reasoning, content, calls)
    ("<think>\nplan\n</think>\n\n" + CALL, True, ("\nplan\n", None, [("todo_add", X)])),
    ("<think>\nplan\n</think>\n\nAdded it.", True, ("\nplan\n", "\n\nAdded it.", [])),
    ("<think>\nplan\n</think>\n\nSure.\n" + CALL, True, ("\nplan\n", "\n\nSure.\n", [("todo_add", X)])),
    ("no think at all", True, ("no think at all", None, [])),
    ("no think " + CALL, True, ("no think ", None, [("todo_add", X)])),
    (CALL, True, (None, None, [("todo_add", X)])),
    ("<think>\nunclosed", True, ("\nunclosed", None, [])),
    ("<think>a<think>b</think>c</think>d", True, ("ab", "cd", [])),
    (
        "<think>\nplan\n</think>\n\n" + CALL + "\n" + CALL.replace('"x"', '"y"'),
        True,
        ("\nplan\n", None, [("todo_add", X), ("todo_add", '{"title": "y"}')]),
    ),
    (
        "<think>\nplan\n</think>\n\n<tool_call>\n{bad json}\n</tool_call>",
        True,
        ("\nplan\n", "\n\n<tool_call>\n{bad json}\n</tool_call>", []),
    ),
    (
        '<think>\np\n</think>\n\n<tool_call>\n{"name":"todo_add","arguments":{"title":"x"}}\n</tool_call>',
        True,
        ("\np\n", None, [("todo_add", X)]),
    ),
    (
        '<think>\np\n</think>\n\n<tool_call>\n{"name": "todo_add", "arguments": {"title": "x"}}',
        True,
        ("\np\n", None, [("todo_add", X)]),
    ),
    ("<think>\np\n</think>\n\n" + CALL + " trailing", True, ("\np\n", None, [("todo_add", X)])),
    (
        '<think>\np\n</think>\n\n<tool_call>\n{"name": "todo_add"}\n</tool_call>',
        True,
        ("\np\n", '\n\n<tool_call>\n{"name": "todo_add"}\n</tool_call>', []),
    ),
    ("", True, (None, None, [])),
    ("<think>\nplan\n</think>\n\n" + CALL, False, ("\nplan\n", "\n\n" + CALL, [])),
    ("no think " + CALL, False, ("no think ", CALL, [])),
]


@pytest.mark.parametrize(("text", "tools", "expected"), CASES)
def test_parse_matches_vllm(text, tools, expected):
    out = parse_vllm(text, parse_tools=tools)
    assert (out.reasoning, out.content, [(c.name, c.arguments) for c in out.tool_calls]) == expected


def test_non_ascii_arguments_are_kept():
    out = parse_vllm(
        '<tool_call>\n{"name": "t", "arguments": {"a": "\\u00e9"}}\n</tool_call>', parse_tools=True
    )
    assert out.tool_calls[0].arguments == '{"a": "é"}' and json.loads(out.tool_calls[0].arguments) == {
        "a": "é"
    }


def test_thinking_disabled_means_content():
    out = parse_vllm("plain answer", parse_tools=True, thinking=False)
    assert (out.reasoning, out.content) == (None, "plain answer")


def test_stream_view_holds_back_partial_markers():
    assert stream_view("<think>\nabc</thi", parse_tools=True) == ("\nabc", "")
    assert stream_view("<think>\na</think>\n\nhello <tool_", parse_tools=True) == ("\na", "\n\nhello ")
    assert stream_view("<think>\na</think>\n\nhi " + CALL, parse_tools=True) == ("\na", "\n\nhi ")
    assert stream_view("still thinking", parse_tools=True) == ("still thinking", "")
