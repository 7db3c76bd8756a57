"""A rollout's transcript, built on the host from the gateway's call log (never from the sandbox), and
never from a history the agent could have written.

The agent holds its rollout's key, so from its shell it can send the gateway a request of its own whose
history holds assistant turns it wrote and tool results it made up; reading "the last call's history"
graded that forgery. So every turn here is witnessed by a record the agent cannot write:

- assistant turns are the engine's sampled outputs the gateway recorded (`CallRecord.response_text`), one
  per call of the main agent, in call order. A history turn only lends them the harness's tool-call ids,
  and only when it means the same as a recorded output (`gateway/verbatim.py`'s signatures: content and
  reasoning up to whitespace, tool calls by name and parsed arguments; a turn the gateway restored as raw
  text is read as raw text). An assistant turn of a history that matches no earlier output is the
  client's, never the model's: it is dropped, and so are the tool results that follow it;
- system and user turns are those of the main agent's first call, sent before the model had sampled
  anything (the task's prompt, as the harness framed it); the simulated user's replies come from the
  host's relay record (`HostSide.user_record`), never from here. A user turn that first appears later is
  dropped;
- a tool result is taken from the requests that answer its turn directly (whose last witnessed assistant
  turn is that turn). The harness sends one such request per turn; a second that disagrees on a result
  is a request the agent made from its shell while that turn's own tools ran, so the result is withheld
  (`WITHHELD`), never chosen. Where the environment keeps its own audit (Claw services, Claw-Eval's
  mock services, tau2's service), graders read effects from that audit, not from these texts.

Why drop and withhold rather than label: a label leaves the forged words in front of a string check or a
judge (a grader that looks for "sent" still finds it), so it can raise a score; an absent turn cannot add
a tool call, a success or a claim the model never made, and every turn the model did sample stays (the
forger cannot hide a real action by leaving it out of its history either).

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openforgerl.gateway.verbatim import Signature, message_signature, raw_signature

__all__ = ["WITHHELD", "actions_text", "conversation_text", "media_events", "messages_from_calls",
           "openclaw_events"]

WITHHELD = "[tool result withheld: the rollout's requests disagree on it, so the agent may have written it]"


def _text(content: Any) -> str:
    from openforgerl.engines.chat_format import content_to_text

    return content_to_text(content)


def _main_calls(calls: Sequence[Any]) -> list[Any]:
    """The main agent's usable calls in order. The main agent is the one that made the rollout's first
    root call: the harness makes it before the model has sampled anything, so a flood of requests the
    agent sends under another agent id from its shell cannot take that place."""
    usable = sorted((c for c in calls if not getattr(c, "side_call", False) and c.error is None
                     and isinstance(c.engine_request or c.request, dict)), key=lambda c: c.index)
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
        msg["tool_calls"] = [{"id": t.id, "type": "function",
                              "function": {"name": t.name, "arguments": t.arguments}} for t in parsed.tool_calls]
    return msg


def _history(call: Any) -> list[Mapping[str, Any]]:
    body = call.engine_request or call.request
    return [m for m in body.get("messages", []) if isinstance(m, Mapping)]


def _verbatim_turn(m: Mapping[str, Any]) -> bool:
    """An assistant turn the gateway put back as the model's raw text (`gateway/verbatim.py`): its tool
    calls are markup in the content, no longer structured."""
    return m.get("role") == "assistant" and not m.get("tool_calls") and isinstance(m.get("content"), str)


def _turn_signature(m: Mapping[str, Any]) -> Signature | None:
    if _verbatim_turn(m):
        return raw_signature(str(m["content"]))
    return message_signature(dict(m))


@dataclass(frozen=True)
class _Seen:
    """One witnessed assistant turn in one request's history: which sampled output it is, the tool-call
    ids the harness gave it, and the tool results that follow it there."""

    turn: int
    ids: tuple[str, ...]
    results: tuple[tuple[str, str], ...]  # (tool_call_id, text)


def _witnessed(history: Sequence[Mapping[str, Any]], before: int, sampled: Sequence[Any],
               sigs: Sequence[Signature]) -> list[_Seen]:
    """The history's assistant turns that are earlier sampled outputs, matched in order (each output
    witnesses one turn; an output the harness dropped, a retry's, is skipped over)."""
    out: list[_Seen] = []
    nxt = 0
    for pos, m in enumerate(history):
        if m.get("role") != "assistant":
            continue
        sig = _turn_signature(m)
        k = next((t for t in range(nxt, len(sampled)) if sampled[t].index < before and sigs[t] == sig), None)
        if sig is None or k is None:
            continue  # the client's, not the model's
        nxt = k + 1
        results = tuple((str(r.get("tool_call_id") or ""), _text(r.get("content"))) for r in _results(history[pos + 1:]))
        structured = [str(tc.get("id") or "") for tc in m.get("tool_calls") or [] if isinstance(tc, Mapping)]
        out.append(_Seen(k, tuple(structured) if any(structured) else tuple(r[0] for r in results), results))
    return out


