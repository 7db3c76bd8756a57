"""Pure classification of a rollout's outcome from what the harness and the call log showed.

Precedence (first match wins):
1. an infra fault raised at a boundary (sandbox, gateway admin, harness start, verifier) — decided
   by the fault's type in `rollout.py`;
2. an infra error recorded on any call in the call log, by the one table
   `CallErrorKind.rollout_status` (engine 5xx/connection/protocol and the per-call deadline ->
   `infra_error:engine`; an internal gateway error -> `infra_error:gateway`; a client's malformed
   request or disconnect -> nothing), or the gateway marking the rollout `infra_tainted` — even when
   the harness then timed out: a hung engine is not the agent's fault;
3. the wall-clock budget ran out -> `timeout`;
4. the harness exited non-zero -> `agent_failed` (still verified and scored: it is data; a breached
   sandbox limit such as an OOM kill lands here too);
5. otherwise `ok` (the verifier's reward, whatever it is).
A harness killed by a signal from outside the sandbox never gets here: the exec boundary in
`rollout.py` raises it as `infra_error:sandbox` (1.).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from openforgerl.records import CallErrorKind, CallRecord, RolloutStatus
from openforgerl.sandbox.base import ExecResult

__all__ = ["call_log_taint", "first_prompt_lacks_task_tools", "harness_status", "offered_tool_names"]


def call_log_taint(calls: Sequence[CallRecord], rollout: Mapping[str, Any] | None = None
                   ) -> RolloutStatus | None:
    """The infra (or config) status the call log implies, or None when every call was clean.

    A context overflow is a configuration error only before the model has answered anything in this
    rollout (the harness's own prompt cannot fit the model). After that the prompt grew by what the
    agent did, and the agent can also send an oversized request itself with the key it holds: counting
    that as `config_error:context` would let a policy turn a failing rollout into an excluded one instead
    of a 0. It is then the agent's doing, and the rollout is judged as usual."""
    answered = False
    for call in sorted(calls, key=lambda c: c.index):
        kind = call.error.kind if call.error is not None else None
        if kind is CallErrorKind.CONTEXT_OVERFLOW and answered:
            continue
        if kind is not None and kind.rollout_status is not None:
            return kind.rollout_status
        answered = answered or (call.error is None and not call.side_call)
    if rollout and rollout.get("infra_tainted"):
        status = rollout.get("status")
        if isinstance(status, str) and status.startswith("infra_error:"):
            return RolloutStatus(status)
        return RolloutStatus.INFRA_GATEWAY
    return None


def offered_tool_names(request: Mapping[str, Any]) -> list[str]:
    """The tool names a harness's request offers the model, in each wire protocol: Chat
    `tools[].function.name`, Responses and Anthropic `tools[].name`, and the tools inside Codex's
    `namespace` entries (`mcp__<server>` holds that server's tools)."""
    names: list[str] = []
    tools = request.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, Mapping):
            continue
        if tool.get("type") == "namespace":
            names += offered_tool_names(tool)
            continue
        fn = tool.get("function")
        name = (fn if isinstance(fn, Mapping) else tool).get("name")
        if isinstance(name, str):
            names.append(name)
    return names


def first_prompt_lacks_task_tools(calls: Sequence[CallRecord], task_tools: Sequence[str]) -> bool:
    """True when the model's first prompt of the rollout offered none of the task's tools, under any
    prefix the harness gives them (`mcp__claw__mail_send`, `claw_mail_send`, `mail_send`).

    A harness that starts without its tool server (one that was slow on a loaded box, or crashed) asks
    the model anyway, and the model, without the task's tools, fails: a 0 for the machine's fault. Only
    the first answered request counts: it is the harness's own, sent before the model decided anything.
    Later requests are the agent's doing (it has a shell, and can kill the tool server to dodge a 0)."""
    if not task_tools:
        return False
    first = next((c for c in sorted(calls, key=lambda c: c.index) if not c.side_call and c.error is None), None)
    if first is None:
        return False
    offered = offered_tool_names(first.request)
    return not any(name == tool or name.endswith("_" + tool) for name in offered for tool in task_tools)


def harness_status(result: ExecResult) -> RolloutStatus:
    """timeout / agent_failed / ok from the harness process alone."""
    if result.timed_out:
        return RolloutStatus.TIMEOUT
    return RolloutStatus.OK if result.returncode == 0 else RolloutStatus.AGENT_FAILED
