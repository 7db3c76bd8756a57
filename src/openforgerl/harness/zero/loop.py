"""The agent loop: ask, run the tools, append, repeat; stop on a text answer or when the budget is spent.

History is append-only on purpose: the assistant message goes back exactly as the server returned it, so
each prompt extends the previous prompt + completion token for token (one training chain per rollout).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from openforgerl.harness.zero.client import ChatClient, ModelAPIError, drop_none
from openforgerl.harness.zero.tools import ToolBox

SYSTEM_PROMPT = (
    "You are an agent that completes tasks by calling tools. Use the tools to do the work, "
    "then reply with a short final answer and no tool call."
)


class ExitCode(IntEnum):
    """Process exit status, so the orchestrator can tell the outcomes apart without parsing output."""

    ANSWERED = 0
    BUDGET = 2  # turn cap or wall clock reached
    MODEL_ERROR = 3  # the model API failed after retries (infrastructure)


@dataclass
class AgentResult:
    exit_code: ExitCode
    answer: str = ""
    turns: int = 0
    messages: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""


def initial_messages(instruction: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": instruction}]


def _assistant_message(completion: dict[str, Any]) -> dict[str, Any]:
    try:
        message = drop_none(completion["choices"][0]["message"])
    except (KeyError, IndexError, TypeError) as exc:
        raise ModelAPIError(f"answer has no choices[0].message: {str(completion)[:200]}") from exc
    if not isinstance(message, dict):
        raise ModelAPIError(f"answer's choices[0].message is not an object: {str(completion)[:200]}")
    return message


def _tool_results(message: dict[str, Any], tools: ToolBox) -> list[dict[str, Any]]:
    out = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function", {})
        result = tools.run(str(fn.get("name", "")), str(fn.get("arguments") or "{}"))
        out.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": result})
    return out


@dataclass(frozen=True)
class Budget:
    """Wall-clock deadline plus a turn cap; the per-call timeout never outlives the deadline."""

    deadline: float
    max_turns: int
    call_timeout_s: float

    def call_timeout(self) -> float:
        return max(0.0, min(self.call_timeout_s, self.deadline - time.monotonic()))


def run_agent(
    client: ChatClient,
    model: str,
    instruction: str,
    tools: ToolBox,
    budget: Budget,
    on_message: Callable[[dict[str, Any]], None] = lambda m: None,
    **sampling: Any,
) -> AgentResult:
    """Drive one task to a final answer; never raises for model or tool failures."""
    messages = initial_messages(instruction)
    for m in messages:
        on_message(m)
    for turn in range(1, budget.max_turns + 1):
        timeout = budget.call_timeout()
        if timeout <= 0:
            return AgentResult(ExitCode.BUDGET, turns=turn - 1, messages=messages, error="wall clock")
        body: dict[str, Any] = {"model": model, "messages": messages, **sampling}
        if tools.schemas:
            body["tools"] = tools.schemas
        try:
            assistant = _assistant_message(client.create(body, timeout=timeout, deadline=budget.deadline))
        except ModelAPIError as exc:
            return AgentResult(ExitCode.MODEL_ERROR, turns=turn, messages=messages, error=repr(exc))
        results = _tool_results(assistant, tools)
        for m in (assistant, *results):
            messages.append(m)
            on_message(m)
        if not results:
            return AgentResult(ExitCode.ANSWERED, str(assistant.get("content") or ""), turn, messages)
    return AgentResult(ExitCode.BUDGET, turns=budget.max_turns, messages=messages, error="turn cap")


def dump_jsonl(path: str) -> Callable[[dict[str, Any]], None]:
    """A message sink that appends each message to a JSONL transcript as it happens."""

    def write(message: dict[str, Any]) -> None:
        with open(path, "a") as fh:
            fh.write(json.dumps(message) + "\n")

    return write
