"""A rollout's transcript, built on the host from the gateway's call log (never from the sandbox), and
never from a history the agent could have written.

The agent holds its rollout's key, so from its shell it can send the gateway a request of its own whose
history holds assistant turns it wrote and tool results it made up (and then end its harness, so that
request is the rollout's last); reading "the last call's history" graded that forgery as the model's
work. So every turn here is witnessed by something the agent cannot write:

- an assistant turn counts only where the gateway itself vouched for it: in a request's history it put
  back the model's raw text of one of this rollout's sampled completions (`gateway/verbatim.py`: it
  keeps each completion's sampled ids and restores a turn that means the same), which the record shows as
  `engine_request` differing from the client's translated request at that turn; or, for a turn of plain
  text, the text equals the content an earlier call of the main agent answered (`response_text`). The
  turn is read from that text, never from what the client sent. Any other assistant turn is the
  client's: it is dropped with the tool results that follow it;
- system and user turns are those of the main agent's first call that offers tools (a harness's
  helper prompts go first without any), sent before the model had sampled anything in that loop (the
  task's prompt as the harness framed it); the simulated user's replies come from the
  host's relay record (`HostSide.user_record`), never from here. A user turn that first appears later is
  dropped;
- a tool result is taken from the requests that answer its turn directly (whose last witnessed turn is
  that turn), at most one per tool call the turn's own text makes. The harness sends one such request
  per turn, so rewriting an earlier turn's results in a later history changes nothing, and two answers
  to one turn that disagree (the harness's, and one the agent sent from its shell while that turn's
  tools ran) get `WITHHELD`, never a pick. Where the environment keeps its own audit, the verifier holds
  these texts against it too (the Claw services' `/audit`: `envs/claw/verify/witness.py`), and graders
  read effects from the audit (Claw-Eval's dispatches, tau2's service log), not from these texts;
- the conversation is every witnessed turn of every request, in the order first seen, then the last
  call's answer: a request that leaves a real turn out (a forgery, or a harness compacting its
  context) does not hide it.

Why drop and withhold rather than label: a label leaves the forged words in front of a string check or
a judge (a grader that looks for "sent" still finds it), so it can raise a score; an absent turn cannot
add a tool call, a success or a claim the model never made. The cost falls on a gateway run without
verbatim history (`verbatim_history=False`) or whose engine cannot detokenize: its tool-call turns have
no witness and are left out, a lower score, never a higher one.

Limits: the results of the turn during which the harness stopped for good are only as good as the
requests that answered it; if the agent killed its harness in that turn, the one answer may be its own.
Likewise a branch the agent drives from its shell with its key: the model's answers there are its own
samples, but the results that follow them are what the agent relayed. For a task service's tools the
audit settles both; a shell or file tool of the harness has no audit.

Side calls (title generation and the like) and sub-agents are left out. Three shapes are produced:

- `messages`: `[{role, content, tool_calls?}]` (chat roles; `Evidence.transcript`, Claw-Eval's text
  checks and judge);
- `media_events`: Claw-Eval's `MediaLoad` events (image-QA graders: did an image reach the model?), one per
  distinct image the gateway recorded in the main agent's prompts, in first-seen order;
- `openclaw_events`: QwenClawBench's `grade(transcript, ...)` input, the OpenClaw session events
  (`{"type": "message", "message": {"role": "assistant" | "user" | "toolResult", "content": [...]}}`,
  assistant blocks `{"type": "text"}` / `{"type": "toolCall", "name", "arguments"}`), as upstream's
  graders and `_summarize_transcript` read them.

Everything here is still model- or tool-written text: callers cap and delimit it before a judge sees it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openforgerl.gateway.verbatim import Signature, raw_signature

__all__ = [
    "WITHHELD",
    "actions_text",
    "conversation_text",
    "media_events",
    "messages_from_calls",
    "openclaw_events",
]

WITHHELD = "[tool result withheld: the requests that answered this turn disagree on it]"


def _text(content: Any) -> str:
    from openforgerl.engines.chat_format import content_to_text

    return content_to_text(content)


def _main_calls(calls: Sequence[Any]) -> list[Any]:
    """The main agent's usable calls in order. The main agent is the one that made the rollout's first
    root call: the harness makes it before the model has sampled anything, so requests the agent sends
    from its shell under another agent id cannot take that place."""
    usable = sorted(
        (
            c
            for c in calls
            if not getattr(c, "side_call", False)
            and c.error is None
            and isinstance(c.engine_request or c.request, dict)
        ),
        key=lambda c: c.index,
    )
    if not usable:
        return []
    roots = [c for c in usable if not c.parent_agent_id]
    agent = (roots or usable)[0].agent_id
    return [c for c in (roots or usable) if c.agent_id == agent]


def _answer(text: str) -> dict[str, Any]:
    from openforgerl.engines.chat_format import parse_output

    parsed = parse_output(text)
    msg: dict[str, Any] = {"role": "assistant", "content": parsed.content or ""}
    if parsed.tool_calls:
        msg["tool_calls"] = [
            {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}}
            for t in parsed.tool_calls
        ]
    return msg


def _messages(body: Any) -> list[Mapping[str, Any]]:
    raw = body.get("messages") if isinstance(body, Mapping) else None
    return [m for m in raw if isinstance(m, Mapping)] if isinstance(raw, list) else []


def _sent(call: Any) -> list[Mapping[str, Any]] | None:
    """The chat history the client's request translates to, before the gateway restored any turn (the
    adapter's pure translation, as the gateway ran it); None when it no longer translates."""
    from openforgerl.gateway.protocols import adapter_for

    try:
        adapter = adapter_for(call.protocol)
        # Chat passes the body as it came (its engine_body only validates); a stored body's images are
        # blob references, which its validation need not accept
        return _messages(adapter.engine_body(call.request) if adapter.translates else call.request)
    except Exception:  # a stored request the adapter refuses now: no turn of it is vouched for
        return None


