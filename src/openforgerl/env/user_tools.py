"""tau2's simulated user with tools of its own (telecom: the user's phone), played by `--user-engine`.

Upstream's `UserSimulator` is an LLM given a system prompt (its simulation guidelines, then the task's
`<scenario>`) and, in telecom, the user's own tools (`TelecomUserTools`: status bar, airplane mode,
speed test, …). Each turn it either calls one of those tools — upstream executes it on the user's side of
the environment and hands the result back to the simulator alone — or sends the agent a message.
`###STOP###` / `###TRANSFER###` / `###OUT-OF-SCOPE###` end the conversation.

The dialogue starts as upstream's: the agent's fixed greeting (`user_sim.py` `GREETING`) is the engine's first
`user` message and the session's first reply is the customer's opening (`UserRelay.open`, at rollout start),
which becomes the agent's prompt. Here the agent's later turns are its `ask_user` messages (the relay of
`user_sim.py`); `Tau2UserSession` answers it the same way: the user engine gets the conversation in its own
roles (the agent's messages as `user`, its own as `assistant`) with the user tools as function tools; each
tool call runs on the rollout's service through the host-only user route (`Tau2TaskRuntime.user_call`), its
reply goes back to the engine, until the engine says something to the agent. Those calls run on the host, go
straight to the user engine (never through the gateway) and are never recorded as the policy's; the service
logs them (requestor `user`) for upstream's evaluator, which replays them with the agent's.

The guidelines below are ours, written after upstream's `simulation_guidelines_tools.md`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from openforgerl.env.judge import JudgeClient

__all__ = ["GUIDELINES", "STOP_TOKENS", "Tau2UserSession", "system_prompt"]

log = logging.getLogger(__name__)

STOP_TOKENS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
MAX_TOOL_STEPS = 12  # user tool calls answering one agent message (upstream bounds a whole dialogue's steps)
MIN_MAX_TOKENS = 512  # eval's user client is capped for 1-3 sentence replies; a tool call's JSON needs more

GUIDELINES = """# How to play the customer

You are a customer contacting a customer service agent. Act out the scenario below realistically and
follow its instructions strictly. You have tools that act on your own device; use them when the agent
asks you to do or check something on your side.

- Produce one turn at a time: either call one tool, or write one message to the agent, never both.
- Use only what the scenario says or what your tools return; anything else is unknown to you. Never
  invent a tool result: when the agent asks what your device shows, call the tool and answer from its reply.
- If a tool call fails, correct it and try again.
- Call a tool only when the agent asked for it or you need it to answer the agent. If unsure what to do,
  ask the agent. If the agent asks for several actions at once, say you can do one at a time and ask which.
- Do not recite the scenario word for word; say things naturally, and share information only when asked.
- The agent sees your messages but not your tool calls.

# Ending
- When the scenario's goal is met, write ###STOP###.
- When the agent has clearly transferred you to someone else, write ###TRANSFER###.
- When the scenario gives you nothing to go on, write ###OUT-OF-SCOPE###."""


def system_prompt(scenario: str) -> str:
    return f"{GUIDELINES}\n\n<scenario>\n{scenario}\n</scenario>"


def _tool_reply(status: int, body: Any) -> str:
    """What the simulator reads back: the tool's result, or upstream's `Error: …` text."""
    if isinstance(body, dict):
        value = body.get("result") if status == 200 else body.get("error", body)
    else:
        value = body
    return value if isinstance(value, str) else json.dumps(value)


def _arguments(call: Mapping[str, Any]) -> dict[str, Any]:
    raw = (call.get("function") or {}).get("arguments") or "{}"
    try:
        args = json.loads(raw) if isinstance(raw, str) else dict(raw)
    except (ValueError, TypeError):
        return {}
    return args if isinstance(args, dict) else {}


@dataclass
class Tau2UserSession:
    """One rollout's simulated user: its conversation, in the user engine's roles."""

    scenario: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False

    def __post_init__(self) -> None:
        if not self.messages:  # the first `reply` (to the greeting) is the customer's opening
            self.messages = [{"role": "system", "content": system_prompt(self.scenario)}]

    async def reply(self, client: Any, runtime: Any, sandbox: Any, agent_message: str) -> str:
        """The user's next message to the agent, after any tool calls on its device ("" if it had none)."""
        self.messages.append({"role": "user", "content": agent_message})
        tools = list(runtime.user_tools())
        if isinstance(client, JudgeClient) and client.max_tokens < MIN_MAX_TOKENS:  # test fakes have no cap
            client = replace(client, max_tokens=MIN_MAX_TOKENS)
        for _ in range(MAX_TOOL_STEPS):
            message = await client.chat(self.messages, tools)
            calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
            if not calls:
                text = str(message.get("content") or "").strip()
                self.messages.append({"role": "assistant", "content": text})
                self.done = not text or any(t in text for t in STOP_TOKENS)
                return text
            self.messages.append(
                {"role": "assistant", "content": message.get("content") or "", "tool_calls": calls}
            )
            for call in calls:
                name = str((call.get("function") or {}).get("name") or "")
                status, body = await runtime.user_call(sandbox, name, _arguments(call))
                self.messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": str(call.get("id") or ""),
                        "content": _tool_reply(status, body),
                    }
                )
        log.warning("tau2 user made %d tool calls without a word to the agent", MAX_TOOL_STEPS)
        return ""
