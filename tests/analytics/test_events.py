"""Tool events from the three wire protocols and from the services' audit, merged into one stream."""

from __future__ import annotations

from typing import Any

from openforgerl.analytics.effects import Effect, classify, claw_tool_from_shell, normalize_tool, shell_effect
from openforgerl.analytics.events import audit_events, call_events, rollout_events
from openforgerl.records import CallRecord, WireProtocol

SYSTEM = {"role": "system", "content": "sys"}
USER = {"role": "user", "content": "do it"}


def _call(i: int, protocol: WireProtocol, request: dict[str, Any], t: float | None = None) -> CallRecord:
    t = float(i) if t is None else t
    return CallRecord(
        rollout_id="r", index=i, protocol=protocol, request=request, started_at=t, finished_at=t + 0.5
    )


def _chat_tc(cid: str, name: str, args: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}],
    }


def test_chat_tool_calls_and_results_from_the_next_request() -> None:
    h1 = [SYSTEM, USER]
    h2 = [
        *h1,
        _chat_tc("c1", "mail_list", "{}"),
        {"role": "tool", "tool_call_id": "c1", "content": '{"messages": []}'},
    ]
    h3 = [
        *h2,
        _chat_tc("c2", "mail_send", '{"to": "a@b", "subject": "s", "body": "b"}'),
        {
            "role": "tool",
            "tool_call_id": "c2",
            "content": "error (503): service temporarily unavailable, retry",
        },
    ]
    calls = [_call(i, WireProtocol.CHAT, {"messages": h}) for i, h in enumerate((h1, h2, h3))]
    events = call_events(calls)
    assert [(e.tool, e.effect, e.ok, e.call_index, e.status) for e in events] == [
        ("mail_list", Effect.READ, True, 0, None),
        ("mail_send", Effect.WRITE, False, 1, 503),
    ]
    assert events[1].args == {"to": "a@b", "subject": "s", "body": "b"}
    assert events[0].output == '{"messages": []}'


def test_responses_function_call_and_output() -> None:
    items1 = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}]
    items2 = [
        *items1,
        {
            "type": "function_call",
            "call_id": "f1",
            "name": "shell",
            "arguments": '{"command": ["bash", "-lc", "cat notes.txt"]}',
        },
        {
            "type": "function_call_output",
            "call_id": "f1",
            "output": '{"output": "hi", "metadata": {"exit_code": 0}}',
        },
        {
            "type": "function_call",
            "call_id": "f2",
            "name": "shell",
            "arguments": '{"command": ["bash", "-lc", "ls nope"]}',
        },
        {
            "type": "function_call_output",
            "call_id": "f2",
            "output": '{"output": "", "metadata": {"exit_code": 2}}',
        },
    ]
    calls = [
        _call(0, WireProtocol.RESPONSES, {"input": items1}),
        _call(1, WireProtocol.RESPONSES, {"input": items2}),
    ]
    events = call_events(calls)
    assert [(e.tool, e.effect, e.ok, e.service) for e in events] == [
        ("shell", Effect.READ, True, "shell"),
        ("shell", Effect.READ, False, "shell"),
    ]
    assert "files:notes.txt" in events[0].resources


def test_anthropic_tool_use_and_tool_result_with_is_error() -> None:
    msgs1 = [{"role": "user", "content": "fix it"}]
    msgs2 = [
        *msgs1,
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "editing"},
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "Edit",
                    "input": {"file_path": "a.py", "old_string": "x", "new_string": "y"},
                },
                {"type": "tool_use", "id": "t2", "name": "mcp__claw__notes_read", "input": {"title": "T"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "ok"},
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "is_error": True,
                    "content": [{"type": "text", "text": "no such note"}],
                },
            ],
        },
    ]
    calls = [
        _call(0, WireProtocol.ANTHROPIC, {"messages": msgs1}),
        _call(1, WireProtocol.ANTHROPIC, {"messages": msgs2}),
    ]
    events = call_events(calls)
    assert [(e.tool, e.effect, e.ok) for e in events] == [
        ("Edit", Effect.WRITE, True),
        ("notes_read", Effect.READ, False),
    ]
    assert events[0].resources == frozenset({"files:a.py"})
    assert events[1].raw_name == "mcp__claw__notes_read" and events[1].output == "no such note"


def test_a_tool_call_without_a_result_has_no_outcome() -> None:
    h = [SYSTEM, USER, _chat_tc("c1", "todo_add", '{"title": "x"}')]
    events = call_events(
        [
            _call(0, WireProtocol.CHAT, {"messages": [SYSTEM, USER]}),
            _call(1, WireProtocol.CHAT, {"messages": h}),
        ]
    )
    assert [(e.tool, e.ok) for e in events] == [("todo_add", None)]


