"""The engine contract: what the gateway calls to get one chat completion, with its exact tokens.

The gateway speaks OpenAI chat-completions to every engine (protocol translation happens in front of
it). An engine answers either one `EngineResult` or an async iterator of `EngineChunk`s; both carry
the body to show the client plus the ids/logprobs the engine actually consumed and sampled, so the
gateway never parses a vendor dialect itself. Failures are raised as `EngineError` with the
`CallErrorKind` already decided here, at the boundary (so the gateway classifies by type).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, final

import orjson

from openforgerl.records import CallErrorKind


@dataclass(slots=True)
class EngineCall:
    """One chat-completions request as the gateway hands it to an engine.

    `route_key` (the rollout id) pins a rollout to one replica (prefix-cache reuse); `deadline` is
    an absolute `loop.time()` after which the engine must give up; `task_id` is the task the rollout
    plays (the gateway's record), which real engines ignore and the scripted oracle reads.
    """

    body: dict[str, Any]
    route_key: str
    deadline: float | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # True when the caller forwards `raw` bytes and needs only ids/logprobs/finish from a stream
    # (chat pass-through): engines may then skip building chunk dicts (`body` may be {}).
    raw_only: bool = False
    # An engine that serialises `body` to JSON passes the bytes through this when set (only offered
    # to engines with `splices_payload = True`): the gateway's lifted image data URLs go back in as
    # the client's bytes, with one copy (gateway/lifted.py; `body` then holds short keys there).
    splice: Callable[[bytes], bytes] | None = None
    task_id: str | None = None


@final
class PromptIds:
    """The prompt ids an engine consumed: the one form every engine type and the call tape use.

    Held as whichever form the engine gave, the other made on first use. An HTTP engine gives the
    JSON array bytes it sent: a real agent prompt is tens of thousands of ids, and the gateway only
    stores them, so it splices `json` into the record (`for_record`) instead of parsing and
    re-serialising them. An in-process engine gives the list.
    """

    __slots__ = ("_ids", "_json")

    def __init__(self, *, ids: list[int] | None = None, json: bytes | None = None) -> None:
        if ids is None and json is None:
            raise ValueError("PromptIds needs ids or their JSON array")
        self._ids, self._json = ids, json

    @property
    def ids(self) -> list[int]:
        if self._ids is None:
            self._ids = orjson.loads(self._json or b"[]")
        return self._ids

    @property
    def json(self) -> bytes:
        if self._json is None:
            self._json = orjson.dumps(self._ids)
        return self._json

    def for_record(self) -> object:
        """What `orjson.dumps` writes as the array: the engine's bytes when there are any."""
        return orjson.Fragment(self._json) if self._json is not None else self._ids

    def __len__(self) -> int:
        if self._ids is not None:
            return len(self._ids)
        raw = self._json or b"[]"
        return raw.count(b",") + 1 if len(raw) > 2 else 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PromptIds) and self.ids == other.ids

    __hash__ = None  # type: ignore[assignment]  # mutable-ish view: equality by value, no hashing

    def __repr__(self) -> str:
        return f"PromptIds({len(self)} ids)"


@dataclass(slots=True)
class EngineResult:
    """A finished non-streamed completion.

    `body` is the chat.completion dict to show the client; `raw` (optional) is the same body as the
    engine's own bytes, forwarded untouched when the client speaks chat-completions (cheapest path).
    `prompt` holds the prompt ids (see `PromptIds`).
    """

    body: dict[str, Any]
    prompt: PromptIds
    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str | None
    engine_id: str
    raw: bytes | None = None


@dataclass(slots=True)
class EngineChunk:
    """One streamed chat.completion.chunk (or several that arrived together) plus their ids/logprobs.

    `prompt` is set on (at least) one chunk of a stream, usually the first. `raw` is the
    exact SSE event bytes (``data: ...\\n\\n``) when the engine streams chat-completions itself.
    When one network read carried several events, they travel as one EngineChunk (fewer writes
    downstream): `bodies` lists every chunk dict in order, `body` is the last one, and the id,
    logprob and raw fields cover all of them.
    """

    body: dict[str, Any]
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    prompt: PromptIds | None = None
    finish_reason: str | None = None
    engine_id: str = ""
    raw: bytes | None = None
    bodies: list[dict[str, Any]] | None = None
    content: str | None = None  # the delta text these events added, when the engine already read it
    final: bool = False  # no more content follows (finish_reason seen, or a usage/ids-only chunk)
    # Set when the events in `raw` were forwarded unread (plain token events on the pass-through
    # path): ids, logprobs, text and finish reason are then read once per call, by calling it on
    # the concatenated `raw` of consecutive such chunks; it returns them as one EngineChunk.
    decode: Callable[[bytes], EngineChunk | None] | None = None

    def all_bodies(self) -> list[dict[str, Any]]:
        return self.bodies if self.bodies is not None else [self.body]


# The phrase vLLM's serving layer (and the local engine, which copies it) puts in that 400's message.
CONTEXT_OVERFLOW_TEXT = "maximum context length"


class EngineError(Exception):
    """An engine call failed; `kind` says which boundary (HTTP status, connection, deadline, protocol)."""

    def __init__(
        self, kind: CallErrorKind, message: str, *, status: int | None = None, body: bytes | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.body = body

    @property
    def is_client_error(self) -> bool:
        """The engine refused the request itself (4xx other than 408/429): the harness's fault."""
        return (
            self.kind == CallErrorKind.ENGINE_HTTP
            and self.status is not None
            and (400 <= self.status < 500 and self.status not in (408, 429))
        )

    @property
    def is_context_overflow(self) -> bool:
        """vLLM's (and our engine's) 400 for a prompt + max_tokens past the model's context."""
        return self.is_client_error and CONTEXT_OVERFLOW_TEXT in self.message


class Engine(Protocol):
    """An inference engine behind the gateway (vLLM, SGLang, scripted, ...)."""

    async def complete(self, call: EngineCall) -> EngineResult:
        """Run one non-streamed chat completion."""
        ...

    def stream(self, call: EngineCall) -> AsyncIterator[EngineChunk]:
        """Run one streamed chat completion; the iterator ends after the last chunk."""
        ...

    async def models(self) -> list[str]:
        """Model names the engine serves (for `/v1/models`)."""
        ...

    async def aclose(self) -> None: ...
