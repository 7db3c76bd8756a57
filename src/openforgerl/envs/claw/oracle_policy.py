"""A scripted policy (model *decisions* only) that replays each task's gold actions in any harness.

For `ScriptedEngine`: it recognises the task by its instruction in the prompt (among tasks whose
instructions are alike — tau2's, the domain policy — by the task id the gateway hands the engine with
each call, `Turn.task_id`), counts the tool results already in the history (an injected transient error does
not count, so the failed call is retried) and emits the next gold action — as the task's own tool when the
harness exposes it (plain `mail_send`, or MCP-namespaced like `mcp__claw__mail_send`), else as an
`openforgerl-claw` command through the harness's shell tool (always, with `prefer_shell`). `success_rate` < 1
makes some rollouts give up at once (deterministically per rollout id), so pass@k and pass^k differ in demos.
"""

from __future__ import annotations

import json
import random
import shlex
from collections.abc import Callable, Sequence
from typing import Any

from openforgerl.engines.chat_format import format_tool_call
from openforgerl.envs.claw.drafts import cli_words
from openforgerl.tasks.draft import Action

__all__ = ["gold_actions", "load_actions", "oracle_policy"]

SHELL_TOOLS = {
    "exec_command": "cmd",
    "Bash": "command",
    "run_shell_command": "command",
    "exec": "command",
    "bash": "command",
    "shell": "command",
}
_TRANSIENT = ("error (50", "error 50", "temporarily unavailable", "timed out")


def load_actions(runtime: Any) -> list[Action]:
    """The task folder's gold actions (`solution/actions.json`); none for a runtime that keeps no folder
    (a plain `TaskSpec`), whose rollouts the policy then ends at once."""
    task = getattr(runtime, "task", None)
    if task is None:
        return []
    path = task.root / "solution" / "actions.json"
    return [Action(a["tool"], a["args"]) for a in json.loads(path.read_text())] if path.is_file() else []


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content or "")


def _completed(messages: Sequence[dict[str, Any]]) -> int:
    results = [_text(m.get("content")) for m in messages if m.get("role") == "tool"]
    return sum(1 for r in results if not any(t in r for t in _TRANSIENT))


def _names(tools: Sequence[dict[str, Any]]) -> list[str]:
    return [str((t.get("function") or t).get("name", "")) for t in tools]


def _shell_line(runtime: Any) -> Callable[[Action], str]:
    """A task's own shell line for an action when its runtime has one
    (tau2: `shell_line`), else the Claw CLI."""
    own = getattr(runtime, "shell_line", None)
    if own is not None:
        return lambda action: str(own(action.tool, action.args))
    program = getattr(runtime, "cli_program", None)
    if program is None:  # a family with no shell CLI: its tools are called as the harness offers them
        return lambda action: _no_shell_line(runtime, action)
    cli = program()
    return lambda action: cli + " " + " ".join(shlex.quote(w) for w in cli_words(action))


def _no_shell_line(runtime: Any, action: Action) -> str:
    raise LookupError(f"the harness does not offer {action.tool} and {runtime.task_id} has no shell CLI")


def _call(
    tools: Sequence[dict[str, Any]], action: Action, shell_line: Callable[[Action], str], prefer_shell: bool
) -> str:
    names = _names(tools)
    own = next(
        (n for n in names if n == action.tool or n.endswith(("__" + action.tool, "." + action.tool))), None
    )
    if own is not None and not (prefer_shell and any(n in SHELL_TOOLS for n in names)):
        return format_tool_call(own, action.args)
    shell = next((n for n in SHELL_TOOLS if n in names), None)
    if shell is None:
        raise LookupError(f"neither {action.tool} nor a shell tool among {names}")
    return format_tool_call(shell, {SHELL_TOOLS[shell]: shell_line(action)})


def _match(
    rows: Sequence[tuple[Any, list[Action], Any]], task_id: str | None
) -> tuple[list[Action], Any] | None:
    """The task's (actions, shell line): the one task whose instruction is in the prompt, or, when several
    are, the one this rollout plays."""
    owned = [row for row in rows if row[0].task_id == task_id]
    candidates = owned or list(rows)
    if not candidates:
        return None
    _, actions, shell_line = candidates[0]
    return actions, shell_line


def oracle_policy(
    runtimes: Sequence[Any], *, success_rate: float = 1.0, seed: int = 0, prefer_shell: bool = False
) -> Callable[[Any], str]:
    """`prefer_shell`: use the shell CLI even when the harness offers the task's own tools."""
    table = [(rt, load_actions(rt), _shell_line(rt)) for rt in runtimes]

    def policy(turn: Any) -> str:
        if not turn.tools:
            return "Claw task"  # title generation and other side calls
        prompt = " ".join(
            _text(m.get("content")) for m in turn.messages if m.get("role") in ("user", "system")
        )
        match = _match([row for row in table if row[0].instruction in prompt], turn.task_id)
        if match is None:
            return "I do not recognise this task."
        if random.Random(f"{seed}:{turn.rollout_id}").random() >= success_rate:
            return "I cannot do this."
        actions, line = match
        done = _completed(turn.messages)
        return "Done." if done >= len(actions) else _call(turn.tools, actions[done], line, prefer_shell)

    return policy


def gold_actions(
    runtimes: Sequence[Any], *, success_rate: float = 1.0, seed: int = 0
) -> Callable[[Any], str]:
    """The `actions` oracle of `openforgerl.oracles` (`--engine scripted`): `oracle_policy`, looked up when
    called rather than when the entry point loads, so a test that scripts the model by replacing this
    module's `oracle_policy` is what the commands run."""
    return oracle_policy(runtimes, success_rate=success_rate, seed=seed)