def test_shell_cli_calls_become_claw_tools() -> None:
    assert claw_tool_from_shell("openforgerl-claw mail send --to a@b --subject Hi --body 'see you'") == (
        "mail_send",
        {"to": "a@b", "subject": "Hi", "body": "see you"},
    )
    assert claw_tool_from_shell(
        "/x/bin/openforgerl-claw calendar create --title T --start s --end e --attendees a@b c@d || true"
    ) == ("calendar_create", {"title": "T", "start": "s", "end": "e", "attendees": ["a@b", "c@d"]})
    assert claw_tool_from_shell("ls -la") is None


AUDIT = [
    {
        "seq": 0,
        "tool": "calendar_create",
        "args": {"title": "A", "start": "s", "end": "e"},
        "status": 503,
        "ok": False,
        "error": "retry",
        "fault": "error",
        "t": 10.0,
    },
    {
        "seq": 1,
        "tool": "calendar_create",
        "args": {"title": "A", "start": "s", "end": "e"},
        "status": 200,
        "ok": True,
        "error": None,
        "fault": None,
        "t": 12.0,
    },
    {
        "seq": 2,
        "tool": "__reset__",
        "args": {},
        "status": 200,
        "ok": True,
        "error": None,
        "fault": None,
        "t": 13.0,
    },
]


def test_audit_events_keep_faults_and_skip_resets() -> None:
    events = audit_events(AUDIT)
    assert [(e.tool, e.ok, e.status, e.fault, e.source) for e in events] == [
        ("calendar_create", False, 503, "error", "audit"),
        ("calendar_create", True, 200, None, "audit"),
    ]


def test_merge_audit_is_authoritative_and_lends_outputs_native_tools_interleave() -> None:
    args = '{"title": "A", "start": "s", "end": "e"}'
    h1 = [SYSTEM, USER]
    h2 = [
        *h1,
        _chat_tc("c1", "calendar_create", args),
        {"role": "tool", "tool_call_id": "c1", "content": "error (503): retry"},
    ]
    h3 = [
        *h2,
        _chat_tc("c2", "bash", '{"command": "echo hi > log.txt"}'),
        {"role": "tool", "tool_call_id": "c2", "content": "exit code 0\n"},
    ]
    h4 = [
        *h3,
        _chat_tc("c3", "calendar_create", args),
        {"role": "tool", "tool_call_id": "c3", "content": '{"id": "e9"}'},
    ]
    calls = [
        _call(0, WireProtocol.CHAT, {"messages": h1}, t=9.0),
        _call(1, WireProtocol.CHAT, {"messages": h2}, t=10.5),
        _call(2, WireProtocol.CHAT, {"messages": h3}, t=11.5),
        _call(3, WireProtocol.CHAT, {"messages": h4}, t=12.5),
    ]
    events = rollout_events(calls, AUDIT)
    assert [(e.tool, e.source, e.ok, e.fault) for e in events] == [
        ("calendar_create", "audit", False, "error"),
        ("bash", "call", True, None),
        ("calendar_create", "audit", True, None),
    ]
    assert events[2].output == '{"id": "e9"}' and events[2].call_index == 2
    assert events[1].effect is Effect.WRITE and "files:log.txt" in events[1].resources
    assert [e.index for e in events] == [0, 1, 2]


def test_effect_table() -> None:
    assert classify("mail_send", {"to": "Bob@X.io", "subject": "s", "body": "b"})[:2] == (
        Effect.WRITE,
        "mail",
    )
    assert classify("kb_search", {"query": "vpn"}) == (Effect.READ, "kb", frozenset({"kb:*"}))
    assert classify("submit_answer", {"answer": "4"})[0] is Effect.FINAL
    assert classify("str_replace_based_edit_tool", {"command": "view", "path": "a"})[0] is Effect.READ
    assert classify("computer", {"action": "left_click", "coordinate": [1, 2]})[:2] == (
        Effect.WRITE,
        "computer",
    )
    assert classify("computer", {"action": "screenshot"})[0] is Effect.READ
    assert classify("frobnicate", {})[0] is Effect.OTHER
    assert normalize_tool("claw__todo_add") == "todo_add" and normalize_tool("Read") == "Read"
    assert shell_effect("sed -i s/a/b/ f.txt")[0] is Effect.WRITE
    assert shell_effect("git commit -m x")[0] is Effect.WRITE
    assert shell_effect("grep -n foo src/a.py | head")[0] is Effect.READ
    assert shell_effect("rm -rf build")[1] == frozenset({"files:build"})
