"""Scripted policies: the model's decisions for tests, plugged into `engines.scripted.ScriptedEngine`
(whose output is the local engine's own vLLM-exact code)."""

from __future__ import annotations

from openforgerl.engines.chat_format import format_tool_call
from openforgerl.engines.scripted import Turn


def contract_policy(turn: Turn) -> str:
    """What the engine contract suite's three cases need (tests/contract): a todo tool call with its
    reasoning when asked for one, an answer after the tool result, plain text without tools."""
    names = {t.get("function", {}).get("name") for t in turn.tools}
    last = turn.messages[-1].get("role") if turn.messages else None
    if last == "tool":
        return "<think>\nThe todo was added.\n</think>\n\nAdded 'buy milk' to your todos."
    if "todo_add" in names:
        return "<think>\nI need to add a todo.\n</think>\n\n" + format_tool_call(
            "todo_add", {"title": "buy milk"}
        )
    return "Hello! How can I help you today?"
