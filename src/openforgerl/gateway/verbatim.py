"""Verbatim history: an assistant turn a harness sends back is shown to the engine as the model wrote it.

Why (measured, `tests/harness/test_verbatim_history.py`): with outputs shaped like a real model's — a
reasoning block, tool-call JSON without the template's spacing (`<tool_call>{"name":…}</tool_call>`),
trailing spaces — every harness, our own `zero` included, broke its chain on the next call
(`prefix_mismatch:sampled`): the harness echoes the *parsed* message (content, reasoning, tool calls) and
the chat template renders it in its own canonical spelling, which is not the token sequence the model
sampled. Scripted outputs in the template's spelling never showed it. veRL's agent loop avoids it by never
re-rendering (it appends the sampled ids); a gateway in front of an unmodified harness can only get there
by putting the model's own text back: for each finished call it learns the raw text of the sampled ids
(the engine's `/detokenize`, once, when a later request echoes a turn), and when a later request of the same
rollout carries an assistant message that means the same thing — same content and reasoning up to whitespace,
same tool calls by name and parsed arguments — that message is replaced by
`{"role": "assistant", "content": <raw text>}`, which the chat template renders as is. So is a message equal,
field for field, to the one the gateway returned for that completion (`returned_key`): when the engine's
parser made a call of text that is not JSON (vLLM's streaming hermes parser did, with a real model: the name
`x', ` and arguments that do not parse), the harness echoes that call, its meaning cannot be read from the
sampled text, and only what was returned identifies it. A message that differs in meaning (edited by the
harness, reasoning dropped by it) is left alone, so the engine never sees something the harness did not say.
The record keeps the request as the harness sent it and the rewritten one as `engine_request`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from openforgerl.gateway.errors import GatewayError

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_SPACE = re.compile(r"\s+")
_KEEP = 512  # remembered completions per rollout: a long agent run, not an unbounded map
READ_TIMEOUT_S = 5.0  # a loopback /detokenize takes ~1 ms; past this the turn goes as the harness sent it

Signature = tuple[str, tuple[tuple[str, str], ...]]
Detokenize = Callable[[list[int], str], Awaitable[str | None]]


def _squash(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _canonical_args(arguments: Any) -> str | None:
    """Tool-call arguments as canonical JSON (a string is parsed first); None when not JSON."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return None
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def _text_of(content: Any) -> str | None:
    """A message's text (a string, or text parts joined); None when it holds anything else (images)."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text") or "") for p in content)
    return None


def message_signature(message: dict[str, Any]) -> Signature | None:
    """What an assistant message means: its reasoning and content as one text, whitespace-insensitive,
    and its tool calls. One text, because where the split falls is the engine's parser setting (qwen3's
    parser makes a reply with no `</think>` all reasoning; a model served without one, all content):
    a message keeps its meaning either way, and a harness that dropped the reasoning does not match."""
    text = _text_of(message.get("content"))
    if text is None:
        return None
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    calls: list[tuple[str, str]] = []
    for call in tool_calls(message):
        fn = call.get("function") or {}
        args = _canonical_args(fn.get("arguments"))
        if args is None or not isinstance(fn.get("name"), str):
            return None
        calls.append((fn["name"], args))
    return _squash(f"{reasoning} {text}"), tuple(calls)


def tool_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    """An assistant message's `tool_calls`: a list of objects whose `function`, when present, is an
    object; anything else is the client's malformed request, a 400 (the engine would refuse it too)."""
    calls = message.get("tool_calls")
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise GatewayError(400, "an assistant message's 'tool_calls' must be a list", param="tool_calls")
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("function") or {}, dict):
            raise GatewayError(
                400,
                "each of an assistant message's 'tool_calls' must be an object with an object 'function'",
                param="tool_calls",
            )
    return calls


def raw_signature(raw: str) -> Signature:
    """The same meaning read from the model's raw text, as vLLM's hermes parser reads it: the JSON
    `<tool_call>` blocks are calls; when any block is not a call, none is, and the whole reply is text."""
    calls: list[tuple[str, str]] = []
    for block in _TOOL_CALL.findall(raw):
        call = _call_of(block)
        if call is None:
            return _squash(_without_think_tags(raw)), ()
        calls.append(call)
    return _squash(_without_think_tags(_TOOL_CALL.sub(" ", raw))), tuple(calls)


def _call_of(block: str) -> tuple[str, str] | None:
    try:
        parsed = json.loads(block)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("name"), str):
        return None
    args = _canonical_args(parsed.get("arguments", {}))
    return None if args is None else (parsed["name"], args)


def _without_think_tags(text: str) -> str:
    return text.replace(THINK_OPEN, " ").replace(THINK_CLOSE, " ")


