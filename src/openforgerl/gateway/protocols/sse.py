"""Server-sent events: an encoder (dict in, bytes out) and an incremental decoder (bytes in, events out).

Both are on the gateway's hot path. The encoder is the one SSE writer of every wire protocol's stream
(`protocols/{chat,responses,anthropic}/`); the decoder reads such streams (tests, clients). The encoder writes
`event: <name>` + one `data:` line (the JSON never contains a raw newline, orjson escapes it). The decoder
follows the WHATWG event-stream rules (CR, LF or CRLF line ends, `:` comments, multi-line `data`, `id`,
`retry`) and keeps no growing buffer: a chunk split anywhere, even inside a CRLF or a
UTF-8 sequence, decodes the same.

    dec = SSEDecoder()
    for chunk in body_chunks:
        for ev in dec.feed(chunk):
            handle(ev.event, ev.json())
    for ev in dec.finish():
        handle(ev.event, ev.json())
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

KEEPALIVE = b": keepalive\n\n"


_HEADS: dict[str, bytes] = {}  # `event: <name>\ndata: ` per event name (a protocol has a dozen names)
_MAX_HEADS = 256


def encode(data: dict[str, Any] | bytes, event: str | None = None) -> bytes:
    """One SSE event; `data` is a dict (JSON-encoded) or already-encoded JSON bytes."""
    payload = data if isinstance(data, bytes) else orjson.dumps(data)
    if event is None:
        return b"data: " + payload + b"\n\n"
    head = _HEADS.get(event)
    if head is None:
        head = b"event: " + event.encode() + b"\ndata: "
        if len(_HEADS) < _MAX_HEADS:
            _HEADS[event] = head
    return head + payload + b"\n\n"


def comment(text: str = "keepalive") -> bytes:
    """An SSE comment: keeps a connection alive, ignored by every client parser."""
    return b": " + text.replace("\n", " ").encode() + b"\n\n"


@dataclass(frozen=True)
class ServerSentEvent:
    event: str | None
    data: str
    id: str | None = None
    retry: int | None = None

    def json(self) -> Any:
        return orjson.loads(self.data)


class SSEDecoder:
    """Incremental event-stream decoder: `feed(bytes) -> list[ServerSentEvent]`, then `finish()`."""

    def __init__(self) -> None:
        self._pending = b""  # bytes of an unfinished line
        self._skip_lf = False  # the last chunk ended with CR: a leading LF belongs to it
        self._event: str | None = None
        self._data: list[str] = []
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        if self._skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._skip_lf = chunk[-1:] == b"\r"
        if not chunk:
            return []
        lines = (self._pending + chunk).splitlines(keepends=True)
        self._pending = b"" if lines[-1][-1:] in (b"\n", b"\r") else lines.pop()
        out: list[ServerSentEvent] = []
        for raw in lines:
            ev = self._line(raw.rstrip(b"\r\n").decode("utf-8", "replace"))
            if ev is not None:
                out.append(ev)
        return out

    def finish(self) -> list[ServerSentEvent]:
        """Flush an unterminated last line and event (a stream cut without a blank line)."""
        out = [] if not self._pending else self.feed(b"\n")
        ev = self._line("")
        return out + ([ev] if ev is not None else [])

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line[0] == ":":
            return None
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._data and self._event is None:
            return None
        ev = ServerSentEvent(self._event, "\n".join(self._data), self._id, self._retry)
        self._event, self._data, self._retry = None, [], None
        return ev