def _squash(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class _Turn:
    """One witnessed assistant turn of one request's history."""

    key: tuple[Signature, int]  # its meaning and which repeat of it: the same turn in every history
    raw: str  # the model's text of it (the gateway's restoration, or the answered content)
    ids: tuple[str, ...]  # the tool-call ids the harness gave it
    results: tuple[tuple[str, str], ...]  # the (tool_call_id, text) results that follow it here


def _witnessed(call: Any, answered: set[str]) -> list[_Turn]:
    """The assistant turns of `call`'s history that the gateway vouched for (module docstring)."""
    history = _messages(call.engine_request or call.request)
    sent = _sent(call) if call.engine_request is not None else history
    if sent is None or len(sent) != len(history):
        sent = None
    out: list[_Turn] = []
    seen: Counter[Signature] = Counter()
    for pos, m in enumerate(history):
        if m.get("role") != "assistant":
            continue
        client = sent[pos] if sent is not None else m
        # the gateway's restoration is exactly `{role, content: raw}` (verbatim.py), in
        # place of a turn that said more
        restored = (
            sent is not None
            and client != m
            and set(m) == {"role", "content"}
            and isinstance(m.get("content"), str)
        )
        plain = (
            isinstance(client.get("content"), str)
            and not client.get("tool_calls")
            and _squash(str(client.get("content"))) in answered
        )
        if not (restored or plain):
            continue  # the client's, not the model's
        raw = str(m["content"] if restored else client.get("content"))
        sig = raw_signature(raw)
        seen[sig] += 1
        results = tuple(
            (str(r.get("tool_call_id") or ""), _text(r.get("content"))) for r in _results(history[pos + 1 :])
        )
        calls = [str(tc.get("id") or "") for tc in client.get("tool_calls") or [] if isinstance(tc, Mapping)]
        out.append(
            _Turn(
                (sig, seen[sig]), raw, tuple(calls) if any(calls) else tuple(r[0] for r in results), results
            )
        )
    return out


def _agreed(answers: Sequence[tuple[tuple[str, str], ...]]) -> list[tuple[str, str]]:
    """The tool results of one turn from every request that answered it directly: kept where they all
    agree, `WITHHELD` where they do not."""
    out = []
    for i in range(max((len(a) for a in answers), default=0)):
        seen = {a[i] for a in answers if i < len(a)}
        agreed = len(seen) == 1 and all(i < len(a) for a in answers)
        ids = {r[0] for r in seen}
        out.append((next(iter(ids)) if len(ids) == 1 else "", next(iter(seen))[1] if agreed else WITHHELD))
    return out


def messages_from_calls(calls: Iterable[Any]) -> list[dict[str, Any]]:
    """The main agent's conversation, every turn witnessed (see the module docstring)."""
    main = _main_calls(list(calls))
    if not main:
        return []
    first = next((c for c in main if isinstance(c.request, Mapping) and c.request.get("tools")), main[0])
    out = [
        _plain(m)
        for m in _messages(first.engine_request or first.request)
        if m.get("role") in ("system", "user")
    ]
    answered: set[str] = set()
    answers: dict[tuple[Signature, int], list[tuple[tuple[str, str], ...]]] = {}
    turns: dict[tuple[Signature, int], _Turn] = {}  # every witnessed turn, in the order first seen
    for call in main:
        seen = _witnessed(call, answered)
        if seen and seen[-1].results:  # this request answers its last witnessed turn
            answers.setdefault(seen[-1].key, []).append(seen[-1].results)
        for turn in seen:
            turns.setdefault(turn.key, turn)
        if call.response_text:
            answered.add(_squash(call.response_text))
    for turn in turns.values():
        msg = _answer(turn.raw)
        for tc, rid in zip(msg.get("tool_calls", []), turn.ids, strict=False):
            if rid:
                tc["id"] = rid
        out.append(msg)
        agreed = _agreed(answers.get(turn.key, []))[
            : len(msg.get("tool_calls", []))
        ]  # one result per call it made
        out += [{"role": "tool", "tool_call_id": rid, "content": text} for rid, text in agreed]
    if main[-1].response_text is not None:
        out.append(_answer(main[-1].response_text))
    return out


def _results(after: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    out = []
    for r in after:
        if r.get("role") != "tool":
            break
        out.append(r)
    return out


def media_events(calls: Iterable[Any]) -> list[dict[str, Any]]:
    """Upstream's runner writes a `media_load` event for each attachment it put in the model's input; here
    the gateway's record of what the engine was sent says it (the images' bytes, hashed), whichever way
    the harness delivered them (a read tool's image block, a screenshot). A URL image has no bytes here
    and counts as loaded too: the engine fetched it."""
    seen: dict[str, dict[str, Any]] = {}
    for call in _main_calls(list(calls)):
        for ref in getattr(call, "images", None) or []:
            key = ref.sha256 or str(ref.url)
            seen.setdefault(
                key,
                {
                    "modality": "image",
                    "source_path": ref.url or f"sha256:{ref.sha256}",
                    "mime_type": ref.media_type,
                    "size_bytes": 0,
                    "sha256": ref.sha256,
                    "status": "loaded",
                    "note": f"call {call.index} of the gateway's call log",
                },
            )
    return list(seen.values())


def _plain(m: Mapping[str, Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": str(m.get("role", "")), "content": _text(m.get("content"))}
    if m.get("tool_calls"):
        msg["tool_calls"] = list(m["tool_calls"])
    if m.get("tool_call_id"):
        msg["tool_call_id"] = m["tool_call_id"]
    return msg


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def openclaw_events(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages as OpenClaw session events (QwenClawBench graders' `transcript`)."""
    events: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "system":
            continue
        if role == "tool":
            message: dict[str, Any] = {
                "role": "toolResult",
                "toolCallId": m.get("tool_call_id", ""),
                "content": [{"type": "text", "text": str(m.get("content", ""))}],
            }
        else:
            blocks: list[dict[str, Any]] = []
            if str(m.get("content", "")):
                blocks.append({"type": "text", "text": str(m.get("content", ""))})
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function", tc) if isinstance(tc, Mapping) else {}
                blocks.append(
                    {
                        "type": "toolCall",
                        "id": tc.get("id", "") if isinstance(tc, Mapping) else "",
                        "name": fn.get("name", ""),
                        "arguments": _arguments(fn.get("arguments", {})),
                    }
                )
            message = {"role": "assistant" if role == "assistant" else "user", "content": blocks}
        events.append({"type": "message", "message": message})
    return events


def conversation_text(messages: Sequence[Mapping[str, Any]], *, tools: bool = True) -> str:
    """`[ROLE]: text` lines (Claw-Eval's `format_conversation`), tool calls and results as lines too."""
    lines = []
    for m in messages:
        role = str(m.get("role", "")).upper()
        if role == "SYSTEM":
            continue
        text = str(m.get("content", "") or "")
        if text and (role != "TOOL" or tools):
            lines.append(f"[{role}]: {text}")
        for tc in (m.get("tool_calls") or []) if tools else []:
            fn = tc.get("function", tc) if isinstance(tc, Mapping) else {}
            lines.append(f"[TOOL CALL]: {fn.get('name', '')}({fn.get('arguments', '')})")
    return "\n".join(lines)


def actions_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The agent's tool calls and their results, in order (Claw-Eval's judge "Actions Taken")."""
    lines = []
    for m in messages:
        if m.get("role") == "tool":
            lines.append(f"[TOOL RESULT]: {m.get('content', '')}")
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function", tc) if isinstance(tc, Mapping) else {}
            lines.append(f"[TOOL CALL]: {fn.get('name', '')}({fn.get('arguments', '')})")
    return "\n".join(lines)