@dataclass
class EchoMemory:
    """Per rollout: the raw text of its finished completions, by meaning (most recent wins).

    Sampled ids are noted when a call ends and read (detokenized) only when a later request carries an
    assistant turn: a caller that never echoes one (single-turn traffic, the gateway benchmark) costs a
    list append per call, and an agent loop one `/detokenize` per completion."""

    texts: OrderedDict[Signature, str] = field(default_factory=OrderedDict)
    unread: list[tuple[list[int], Hashable | None]] = field(default_factory=list)  # ids, `returned_key`
    # Echoed turns already recognised, by their exact fields: each call resends the whole history, and
    # reading meaning (regex, JSON) for 150 echoed turns took ~1 ms a call; a dict hit is ~0.1 µs a turn.
    known: OrderedDict[Hashable, str] = field(default_factory=OrderedDict)

    def remember(self, raw: str) -> None:
        sig = raw_signature(raw)
        self.texts[sig] = raw
        self.texts.move_to_end(sig)
        while len(self.texts) > _KEEP:
            self.texts.popitem(last=False)

    def note(self, ids: list[int], returned: Hashable | None = None) -> None:
        """A finished completion's sampled ids, and the `returned_key` of the message the gateway
        returned for it (None: not known)."""
        self.unread.append((ids, returned))
        del self.unread[:-_KEEP]

    async def read(self, detokenize: Detokenize, route_key: str) -> None:
        batch, self.unread = self.unread, []  # taken before awaiting: a concurrent call reads the rest
        reads = asyncio.gather(*(detokenize(ids, route_key) for ids, _ in batch), return_exceptions=True)
        # cancelled through wait_for (a stopped run), a gather keeps its CancelledError as an exception
        # that asyncio reports as a traceback when nobody reads it: read it here
        reads.add_done_callback(lambda f: f.cancelled() or f.exception())
        try:
            # Bounded: this runs before the call's own engine deadline is armed, and a hung engine must
            # end the rollout as infra_error:engine through that deadline, not hang here unrecorded.
            texts = await asyncio.wait_for(reads, READ_TIMEOUT_S)
        except TimeoutError:
            return
        for (_, returned), raw in zip(batch, texts, strict=True):
            if isinstance(raw, str) and raw:  # best effort: ids the engine cannot read stay as sent
                self.remember(raw)
                if returned is not None:
                    self._know(returned, raw)

    async def rewrite(
        self, body: dict[str, Any], detokenize: Detokenize | None, route_key: str
    ) -> dict[str, Any] | None:
        """`body` with each recognised assistant message replaced by the model's raw text; None when
        nothing was recognised (the body goes to the engine as it came)."""
        messages = body.get("messages")
        if not (self.texts or self.unread) or not isinstance(messages, list):
            return None  # nothing sampled yet in this rollout: no scan of the request on the hot path
        if not any(_is_assistant(m) for m in messages):
            return None
        if self.unread and detokenize is not None:
            await self.read(detokenize, route_key)
        if not self.texts:
            return None
        out: list[Any] | None = None
        for i, message in enumerate(messages):
            raw = self._raw_for(message)
            if raw is None:
                continue
            if out is None:
                out = list(messages)
            out[i] = {"role": "assistant", "content": raw}
        return None if out is None else {**body, "messages": out}

    def _raw_for(self, message: Any) -> str | None:
        if not _is_assistant(message):
            return None
        key = _exact_key(message)
        if key is not None and key in self.known:
            return self.known[key]
        sig = message_signature(message)
        raw = None if sig is None else self.texts.get(sig)
        if raw is not None and key is not None:  # only hits: a miss may become a hit once ids are read
            self._know(key, raw)
        return raw

    def _know(self, key: Hashable, raw: str) -> None:
        self.known[key] = raw
        while len(self.known) > 4 * _KEEP:
            self.known.popitem(last=False)


def _exact_key(message: dict[str, Any]) -> Hashable | None:
    """A message's fields as they came, when they are plain strings (the common case); no content and
    empty content are one (an engine answers `null` beside tool calls, a harness may echo `""`)."""
    content = message.get("content")
    if not (content is None or isinstance(content, str)):
        return None
    calls = []
    for call in tool_calls(message):
        fn = call.get("function")
        if not (
            isinstance(fn, dict) and isinstance(fn.get("arguments"), str) and isinstance(fn.get("name"), str)
        ):
            return None
        calls.append((fn["name"], fn["arguments"]))
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if not (reasoning is None or isinstance(reasoning, str)):
        return None
    return content or "", reasoning or "", tuple(calls)


def returned_key(
    message: Any, text: str, calls: dict[int, list[str]], reasoning: str = ""
) -> Hashable | None:
    """The `_exact_key` of the message the gateway returned for a completion: the answer's `message`
    when it was one body, else the one a stream's deltas added up to (`text`, the tool calls by index as
    [name, arguments], `reasoning`). None when it cannot be told."""
    if not isinstance(message, dict):
        listed = [{"function": {"name": n, "arguments": a}} for _, (n, a) in sorted(calls.items())]
        message = {"content": text, "reasoning": reasoning, "tool_calls": listed}
    try:
        return _exact_key(message)
    except GatewayError:  # an engine's odd `tool_calls`: not recognisable, never an error here
        return None


def _is_assistant(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "assistant"


def sampled_text_ids(ids: list[int], finish_reason: str | None, request: dict[str, Any]) -> list[int]:
    """The ids of the text a template puts inside the assistant turn: a `stop` finish without stop
    strings ended on the end-of-turn token, which the template writes itself."""
    if finish_reason in ("stop", "tool_calls") and not request.get("stop") and ids:
        return ids[:-1]
    return ids
