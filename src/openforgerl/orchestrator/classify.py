"""Pure classification of a rollout's outcome: the one place that decides what a rollout's status is.

The rule. A rollout is infra (`infra_error:*`: dropped, retried within the group's retry budget, never
trained, never counted by eval) only when a component outside the sandbox failed on its own, shown by
evidence the agent cannot produce: the engine failed its health probe (the gateway's own request, after
a call stalled or hit its per-call limit) or failed while serving the request (a 5xx, a reset, a
malformed answer); the sandbox backend, the verifier machinery or the gateway itself broke; or the
harness ended before its first model call (the gateway's call log, not the sandbox, has no call: the
model decided nothing, so nothing it did can have caused the exit). Whatever follows from what the agent
sent (its numbers, parameters, sizes, context length, request rate, how long it let the model write)
is the rollout's own outcome: the harness got a 4xx (or a 504) and the rollout is judged as usual, a 0,
an `agent_failed` or a `timeout` — never a taint. A configuration error (`config_error:*`: dropped,
never retried, never counted) is as much outside the agent's reach: the harness's own first prompt did
not fit the engine's context.

Precedence (first match wins; `rollout_status` applies 2-6):
1. an infra fault raised at a boundary (sandbox, gateway admin, harness start, verifier, the user
   engine) — decided by the fault's type in `rollout.py` (errors.py);
2. the call log (`call_log_taint`): the harness's first prompt overflowing the context ->
   `config_error:context`, whatever happened after it; else an infra error on any call, by the one
   table `CallErrorKind.rollout_status` (engine 5xx/connection/protocol and a stalled engine that
   failed its probe -> `infra_error:engine`; an internal gateway error -> `infra_error:gateway`), or
   the gateway marking the rollout `infra_tainted` — even when the harness then timed out;
3. the model's first prompt lacked the task's tools (its tool server did not start) ->
   `infra_error:harness_start`;
4. a call cut at the rollout's deadline (`rollout_deadline`), or the wall-clock budget ran out ->
   `timeout` (the documented timeout policy: dropped, or kept as 0);
5. the harness ended on its own with no call in the gateway's log -> `infra_error:harness_start`,
   its stdout/stderr tails in the record;
6. the harness exited non-zero -> `agent_failed` (still verified and scored: it is data; a breached
   sandbox limit such as an OOM kill lands here too); otherwise `ok` (the verifier's reward).
A harness killed by a signal from outside the sandbox never gets here: the exec boundary in
`rollout.py` raises it as `infra_error:sandbox` (1.).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from openforgerl.records import CallErrorKind, CallRecord, RolloutStatus
from openforgerl.sandbox.base import ExecResult

__all__ = [
    "call_log_taint",
    "first_prompt_lacks_task_tools",
    "harness_status",
    "offered_tool_names",
    "rollout_status",
]


def rollout_status(
    result: ExecResult,
    calls: Sequence[CallRecord],
    rollout: Mapping[str, Any] | None = None,
    *,
    tools_missed: bool = False,
) -> tuple[RolloutStatus, str]:
    """The status of a rollout whose harness ran (steps 2-6 above) and why, in words ("" when the
    verifier decides: `ok` / `agent_failed` are then judged). `calls` is the gateway's call log of the
    rollout, `rollout` its stored record, `tools_missed` step 3's finding."""
    logged = call_log_taint(calls, rollout)
    if logged is not None and logged is not RolloutStatus.TIMEOUT:
        why = "a prompt longer than the engine's context" if logged.is_config else "an infra error"
        return logged, f"{why} recorded in the call log"
    if tools_missed:
        return (
            RolloutStatus.INFRA_HARNESS_START,
            "the model's first prompt had none of the task's tools (its tool server did not start in time)",
        )
    if logged is RolloutStatus.TIMEOUT or result.timed_out:
        return RolloutStatus.TIMEOUT, ""
    if not calls:
        return (
            RolloutStatus.INFRA_HARNESS_START,
            f"the harness ended (exit {result.returncode}) before its first model call",
        )
    return harness_status(result), ""


def call_log_taint(
    calls: Sequence[CallRecord], rollout: Mapping[str, Any] | None = None
) -> RolloutStatus | None:
    """The status the call log implies (config, infra, or a `timeout` from a call cut at the rollout's
    deadline), or None when it leaves the verdict to the harness and the verifier.

    A context overflow is a configuration error only when it is the harness's own first prompt: no call
    of this rollout had been answered before it (a side call, such as a title, is not the model acting
    on the task). That prompt is what the harness built from the task before the model decided anything,
    so the agent cannot have caused it, and another attempt would overflow the same way. It then decides
    the rollout whatever the harness does next: a harness that loops (overflow -> summary call ->
    overflow, until its budget) or hangs after its compression call is still the same setup error, and
    a later engine fault cannot make a retry succeed. After the model has answered, the prompt grew by
    what the agent did, and the agent can also send an oversized request itself with the key it holds:
    counting that as `config_error:context` would let a policy turn a failing rollout into an excluded
    one instead of a 0. A later overflow is therefore the agent's own outcome (the harness got its 400;
    the rollout ends as it ends, a 0 or a `timeout`), and being a 4xx it is never infra either."""
    ordered = sorted(calls, key=lambda c: c.index)
    if _first_prompt_overflowed(ordered):
        return RolloutStatus.CONFIG_CONTEXT
    timed_out = False
    for call in ordered:
        kind = call.error.kind if call.error is not None else None
        status = kind.rollout_status if kind is not None else None
        if status is not None and status.is_infra:
            return status
        timed_out = timed_out or status is RolloutStatus.TIMEOUT
    if rollout and rollout.get("infra_tainted"):
        status_text = rollout.get("status")
        if isinstance(status_text, str) and status_text.startswith("infra_error:"):
            return RolloutStatus(status_text)
        return RolloutStatus.INFRA_GATEWAY
    return RolloutStatus.TIMEOUT if timed_out else None


def _first_prompt_overflowed(ordered: Sequence[CallRecord]) -> bool:
    """A context overflow before any non-side call of the rollout was answered (`call_log_taint`)."""
    for call in ordered:
        if call.error is not None and call.error.kind is CallErrorKind.CONTEXT_OVERFLOW:
            return True
        if call.error is None and not call.side_call:
            return False
    return False


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
    first = next(
        (c for c in sorted(calls, key=lambda c: c.index) if not c.side_call and c.error is None), None
    )
    if first is None:
        return False
    offered = offered_tool_names(first.request)
    return not any(name == tool or name.endswith("_" + tool) for name in offered for tool in task_tools)


def harness_status(result: ExecResult) -> RolloutStatus:
    """timeout / agent_failed / ok from the harness process alone (`rollout_status` weighs the rest)."""
    if result.timed_out:
        return RolloutStatus.TIMEOUT
    return RolloutStatus.OK if result.returncode == 0 else RolloutStatus.AGENT_FAILED