def _agreed(answers: Sequence[tuple[tuple[str, str], ...]]) -> list[tuple[str, str]]:
    """The tool results of one turn from every request that answered it directly: kept where they all
    agree, `WITHHELD` where they do not."""
    out = []
    for i in range(max((len(a) for a in answers), default=0)):
        seen = {a[i] for a in answers if i < len(a)}
        rid = next(iter(seen))[0] if len({r[0] for r in seen}) == 1 else ""
        out.append((rid, next(iter(seen))[1] if len(seen) == 1 and all(i < len(a) for a in answers) else WITHHELD))
    return out


def messages_from_calls(calls: Iterable[Any]) -> list[dict[str, Any]]:
    """The main agent's conversation, every turn witnessed (see the module docstring): the first call's
    system and user turns, then each sampled output with the tool results that answered it."""
    main = _main_calls(list(calls))
    if not main:
        return []
    out = [_plain(m) for m in _history(main[0]) if m.get("role") in ("system", "user")]
    sampled = [c for c in main if c.response_text is not None]
    sigs = [raw_signature(str(c.response_text)) for c in sampled]
    ids: dict[int, tuple[str, ...]] = {}
    answers: dict[int, list[tuple[tuple[str, str], ...]]] = {}
    for call in main:
        seen = _witnessed(_history(call), call.index, sampled, sigs)
        for s in seen:
            ids.setdefault(s.turn, s.ids)
        if seen and seen[-1].results:  # this request answers its last witnessed turn
            answers.setdefault(seen[-1].turn, []).append(seen[-1].results)
    for t, call in enumerate(sampled):
        msg = _answer(str(call.response_text))
        for tc, rid in zip(msg.get("tool_calls", []), ids.get(t, ()), strict=False):
            if rid:
                tc["id"] = rid
        out.append(msg)
        out += [{"role": "tool", "tool_call_id": rid, "content": text} for rid, text in _agreed(answers.get(t, []))]
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
            seen.setdefault(key, {"modality": "image", "source_path": ref.url or f"sha256:{ref.sha256}",
                                  "mime_type": ref.media_type, "size_bytes": 0, "sha256": ref.sha256,
                                  "status": "loaded", "note": f"call {call.index} of the gateway's call log"})
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
            message: dict[str, Any] = {"role": "toolResult", "toolCallId": m.get("tool_call_id", ""),
                                       "content": [{"type": "text", "text": str(m.get("content", ""))}]}
        else:
            blocks: list[dict[str, Any]] = []
            if str(m.get("content", "")):
                blocks.append({"type": "text", "text": str(m.get("content", ""))})
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function", tc) if isinstance(tc, Mapping) else {}
                blocks.append({"type": "toolCall", "id": tc.get("id", "") if isinstance(tc, Mapping) else "",
                               "name": fn.get("name", ""), "arguments": _arguments(fn.get("arguments", {}))})
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
