"""What one call leaves in the log: the accumulator a call fills, and its `CallRecord`.

The gateway tees ids/logprobs out of the engine's answer into a `CallTape` as they pass, and turns
it into exactly one `CallRecord` at the end (success or typed error). Harness headers give the
agent tree (Codex `thread-id`/`x-codex-parent-thread-id`, Claude `x-claude-code-agent-id`/
`x-claude-code-parent-agent-id`); side calls (title generation, warm-up) are flagged so they are
never trained.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from openforgerl.engines.base import EngineChunk, EngineResult, PromptIds
from openforgerl.gateway.images import with_engine_grids
from openforgerl.records import CallError, CallErrorKind, CallRecord, ImageRef, WireProtocol, encode_record

if TYPE_CHECKING:  # only the type: protocols/ needs nothing from here
    from openforgerl.gateway.protocols.base import WireAdapter

# Harness headers worth keeping (lower-case); secrets (authorization, x-api-key) never are.
RECORDED_HEADERS = (
    "thread-id",
    "session-id",
    "x-codex-parent-thread-id",
    "x-openai-subagent",
    "x-codex-turn-metadata",
    "x-codex-window-id",
    "x-client-request-id",
    "x-claude-code-session-id",
    "x-claude-code-agent-id",
    "x-claude-code-parent-agent-id",
    "x-session-id",
    "x-session-affinity",
    "traceparent",
    "user-agent",
    "anthropic-beta",
    "anthropic-version",
)
_AGENT_HEADERS = ("x-claude-code-agent-id", "thread-id")
_PARENT_HEADERS = ("x-claude-code-parent-agent-id", "x-codex-parent-thread-id")
_SIDE_CALL_PROMPTS = (
    "title generator",
    "generate a title",
    "generate a short title",
    "summarize this coding conversation",
)


_RECORDED = frozenset(RECORDED_HEADERS)
_SAMPLED_TOKEN = re.compile(rb'"token_ids":\[[0-9]')  # an unread event that carries a sampled token
_SYSTEM_HEAD = 2048
_MEDIA_KEY = b'"openforgerl_images":'  # the engine's per-image grids (local engine; vLLM has none)
_MEDIA_SCANS = 4  # chunks looked at for it (it rides the first, with the prompt ids)
# Events whose deltas may carry more than content (a key, or the word in a string: then the bodies are
# read for nothing). Both scans of a 128-token stream's 26 KB take 16 µs (a regex alternation: 40 µs),
# against 1.8-3.1 ms of gateway CPU per such call (docs/benchmarks.md).
_EXTRAS = (b"tool_calls", b"reasoning")


def harness_headers(headers: Any) -> dict[str, str]:
    """The subset of request headers that describe the harness/agent, keyed in lower case."""
    out = {}
    for name, value in headers.items():
        low = name.lower()
        if low in _RECORDED:
            out[low] = value
    return out


def agent_ids(headers: dict[str, str]) -> tuple[str | None, str | None]:
    agent = next((headers[h] for h in _AGENT_HEADERS if h in headers), None)
    parent = next((headers[h] for h in _PARENT_HEADERS if h in headers), None)
    return agent, parent


def _system_head(adapter: WireAdapter, request: dict[str, Any]) -> str:
    """The leading system/instructions text of a request (where it sits: the protocol says), flattened."""
    # Side-call prompts announce themselves in their opening lines; the head of each part is enough
    # (long agent system prompts are not lower-cased whole on every call).
    return " ".join(_flatten(p)[:_SYSTEM_HEAD] for p in adapter.system_parts(request)).lower()


def _flatten(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return " ".join(_flatten(v.get("text", "") if isinstance(v, dict) else v) for v in value)
    return ""


def is_side_call(adapter: WireAdapter, request: dict[str, Any]) -> bool:
    """Title generation / warm-up calls: never part of the trained trajectory."""
    if request.get("generate") is False:
        return True
    if request.get("tools"):
        return False
    fmt = (
        (request.get("output_config") or {}).get("format")
        if isinstance(request.get("output_config"), dict)
        else None
    )
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return True
    system = _system_head(adapter, request)
    # Every marker holds "title" or "summarize": two scans of the text rule most calls out.
    return ("title" in system or "summarize" in system) and any(p in system for p in _SIDE_CALL_PROMPTS)


@dataclass
class CallTape:
    """Accumulates what the engine produced for one call, as it streams past."""

    prompt: PromptIds | None = None
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    engine_id: str | None = None
    first_token_at: float | None = None
    # Calls with images: the engine's per-image report and processor settings, when it gives them.
    want_media: bool = False
    engine_images: list[Any] | None = None
    processor: dict[str, Any] | None = None
    _media_scans: int = 0
    # The message returned, for the verbatim history (`verbatim.returned_key`): an answer's `message`;
    # a stream's reasoning and tool calls by index ([name, arguments]), as its deltas add them up.
    returned: Any = None
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, list[str]] = field(default_factory=dict)
    # Chunks forwarded unread (`EngineChunk.decode`): their raw events, decoded together by `settle`.
    _unread: list[bytes] = field(default_factory=list)
    _decode: Callable[[bytes], EngineChunk | None] | None = None

    def take_result(self, result: EngineResult) -> None:
        self.prompt = result.prompt
        self.token_ids = result.token_ids
        self.logprobs = result.logprobs
        self.finish_reason = result.finish_reason
        self.engine_id = result.engine_id
        self.first_token_at = time.time()
        if self.want_media:
            self._take_media(result.body)
        choices = result.body.get("choices") or [{}]
        self.returned = choices[0].get("message")
        content = (self.returned or {}).get("content")
        if isinstance(content, str):
            self.text.append(content)

    def prompt_ids(self) -> list[int]:
        return [] if self.prompt is None else self.prompt.ids

    def prompt_length(self) -> int:
        return 0 if self.prompt is None else len(self.prompt)

    def _take_media(self, body: Any) -> bool:
        if not isinstance(body, dict) or "openforgerl_images" not in body:
            return False
        self.engine_images = body["openforgerl_images"]
        proc = body.get("openforgerl_processor")
        self.processor = proc if isinstance(proc, dict) else None
        return True

    def _scan_media(self, chunk: EngineChunk) -> None:
        """The engine's image report from the first chunks (parsed, or their raw events)."""
        self._media_scans += 1
        if (
            any(self._take_media(b) for b in chunk.all_bodies())
            or chunk.raw is None
            or _MEDIA_KEY not in chunk.raw
        ):
            return
        for event in chunk.raw.split(b"\n\n"):
            if _MEDIA_KEY in event and event.startswith(b"data: "):
                try:
                    self._take_media(orjson.loads(event[6:]))
                except orjson.JSONDecodeError:
                    pass
                return

    def take_chunk(self, chunk: EngineChunk) -> None:
        if self.want_media and self.engine_images is None and self._media_scans < _MEDIA_SCANS:
            self._scan_media(chunk)
        if chunk.decode is not None and chunk.raw is not None:
            if self.first_token_at is None and _SAMPLED_TOKEN.search(chunk.raw) is not None:
                self.first_token_at = time.time()
            self._unread.append(chunk.raw)
            self._decode = chunk.decode
            if chunk.engine_id:
                self.engine_id = chunk.engine_id
            return
        self.settle()  # keep the order: unread events came before this chunk
        self._take_read(chunk)

    def settle(self, *, strict: bool = True) -> None:
        """Decode the chunks forwarded unread; `strict=False` keeps what decodes and drops the
        rest (a record written after a failure must not fail too)."""
        if not self._unread or self._decode is None:
            return
        raw, self._unread = b"".join(self._unread), []
        try:
            decoded = self._decode(raw)
        except Exception:
            if strict:
                raise
            return
        if decoded is not None:
            first = self.first_token_at
            self._take_read(decoded)
            self.first_token_at = first  # when the first token passed, not when it was decoded

    def _take_read(self, chunk: EngineChunk) -> None:
        if chunk.prompt is not None:
            self.prompt = chunk.prompt
        if chunk.token_ids:
            if self.first_token_at is None:
                self.first_token_at = time.time()
            self.token_ids += chunk.token_ids
            self.logprobs += chunk.logprobs
        if chunk.finish_reason is not None:
            self.finish_reason = chunk.finish_reason
        if chunk.engine_id:
            self.engine_id = chunk.engine_id
        if chunk.raw is None or any(key in chunk.raw for key in _EXTRAS):
            self._take_extras(chunk)
        if chunk.content is not None:
            if chunk.content:
                self.text.append(chunk.content)
            return
        for body in chunk.all_bodies():
            choices = body.get("choices")
            if choices:
                content = (choices[0].get("delta") or {}).get("content")
                if content:
                    self.text.append(content)

    def _take_extras(self, chunk: EngineChunk) -> None:
        """A stream's reasoning and tool-call deltas (read only from events that hold them)."""
        for body in chunk.all_bodies():
            choices = body.get("choices")
            delta = choices[0].get("delta") if isinstance(choices, list) and choices else None
            if not isinstance(delta, dict):
                continue
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str):
                self.reasoning.append(thought)
            for call in delta.get("tool_calls") or ():
                fn = call.get("function") if isinstance(call, dict) else None
                if not isinstance(fn, dict):
                    continue
                index = call.get("index")
                slot = self.calls.setdefault(index if isinstance(index, int) else 0, ["", ""])
                for at, key in ((0, "name"), (1, "arguments")):
                    piece = fn.get(key)
                    slot[at] += piece if isinstance(piece, str) else ""


