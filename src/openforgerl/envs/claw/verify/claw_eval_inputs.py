"""What an imported Claw-Eval `grader.py` is given from the verifier's evidence, under upstream's names
(claw_eval_grader.py runs the grader): the transcript as upstream trace messages (`ask_user` exchanges as
its user-agent turns, replies from the host's record of the relay), and the Claw service's /audit as
upstream tool dispatches and per-service audit data."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from openforgerl.envs.claw.verify.graders import _content

# upstream service name → the keys of its /audit that list what the agent made, and our tool filling each
AUDIT_LISTS = {
    "gmail": {"drafts": "mail_draft", "sent_messages": "mail_send"},
    "calendar": {"created_events": "calendar_create", "deleted": "calendar_delete"},
    "todo": {"created_tasks": "todo_add"},
}


# ------------------------------------------------------------------ upstream names


def _ours_to_theirs() -> dict[str, str]:
    from openforgerl.envs.claw.importers.claw_eval_upstream import TOOLS

    return {ours: theirs for theirs, ours in TOOLS.items()}


def _upstream_args(tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
    from openforgerl.envs.claw.importers.claw_eval_upstream import UPSTREAM_ARGS

    renames = UPSTREAM_ARGS.get(tool, {})
    return {renames.get(k, k): v for k, v in args.items()}


def _service_of(tool: str) -> str | None:
    from openforgerl.env.world_tools import get_tool
    from openforgerl.envs.claw.importers.claw_eval_upstream import SERVICES

    spec = get_tool(tool)
    theirs = {ours: t for t, ours in SERVICES.items()}
    return theirs.get(spec.service) if spec is not None else None


def _args_of(call: Mapping[str, Any]) -> Mapping[str, Any]:
    args = call.get("args")
    return args if isinstance(args, Mapping) else {}


def _endpoints(task: Any) -> dict[str, str]:
    return {
        str(e.get("tool_name")): str(e.get("url", "")) for e in task.tool_endpoints if isinstance(e, dict)
    }


def _path_of(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return "/" + rest.split("/", 1)[1] if "/" in rest else url


# ------------------------------------------------------------------ the grader's inputs


ASK_USER = "ask_user"
NO_REPLY = "(no reply recorded)"
# A user message of the transcript that carries upstream's tag itself: the agent can send the gateway a
# request of its own (it holds the rollout's key, as its harness does), so such text is relabelled, never a
# turn.
NOT_THE_USER_AGENT = "[user message, not the simulated user]"


def trace_messages(
    transcript: Sequence[Mapping[str, Any]], user_record: Sequence[Mapping[str, str]] | None = None
) -> list[Any]:
    """Chat messages → upstream trace messages (tool results are user messages, as in the Messages API);
    `ask_user` exchanges become upstream's user-agent turns (see the module docstring)."""
    from claw_eval.graders.user_agent_clarify_base import USER_AGENT_TAG  # the tag the base splits at
    from claw_eval.models.content import TextBlock, ToolResultBlock, ToolUseBlock
    from claw_eval.models.message import Message
    from claw_eval.models.trace import TraceMessage

    from openforgerl.env.world_tools import normalize_tool  # here: other checks' verifier never needs it

    names = _ours_to_theirs()
    exchanges = _exchanges(user_record or [])
    asked: dict[str, str] = {}  # ask_user call id -> its question
    out = []
    for m in transcript:
        role, text = m.get("role"), _content(m)
        if role == "tool" and str(m.get("tool_call_id", "")) in asked:
            reply = _reply_to(exchanges, asked[str(m.get("tool_call_id", ""))])
            out.append(
                TraceMessage(
                    message=Message(role="user", content=[TextBlock(text=f"{USER_AGENT_TAG}\n{reply}")])
                )
            )
        elif role == "tool":
            block = ToolResultBlock(
                tool_use_id=str(m.get("tool_call_id", "")), content=[TextBlock(text=text)]
            )
            out.append(TraceMessage(message=Message(role="user", content=[block])))
        elif role in ("user", "assistant"):
            if role == "user" and text.startswith(USER_AGENT_TAG):  # only the host's record makes those turns
                text = NOT_THE_USER_AGENT + text[len(USER_AGENT_TAG) :]
            blocks: list[Any] = [TextBlock(text=text)] if text else []
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function", tc) if isinstance(tc, Mapping) else {}
                name = normalize_tool(str(fn.get("name", "")))  # harness prefixes: mcp__claw__x, claw.x
                args = _arguments(fn.get("arguments"))
                if name == ASK_USER and role == "assistant":  # upstream's agent asks in plain text
                    asked[str(tc.get("id", ""))] = str(args.get("message", ""))
                    blocks.append(TextBlock(text=str(args.get("message", ""))))
                    continue
                blocks.append(ToolUseBlock(id=str(tc.get("id", "")), name=names.get(name, name), input=args))
            out.append(TraceMessage(message=Message(role=role, content=blocks)))
    return out


def _exchanges(user_record: Sequence[Mapping[str, str]]) -> list[list[str]]:
    """The relay's [question, reply] pairs in order (an opening the user wrote has no question: skipped)."""
    out = []
    for asked, said in itertools.pairwise(user_record):
        if asked.get("role") == "assistant" and said.get("role") == "user":
            out.append([str(asked.get("content", "")), str(said.get("content", ""))])
    return out


def _reply_to(exchanges: list[list[str]], question: str) -> str:
    """The reply to the first unused exchange with this question (a question asked through the shell
    command instead of the tool is in the record too, so order alone could pair the wrong reply)."""
    for pair in exchanges:
        if pair[0] == question:
            exchanges.remove(pair)
            return pair[1]
    return NO_REPLY


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {"raw": raw}
    return dict(raw) if isinstance(raw, Mapping) else {}


def dispatches(audit: Sequence[Mapping[str, Any]], task: Any) -> list[Any]:
    """The service's audit calls as upstream tool dispatches (its tool and argument names)."""
    from claw_eval.models.trace import ToolDispatch

    names, urls = _ours_to_theirs(), _endpoints(task)
    out = []
    for call in audit:
        tool = str(call.get("tool", ""))
        if tool.startswith("__"):  # the service's own records (reset)
            continue
        theirs = names.get(tool, tool)
        out.append(
            ToolDispatch(
                tool_use_id=str(call.get("seq", "")),
                tool_name=theirs,
                endpoint_url=urls.get(theirs, ""),
                request_body=_upstream_args(tool, _args_of(call)),
                response_status=int(call.get("status", 200)),
                response_body=call.get("response"),
            )
        )
    return out


def audit_data(audit: Sequence[Mapping[str, Any]], task: Any) -> dict[str, dict[str, Any]]:
    """Per upstream service: its `calls` (endpoint, request_body) and the lists its /audit keeps."""
    names, urls = _ours_to_theirs(), _endpoints(task)
    out: dict[str, dict[str, Any]] = {}
    for call in audit:
        tool = str(call.get("tool", ""))
        service = _service_of(tool)
        if service is None:
            continue
        data = out.setdefault(service, {"calls": [], **{k: [] for k in AUDIT_LISTS.get(service, {})}})
        args = _upstream_args(tool, _args_of(call))
        theirs = names.get(tool, tool)
        data["calls"].append(
            {
                "endpoint": _path_of(urls.get(theirs, f"/{service}/{theirs}")),
                "request_body": args,
                "response_body": None,
                "status": call.get("status"),
            }
        )
        for key, filler in AUDIT_LISTS.get(service, {}).items():
            if filler == tool and call.get("ok"):
                data[key].append(args)
    return out
