"""A scripted policy (the model's *decisions* only) that solves the "write proof.txt" task in any harness.

Used with `openforgerl.engines.scripted.ScriptedEngine` by the harness tests and demos: it looks at the tool
list the harness sent, picks that harness's own shell (or write) tool with the right argument names, and
answers with final text once a tool result is in the history. Side calls (no tools, e.g. title generation)
get a short title. mini-swe-agent needs a tool call every turn, so it finishes with its submit command.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from openforgerl.engines.chat_format import format_tool_call

MINI_SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

# The shell tool of each harness, by name, and the argument carrying the command line.
SHELL_TOOLS: dict[str, str] = {
    "exec_command": "cmd",  # Codex
    "Bash": "command",  # Claude Code
    "run_shell_command": "command",  # Qwen Code
    "exec": "command",  # OpenClaw
    "bash": "command",  # opencode, mini-swe-agent, zero
}
# Write tools: name -> (path argument, content argument).
WRITE_TOOLS: dict[str, tuple[str, str]] = {
    "Write": ("file_path", "content"),  # Claude Code
    "write_file": ("file_path", "content"),  # Qwen Code (zero/envs use `path`: see _write_args)
    "write": ("filePath", "content"),  # opencode (OpenClaw uses `path`)
}


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    return [str((t.get("function") or t).get("name")) for t in tools if (t.get("function") or t).get("name")]


def _params(tools: list[dict[str, Any]], name: str) -> Mapping[str, Any]:
    for t in tools:
        fn = t.get("function") or t
        if fn.get("name") == name:
            return (fn.get("parameters") or fn.get("input_schema") or {}).get("properties") or {}
    return {}


def _write_args(tools: list[dict[str, Any]], name: str, path: str, content: str) -> dict[str, str]:
    props = _params(tools, name)
    path_key = next((k for k in ("file_path", "filePath", "path") if k in props), WRITE_TOOLS[name][0])
    return {path_key: path, "content": content}


def _has_tool_result(messages: list[dict[str, Any]]) -> bool:
    return any(m.get("role") == "tool" for m in messages)


def _is_mini(messages: list[dict[str, Any]]) -> bool:
    return any("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in str(m.get("content")) for m in messages[:2])


def first_call(tools: list[dict[str, Any]], path: str, content: str, prefer: str = "shell") -> str:
    """The one tool call that writes `content` to `path` with this harness's own tool."""
    names = tool_names(tools)
    writes = [n for n in WRITE_TOOLS if n in names]
    if prefer == "write" and writes:
        return format_tool_call(writes[0], _write_args(tools, writes[0], path, content))
    shell = next((n for n in SHELL_TOOLS if n in names), None)
    if shell is None:
        raise LookupError(f"no known shell tool among {names}")
    return format_tool_call(shell, {SHELL_TOOLS[shell]: f"printf '%s' '{content}' > {path}"})


def proof_policy(
    content: str, path: str = "proof.txt", prefer: str = "shell", final_text: str = "Done: wrote the file."
) -> Callable[[Any], str]:
    """A `ScriptedEngine` policy: write the file with one tool call, then answer."""

    def policy(turn: Any) -> str:
        if not turn.tools:
            return "Write proof file"  # title generation / other side calls
        if not _has_tool_result(turn.messages):
            return first_call(turn.tools, path, content, prefer)
        if _is_mini(turn.messages):
            return format_tool_call("bash", {"command": MINI_SUBMIT})
        return final_text

    return policy


def task_tool_name(tools: list[dict[str, Any]], tool: str, marker: str = "path") -> str:
    """The name a harness gave the task's (MCP or direct) tool `tool`: a prefixed name
    (`mcp__claw__write_file`, `claw_write_file`, ...), or the bare name when its schema is the task's
    (has `marker`; Qwen Code's own `write_file` takes `file_path` instead)."""
    names = tool_names(tools)
    prefixed = [n for n in names if n != tool and n.endswith(tool) and "claw" in n]
    if prefixed:
        return prefixed[0]
    if tool in names and marker in _params(tools, tool):
        return tool
    raise LookupError(f"no task tool {tool!r} among {names}")


def _called(messages: list[dict[str, Any]]) -> list[str]:
    """Names of the tools the assistant has called so far in this history."""
    return [
        str(c.get("function", {}).get("name"))
        for m in messages
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
    ]


def _task_call(tools: list[dict[str, Any]], called: list[str], tool: str, args: dict[str, Any]) -> str:
    """Call the task tool directly; else through OpenClaw's Tool Search bridge (`tool_call` with the MCP id
    `<server>__<tool>`); else load it first with Qwen Code's deferred-tool `tool_search`."""
    try:
        return format_tool_call(task_tool_name(tools, tool), args)
    except LookupError:
        names = tool_names(tools)
        if "tool_call" in names:
            return format_tool_call("tool_call", {"id": f"claw__{tool}", "args": args})
        if "tool_search" in names and "tool_search" not in called:
            return format_tool_call("tool_search", {"query": f"claw {tool}"})
        shell = next((n for n in SHELL_TOOLS if n in names), None)
        if shell is not None and called.count(shell) < 5:  # Codex: MCP tools arrive after startup
            return format_tool_call(shell, {SHELL_TOOLS[shell]: "sleep 2"})
        raise


def task_tool_policy(
    content: str, path: str = "proof.txt", final_text: str = "Done: wrote the file."
) -> Callable[[Any], str]:
    """Like `proof_policy`, but writes through the task's `write_file` tool (MCP or direct)."""

    def policy(turn: Any) -> str:
        if not turn.tools:
            return "Write proof file"
        called = _called(turn.messages)
        try:
            done = {task_tool_name(turn.tools, "write_file"), "tool_call"}
        except LookupError:
            done = {"tool_call"}
        if done & set(called):
            return final_text
        return _task_call(turn.tools, called, "write_file", {"path": path, "content": content})

    return policy