@dataclass
class CallMeta:
    """Who made the call and how: fixed when the call is admitted."""

    rollout_id: str
    index: int
    protocol: WireProtocol
    request: dict[str, Any]
    engine_request: dict[str, Any] | None
    headers: dict[str, str]
    policy_version: int
    started_at: float
    side_call: bool
    # The request as stored, as JSON bytes: the client's bytes; with images, the lifted lean body
    # with blob references where the data URLs were (gateway/lifted.py), or None and then
    # `stored_request` (the body walked, base64 -> references). `request` stays the client's,
    # for building the answer.
    request_json: bytes | None = None
    images: list[ImageRef] = field(default_factory=list)
    stored_request: dict[str, Any] | None = None


def _record_fields(
    meta: CallMeta, tape: CallTape, error: CallError | None, finished_at: float, spliced: bool
) -> dict[str, Any]:
    """CallRecord's fields; `spliced`: the raw JSON pieces stand in as `orjson.Fragment`s."""
    tape.settle(strict=False)
    agent, parent = agent_ids(meta.headers)
    request: Any = meta.request if meta.stored_request is None else meta.stored_request
    if spliced:
        if meta.request_json is not None:
            request = orjson.Fragment(meta.request_json)
        prompt: Any = [] if tape.prompt is None else tape.prompt.for_record()
    else:
        if meta.request_json is not None and meta.images:  # the lifted path's stored request
            request = orjson.loads(meta.request_json)
        prompt = tape.prompt_ids()
    images: Any = (
        meta.images if tape.engine_images is None else with_engine_grids(meta.images, tape.engine_images)
    )
    if not spliced:
        images = [ImageRef.model_validate(i) for i in images]
    return {
        "rollout_id": meta.rollout_id,
        "index": meta.index,
        "protocol": meta.protocol,
        "request": request,
        "engine_request": meta.engine_request,
        "response_text": "".join(tape.text) if tape.text else None,
        "prompt_token_ids": prompt,
        "completion_token_ids": tape.token_ids,
        "completion_logprobs": tape.logprobs,
        "finish_reason": tape.finish_reason,
        "policy_version": meta.policy_version,
        "engine": tape.engine_id,
        "started_at": meta.started_at,
        "first_token_at": tape.first_token_at,
        "finished_at": finished_at,
        "error": error,
        "side_call": meta.side_call,
        "agent_id": agent,
        "parent_agent_id": parent,
        "headers": meta.headers,
        "images": images,
        "processor": tape.processor,
    }


def build_record(
    meta: CallMeta, tape: CallTape, error: CallError | None = None, finished_at: float | None = None
) -> CallRecord:
    """One CallRecord (constructed without re-validation: every field is already typed)."""
    finished = time.time() if finished_at is None else finished_at
    return CallRecord.model_construct(**_record_fields(meta, tape, error, finished, spliced=False))


def record_json(
    meta: CallMeta, tape: CallTape, error: CallError | None = None, finished_at: float | None = None
) -> bytes:
    """The same record as `build_record`, straight to its stored JSON (the gateway's hot path).

    The client's request body and the engine's prompt-id array are spliced in as the bytes that
    came over the wire (already checked to be JSON), not parsed and re-serialised: on real agent
    calls (tens of KB of history, tens of thousands of prompt ids) that is most of the gateway's
    per-call CPU. This is the only writer of call records; `build_record` is its oracle in tests:
    `CallRecord.model_validate_json` of the result equals it.
    """
    finished = time.time() if finished_at is None else finished_at
    return encode_record(_record_fields(meta, tape, error, finished, spliced=True))


def call_error(kind: CallErrorKind, message: str, status: int | None = None) -> CallError:
    return CallError(kind=kind, message=message[:2000], status=status)
