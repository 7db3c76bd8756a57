"""Data URLs lifted out of a Chat body's bytes before it is parsed, and put back for the engine.

Why: a GUI agent's call carries its last screenshots as base64 data URLs, 55-75 KB of JSON string
each, and the gateway never needs them as Python strings. Parsing them (orjson copies every one
into a str: ~26 us per screenshot), checking the body's depth (serialising them again) and
serialising the engine body (once more) was most of a resent screenshot's cost. Here one C-speed
scan finds each `"data:image/` string in the raw bytes and notes where it is (a span: nothing is
copied); the body is parsed with a short key in its place; `find_images` reads the image from the
raw bytes at that span (decode and hash from there, `images._take_lifted`); the record gets the blob
reference as before (`stored_copy`); and the engine gets the bytes back as they came (`splice`: the
engine's serialised payload with each key's JSON string swapped for the span, one copy; or a str
for an engine that takes Python values, `for_engine`).

Why spans and not slices (measured, 5 screenshots per call, 4 of them resent): slicing each string
out (a 74 KB copy each) and scanning the copies for non-ASCII cost 59 us of the 191 us this path
took, and handing the slices to orjson as `Fragment`s copied them once more; a span costs one
`find` for a backslash. Non-ASCII is not looked for: every lifted string must turn out to be an
image part's URL whose base64 decodes strictly (or that equals, byte for byte, one that did,
`SeenImages`), which no non-ASCII string does; otherwise the call goes down the plain path.

Sound because a JSON string is delimited by unescaped quotes, and a base64 data URL has no
backslash: a `"data:image/` whose quote is escaped is inside another string and is left alone, and
a string that holds a backslash is not lifted at all (the body is then parsed as it came). A key is
never trusted as an image by its text: the keys carry a nonce drawn per call, so a client cannot
name one, and a lifted URL that turns out not to be an image part's URL (a text that is a data URL,
an object key) sends the whole call back to the plain path (`calls.admit`), so nothing but image URLs
is ever replaced.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import orjson

from openforgerl.gateway.images import (
    Replacements,
    swap_strings,
)

_OPEN = b'"data:image/'
_BACKSLASH = 0x5C


@dataclass(frozen=True)
class LiftedUrls:
    """What `lift_data_urls` took out: the lean body and, per key, the span of the data URL's JSON
    string in `raw` (quotes included, so the span is its own JSON fragment)."""

    raw: bytes
    lean: bytes
    spans: dict[str, tuple[int, int]]
    key_length: int

    def get(self, text: str) -> tuple[int, int] | None:
        """The span a key stands for (a length check first: most strings are not keys)."""
        return self.spans.get(text) if len(text) == self.key_length else None

    def string(self, key: str) -> bytes:
        """The JSON string (quotes included) a key stands for, as bytes (a copy)."""
        at, end = self.spans[key]
        return self.raw[at:end]

    def splice(self, payload: bytes) -> bytes:
        """`payload` (the lean body's JSON, as an engine serialised it) with each key's JSON string
        replaced by the client's bytes of its data URL: one copy of the images, made here. Keys that
        are not each found once (a body rewritten in between) get the slower exact path instead."""
        found = []
        for key, span in self.spans.items():
            quoted = b'"' + key.encode() + b'"'
            at = payload.find(quoted)
            if at < 0 or payload.find(quoted, at + 1) >= 0:
                return orjson.dumps(for_engine(orjson.loads(payload), self, fragments=True))
            found.append((at, len(quoted), span))
        found.sort()
        view = memoryview(self.raw)
        pieces: list[bytes | memoryview] = []
        done = 0
        for at, length, (start, end) in found:
            pieces += (payload[done:at], view[start:end])
            done = at + length
        pieces.append(payload[done:])
        return b"".join(pieces)

    def with_refs(self, replace: Replacements) -> bytes:
        """The lean body with each key's JSON string replaced by its blob reference's (what the
        record keeps: the client's bytes, base64 out). Every key has one: `calls.admit` takes the
        lifted path only when each lifted string was an image part's URL."""
        lean = self.lean
        for key in self.spans:
            ref = replace.get(key)
            if ref is None:
                raise ValueError(f"lifted key {key} has no reference")
            lean = lean.replace(b'"' + key.encode() + b'"', orjson.dumps(ref), 1)
        return lean


def lift_data_urls(raw: bytes) -> LiftedUrls | None:
    """`raw` with each `"data:image/..."` JSON string replaced by a key; None when there is none
    or one holds a backslash (the caller parses `raw` as it is)."""
    at = raw.find(_OPEN)
    if at < 0:
        return None
    nonce = secrets.token_hex(8)
    spans: dict[str, tuple[int, int]] = {}
    pieces: list[bytes] = []
    done = 0
    while at >= 0:
        if _escaped(raw, at):  # `\"data:image/` inside some other string: not a string of its own
            at = raw.find(_OPEN, at + 1)
            continue
        end = raw.find(b'"', at + 1)
        if end < 0:
            return None  # unterminated: let the parser say so
        if raw.find(b"\\", at, end) >= 0:  # an escape: the parser's to read (no copy made to look)
            return None
        key = f"openforgerl-lifted-{nonce}-{len(spans):06d}"
        spans[key] = (at, end + 1)
        pieces += (raw[done:at], b'"', key.encode(), b'"')
        done = end + 1
        at = raw.find(_OPEN, done)
    if not spans:
        return None
    pieces.append(raw[done:])
    return LiftedUrls(raw, b"".join(pieces), spans, len(next(iter(spans))))


def _escaped(raw: bytes, at: int) -> bool:
    """Whether the quote at `at` is escaped (an odd run of backslashes before it)."""
    run = 0
    while at - run - 1 >= 0 and raw[at - run - 1] == _BACKSLASH:
        run += 1
    return run % 2 == 1


def for_engine(value: Any, lifted: LiftedUrls, fragments: bool) -> Any:
    """`value` with each key swapped back for its data URL: an `orjson.Fragment` of the bytes as they
    came (`fragments`) or the str (an engine that takes Python values)."""

    def back(text: str) -> Any | None:
        span = lifted.get(text)
        if span is None:
            return None
        at, end = span
        return orjson.Fragment(lifted.raw[at:end]) if fragments else lifted.raw[at + 1 : end - 1].decode()

    return swap_strings(value, back)
