"""Data URLs lifted out of a Chat body's bytes before it is parsed, and put back for the engine.

Why: a GUI agent's call carries its last screenshots as base64 data URLs, 55-75 KB of JSON string
each, and the gateway never needs them as Python strings. Parsing them (orjson copies every one
into a str: ~26 us per screenshot), checking the body's depth (serialising them again) and
serialising the engine body (once more) was most of a resent screenshot's cost. Here one C-speed
scan finds each `"data:image/` string in the raw bytes; the body is parsed with a short key in its
place; `find_images` reads the image from the bytes (decode and hash from there, `images._take_lifted`);
the record gets the blob reference as before (`stored_copy`); and the engine gets the bytes back as
they came (`for_engine`: an `orjson.Fragment` for an engine that serialises with orjson, a str for any
other).

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

from openforgerl.gateway.images import swap_strings  # images names LiftedUrls for typing only: no cycle

_OPEN = b'"data:image/'
_BACKSLASH = 0x5C


@dataclass(frozen=True)
class LiftedUrls:
    """What `lift_data_urls` took out: the lean body and, per key, the data URL's JSON string
    (quotes included, so it is its own JSON fragment)."""

    lean: bytes
    urls: dict[str, bytes]
    key_length: int

    def get(self, text: str) -> bytes | None:
        """The lifted string a key stands for (a length check first: most strings are not keys)."""
        return self.urls.get(text) if len(text) == self.key_length else None


def lift_data_urls(raw: bytes) -> LiftedUrls | None:
    """`raw` with each `"data:image/..."` JSON string replaced by a key; None when there is none
    or one holds a backslash (the caller parses `raw` as it is)."""
    at = raw.find(_OPEN)
    if at < 0:
        return None
    nonce = secrets.token_hex(8)
    urls: dict[str, bytes] = {}
    pieces: list[bytes] = []
    done = 0
    while at >= 0:
        if _escaped(raw, at):  # `\"data:image/` inside some other string: not a string of its own
            at = raw.find(_OPEN, at + 1)
            continue
        end = raw.find(b'"', at + 1)
        if end < 0:
            return None  # unterminated: let the parser say so
        string = raw[at : end + 1]
        if b"\\" in string or not string.isascii():  # escapes or UTF-8: the parser's to read
            return None
        key = f"openforgerl-lifted-{nonce}-{len(urls):06d}"
        urls[key] = string
        pieces += (raw[done:at], b'"', key.encode(), b'"')
        done = end + 1
        at = raw.find(_OPEN, done)
    if not urls:
        return None
    pieces.append(raw[done:])
    return LiftedUrls(b"".join(pieces), urls, len(next(iter(urls))))


def _escaped(raw: bytes, at: int) -> bool:
    """Whether the quote at `at` is escaped (an odd run of backslashes before it)."""
    run = 0
    while at - run - 1 >= 0 and raw[at - run - 1] == _BACKSLASH:
        run += 1
    return run % 2 == 1


def for_engine(value: Any, lifted: LiftedUrls, fragments: bool) -> Any:
    """`value` with each key swapped back for its data URL: an `orjson.Fragment` of the bytes as they
    came (`fragments`, the engine serialises with orjson) or the str."""
    def back(text: str) -> Any | None:
        string = lifted.get(text)
        if string is None:
            return None
        return orjson.Fragment(string) if fragments else string[1:-1].decode("ascii")

    return swap_strings(value, back)
