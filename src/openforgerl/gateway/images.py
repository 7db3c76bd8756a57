"""The images of one call's prompt: found, checked, hashed, stored once, referenced from the record.

Runs after protocol translation, on the chat body the engine gets, so one walk serves all three
protocols (Chat `image_url` parts, Responses `input_image`, Anthropic `image` blocks, in user and
tool-result positions alike: the translators turn every one into a chat `image_url` part with the
client's data URL or base64 payload untouched, so the engine decodes exactly the bytes sent).
On the Chat pass-through the gate (`may_have_images`) costs the cheaper of a walk of the messages
and one substring scan, so the text hot path pays nothing else.

Per image: the data URL's base64 is decoded, its size checked (`ImagePolicy.max_bytes`, 413), its
header parsed for width and height without decoding pixels (image_header.py: PNG, JPEG, GIF, WebP by
hand, other formats through Pillow's lazy `Image.open`; undecodable 400, over `max_pixels` 413), and its bytes
hashed (sha256). The record lists `ImageRef`s in prompt order; each distinct image goes to the blob
store once; the stored request and engine request hold `BLOB_REF_PREFIX` references where the
inline base64 was (`stored_copy`).

Why the header, not the pixels (measured on a 1280x720 PNG screenshot): Pillow's full decode takes
~8 ms, eight times everything else the gateway does for the call, and the engine decodes the image
anyway; the header takes under 1 us. An image whose header parses but whose pixel data is broken
(a truncated IDAT) reaches the engine, which refuses it (vLLM and the local engine answer 400), and
the gateway passes that on as a 400 in the client's protocol (`forward._classify`), recorded as
`client_bad_request`: the client still gets an honest 4xx, never a 5xx
(test_gateway_images.py::test_an_image_whose_header_parses_but_pixels_do_not_is_the_engines_400).
A cheaper check in between (Pillow's `verify`, a CRC walk, ~22 us) would still miss a deflate
stream that is broken under correct CRCs, so it would not spare the engine's check.

The big strings are never hashed with Python's string hash (siphash: ~17 us for 75 KB of base64,
and a string from a fresh request has no cached hash; the old dict-keyed lookups hashed each
screenshot's data URL and its payload on every call) but found by length and compared (~4 us),
and a resent screenshot costs a short fingerprint and one comparison (`SeenImages`).

http(s) image URLs are refused unless `ImagePolicy.allow_urls`: the gateway never fetches them
itself (a rollout could make it reach addresses inside the cluster, and it would double the
engine's download); when allowed they are forwarded for the engine to fetch, and recorded by URL
only (no bytes: such a call cannot be replayed with its pixels).
"""

from __future__ import annotations

import binascii
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pybase64

from openforgerl.gateway.errors import GatewayError
from openforgerl.gateway.image_header import image_header
from openforgerl.records import BLOB_REF_PREFIX, ImageRef
from openforgerl.store.base import CallStore

__all__ = [
    "ImagePolicy",
    "PromptImages",
    "Replacements",
    "SeenImages",
    "find_images",
    "fingerprint",
    "image_header",
    "may_have_images",
    "store_blobs",
    "stored_copy",
    "swap_strings",
    "with_engine_grids",
]

_URL_REFUSED = (
    "image URLs are not accepted: the gateway does not fetch images (a rollout could make it "
    "reach internal addresses, and the record could not keep the pixels); send the image inline "
    "as a base64 data URL"
)


@dataclass(frozen=True)
class ImagePolicy:
    """What the gateway accepts as a prompt image."""

    allow_urls: bool = False
    """Forward http(s) image URLs for the engine to fetch (recorded by URL only, no bytes)."""
    max_bytes: int = 20 * 1024 * 1024
    """Largest decoded image accepted (413 above)."""
    max_pixels: int = 40_000_000
    """Largest width x height accepted (413 above): a decompression bomb never reaches the engine."""


class Replacements:
    """Inline image texts and the references that replace them: each data URL, and its base64 part
    alone (Anthropic sends that bare, in `source.data`).

    Looked up by length, then compared: `stored_copy` asks about every string of the body, and a
    dict keyed by the texts would hash each big one (Python's str hash runs at ~2 GB/s, and a
    string from a fresh request has no cached hash): ~40 us per screenshot and call, measured, where
    a length miss costs a few ns and a hit one memcmp. The base64 part is matched as the URL's tail
    (`endswith`), so it is never sliced out for this."""

    def __init__(self) -> None:
        self._by_len: dict[int, list[tuple[str, int, str]]] = {}  # length -> (data URL, start, ref)

    def add(self, url: str, start: int, ref: str) -> None:
        """`url` and `url[start:]` (its base64) are replaced by `ref`."""
        for begin in (0, start) if 0 < start < len(url) else (0,):
            found = self._by_len.setdefault(len(url) - begin, [])
            if not any(b == begin and (u is url or u == url) for u, b, _ in found):  # a resent image
                found.append((url, begin, ref))

    def add_key(self, key: str, ref: str) -> None:
        """`add` for a text known to be unique (a lifted key, lifted.py): no duplicate check."""
        self._by_len.setdefault(len(key), []).append((key, 0, ref))

    def get(self, text: str) -> str | None:
        for url, begin, ref in self._by_len.get(len(text), ()):
            if _same(text, url, begin):
                return ref
        return None

    def __bool__(self) -> bool:
        return bool(self._by_len)


def _same(text: str, url: str, begin: int) -> bool:
    """`text == url[begin:]` without slicing (the caller has checked the lengths)."""
    return text is url or (text == url if begin == 0 else url.endswith(text))


@dataclass
class PromptImages:
    """What `find_images` found: the refs in order, the distinct blobs, and what to replace."""

    refs: list[ImageRef] = field(default_factory=list)
    blobs: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # sha256 -> (bytes, media type)
    replace: Replacements = field(default_factory=Replacements)  # inline text -> blob reference
    fresh: list[tuple[str | bytes, ImageRef]] = field(
        default_factory=list
    )  # decoded here: data URL, ref (for the cache)
    lifted: int = (
        0  # image URLs read from lifted bytes (lifted.py); short of all of them: read the body as sent
    )


_PROBE = 64  # characters per fingerprint sample


def fingerprint(url: str | bytes) -> tuple[int, str | bytes, str | bytes, str | bytes]:
    """A cheap key for a data URL: its length and three short samples (head, middle, tail).

    Only ever a candidate key: `SeenImages` compares the whole string before trusting a hit. A lifted
    URL (lifted.py) is its JSON string's bytes, quotes included, with entries of its own. The head
    sample spans the data URL's prefix and the image's first chunks (PNG ancillary chunks, JPEG
    APPn), the middle and tail its compressed pixels."""
    return _fingerprint(url, 0, len(url))


def _fingerprint(buf: str | bytes, at: int, end: int) -> tuple[int, str | bytes, str | bytes, str | bytes]:
    """`fingerprint(buf[at:end])`, read in place."""
    n = end - at
    mid = at + n // 2
    return (
        n,
        buf[at : min(at + 4 * _PROBE, end)],
        buf[mid : min(mid + _PROBE, end)],
        buf[max(at, end - _PROBE) : end],
    )


class SeenImages:
    """Data URLs this gateway already decoded, hashed and stored, with their refs.

    A GUI rollout resends its last N screenshots on every call: finding the URL here (a fingerprint,
    then one full comparison, ~5 us for a 1280x720 PNG, measured) replaces decoding and hashing it
    again (~0.1 ms) and hashing the 75 KB string as a dict key (~40 us). Only images whose blob is
    durable are entered (`store_blobs`), so a hit never skips a needed write. Bounded by characters,
    least recently used first out; a miss only costs the decode."""

    _PER_KEY = 4  # URLs kept per fingerprint (distinct URLs that share one are rare: never unbounded)

    def __init__(self, max_chars: int = 64 * 1024 * 1024) -> None:
        self.max_chars = max_chars
        self._refs: dict[
            tuple[int, str | bytes, str | bytes, str | bytes], list[tuple[str | bytes, ImageRef]]
        ] = {}
        self._chars = 0

    def get(self, url: str | bytes) -> ImageRef | None:
        key = fingerprint(url)
        entries = self._refs.get(key)
        for known, ref in entries or ():
            if known is url or known == url:
                self._refs[key] = self._refs.pop(key)  # most recently used last
                return ref
        return None

    def get_span(self, raw: bytes, at: int, end: int) -> ImageRef | None:
        """`get` for `raw[at:end]`, read in place: a lifted URL (lifted.py) is never copied to be found."""
        key = _fingerprint(raw, at, end)
        entries = self._refs.get(key)
        for known, ref in entries or ():
            if isinstance(known, bytes) and raw.startswith(
                known, at
            ):  # one memcmp (the key holds the length)
                self._refs[key] = self._refs.pop(key)  # most recently used last
                return ref
        return None

    def add(self, url: str | bytes, ref: ImageRef) -> None:
        if len(url) > self.max_chars:
            return
        key = fingerprint(url)
        entries = self._refs.pop(key, [])
        self._refs[key] = entries  # most recently used last
        if len(entries) >= self._PER_KEY or any(known == url for known, _ in entries):
            return
        entries.append((url, ref))
        self._chars += len(url)
        while self._chars > self.max_chars:
            old = next(iter(self._refs))
            self._chars -= sum(len(known) for known, _ in self._refs.pop(old))


_WALK_BYTES_PER_MESSAGE = 256  # above this average, walking the messages beats scanning the bytes


def may_have_images(chat: dict[str, Any], raw: bytes, translated: bool) -> bool:
    """The gate: False only when the call has no image part; True sends the body to `find_images`.

    Responses and Anthropic: always True; their translator has just walked every block in Python,
    so walking its chat output is cheap next to it (under 2 %, measured), and exact. Chat
    Completions (passed through, never walked otherwise): whichever is cheaper of walking the
    messages (about 0.1 us per message) and one C-speed scan of the raw body for `"image`, which
    every image part's key or type starts with (`image_url`, `input_image`'s `image_url` key,
    `image_embeds`, `image_pil`), about 0.4 ns per byte. Text passes the scan only where a string
    starts with "image" (or an escaped quote precedes it), which costs a walk, nothing more; a key
    spelled with `\\u` escapes would slip past the scan."""
    if translated:
        return True
    messages = chat.get("messages")
    count = len(messages) if isinstance(messages, list) else 0
    return count * _WALK_BYTES_PER_MESSAGE < len(raw) or b'"image' in raw


class LiftedSpans(Protocol):
    """What `find_images` reads of `lifted.LiftedUrls` (which imports this module): the client's bytes and
    the span of the data URL a key stands for."""

    @property
    def raw(self) -> bytes: ...

    def get(self, text: str) -> tuple[int, int] | None: ...


def find_images(
    chat: dict[str, Any],
    policy: ImagePolicy,
    seen: SeenImages | None = None,
    lifted: LiftedSpans | None = None,
) -> PromptImages | None:
    """The images of a chat body, in order, checked (GatewayError 400/413); None when it has none.
    `seen`: data URLs already decoded and stored by this gateway (skipped: same bytes, same ref).
    `lifted`: the data URLs taken out of the body's bytes (lifted.py); an image URL that is one of
    its keys is read from there (`PromptImages.lifted` counts them)."""
    found = PromptImages()
    messages = chat.get("messages")
    for m in messages if isinstance(messages, list) else ():
        content = m.get("content") if isinstance(m, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if not isinstance(kind, str):  # a malformed part is the engine's to refuse
                continue
            if kind in _IMAGE_PARTS:
                url = _part_url(part, len(found.refs))
                span = lifted.get(url) if lifted is not None else None
                if span is None:
                    _take(found, url, policy, seen)
                elif not _take_lifted(found, url, lifted.raw, span, policy, seen):  # type: ignore[union-attr]
                    return found  # only the plain path may judge it: `lifted` stays short
            elif kind in _REFUSED_PARTS:  # vLLM takes them, and the record could not hold them
                raise GatewayError(
                    400,
                    f"content part {kind!r} is not accepted: send images as image_url "
                    "parts with base64 data URLs",
                    param="messages",
                )
    return found if found.refs else None


# Chat image parts vLLM reads: `image_url` (OpenAI) and `input_image` (its Responses-style alias,
# `image_url` a string); pixels or embeddings sent as such are refused.
_IMAGE_PARTS = frozenset(("image_url", "input_image"))
_REFUSED_PARTS = frozenset(("image_pil", "image_embeds"))


def _part_url(part: dict[str, Any], k: int) -> str:
    value = part.get("image_url")
    url = value.get("url") if isinstance(value, dict) else value
    if not isinstance(url, str):
        raise GatewayError(
            400, f"image {k + 1} of the prompt has no URL (image_url.url must be a string)", param="image_url"
        )
    return url


def _take(found: PromptImages, url: str, policy: ImagePolicy, seen: SeenImages | None) -> None:
    k = len(found.refs) + 1
    head = url[:16].lower()
    if head.startswith(("http://", "https://")):
        if not policy.allow_urls:
            raise GatewayError(400, f"image {k}: {_URL_REFUSED}", param="image_url")
        found.refs.append(ImageRef(sha256="", media_type="", width=0, height=0, url=url))
        return
    if not head.startswith("data:"):
        raise GatewayError(400, f"image {k}: only base64 data URLs are accepted", param="image_url")
    comma = _payload_start(url, k)
    known = seen.get(url) if seen is not None else None
    if known is None:
        known = _new_image(found, url[comma:], k, policy)
        found.fresh.append((url, known))
    elif _over_limit(len(url) - comma, policy):  # a policy is per gateway, but be exact anyway
        raise GatewayError(413, f"image {k} is over {policy.max_bytes} bytes")
    found.refs.append(known)
    found.replace.add(url, comma, BLOB_REF_PREFIX + known.sha256)


def _take_lifted(
    found: PromptImages,
    key: str,
    raw: bytes,
    span: tuple[int, int],
    policy: ImagePolicy,
    seen: SeenImages | None,
) -> bool:
    """`_take` for a lifted data URL (its JSON string, quotes included, is `raw[span]`: read in place,
    copied only when new, for `seen`); False when only the plain path may judge it: a raw control
    character or an escape in its header (the plain parse says what it is), or base64 that only the
    lenient decoder takes (the plain path answers as it always did)."""
    k = len(found.refs) + 1
    at, end = span
    comma = raw.find(b",", at, end)
    known = seen.get_span(raw, at, end) if seen is not None else None  # byte-equal to one checked before
    if known is None:
        meta = raw[at + 6 : comma].lower() if comma > 0 else b""  # after `"data:`
        if comma < 0 or not meta.endswith(b";base64") or not meta.startswith(b"image/"):
            return _refuse(
                raw[at:end],
                GatewayError(
                    400, f"image {k}: a data URL must be data:image/<type>;base64,<data>", param="image_url"
                ),
            )
        if _CONTROL.search(meta) or not meta.isascii():
            return False
        if _over_limit(end - comma - 2, policy):
            return _refuse(raw[at:end], GatewayError(413, f"image {k} is over {policy.max_bytes} bytes"))
        try:  # strict: base64's alphabet only, so a lifted string that decodes held nothing to escape
            data = pybase64.b64decode(memoryview(raw)[comma + 1 : end - 1], validate=True)
        except (binascii.Error, ValueError):
            return False
        known = _checked_image(found, data, k, policy)
        found.fresh.append((raw[at:end], known))
    elif _over_limit(end - comma - 2, policy):
        raise GatewayError(413, f"image {k} is over {policy.max_bytes} bytes")  # seen: its bytes were checked
    found.refs.append(known)
    found.replace.add_key(key, BLOB_REF_PREFIX + known.sha256)
    found.lifted += 1
    return True


_CONTROL = re.compile(rb"[\x00-\x1f]")


def _refuse(string: bytes, err: GatewayError) -> bool:
    """Raise `err`, unless `string` holds a raw control character: then the body is not JSON, and the
    plain path's parse error is the client's answer (False)."""
    if _CONTROL.search(string):
        return False
    raise err


def _new_image(found: PromptImages, payload: str, k: int, policy: ImagePolicy) -> ImageRef:
    """Decode, check and hash one image not seen before; its bytes join `found.blobs`."""
    return _checked_image(found, _decode(payload, k, policy), k, policy)


def _checked_image(found: PromptImages, data: bytes, k: int, policy: ImagePolicy) -> ImageRef:
    if len(data) > policy.max_bytes:
        raise GatewayError(413, f"image {k} is over {policy.max_bytes} bytes")
    media_type, width, height = image_header(data)
    if width * height > policy.max_pixels:
        raise GatewayError(413, f"image {k} is {width}x{height}, over {policy.max_pixels} pixels")
    ref = ImageRef(sha256=hashlib.sha256(data).hexdigest(), media_type=media_type, width=width, height=height)
    found.blobs.setdefault(ref.sha256, (data, media_type))
    return ref


def _over_limit(base64_chars: int, policy: ImagePolicy) -> bool:
    """Whether base64 of this length decodes to more than `policy.max_bytes` (checked before decoding)."""
    return base64_chars // 4 * 3 > policy.max_bytes + 2


def _payload_start(url: str, k: int) -> int:
    """Where a data URL's base64 starts (after its comma); GatewayError(400) when it is no image's."""
    comma = url.find(",")
    meta = url[5:comma].lower() if comma > 0 else ""
    if comma < 0 or not meta.endswith(";base64") or not meta.startswith("image/"):
        raise GatewayError(
            400, f"image {k}: a data URL must be data:image/<type>;base64,<data>", param="image_url"
        )
    return comma + 1


def _decode(payload: str, k: int, policy: ImagePolicy) -> bytes:
    if _over_limit(len(payload), policy):
        raise GatewayError(413, f"image {k} is over {policy.max_bytes} bytes")
    try:
        data = _b64decode(payload)
    except (binascii.Error, ValueError):  # UnicodeEncodeError is a ValueError
        raise GatewayError(400, f"image {k}: the data URL is not valid base64", param="image_url") from None
    return data


def _b64decode(payload: str) -> bytes:
    """Strict base64 first: pybase64 (SIMD; vLLM decodes data URLs with it, `validate=True`) decodes a
    75 KB screenshot in ~25 us where binascii takes ~130 us (measured). What only the lenient decoder
    takes (line breaks, stray characters, MIME style) still goes through it, as it always did."""
    try:
        return pybase64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return binascii.a2b_base64(payload.encode("ascii"))


# --------------------------------------------------------------------------- records and blobs


def stored_copy(value: Any, replace: Replacements) -> Any:
    """`value` with every string in `replace` swapped for its reference (the engine keeps the original)."""
    return swap_strings(value, replace.get)


def swap_strings(value: Any, swap: Callable[[str], Any | None]) -> Any:
    """`value` with each string for which `swap` gives something replaced by that; containers are
    copied only where something changed."""
    if isinstance(value, str):
        new = swap(value)
        return value if new is None else new
    if isinstance(value, dict):
        out = None
        for key, item in value.items():
            new = swap_strings(item, swap)
            if new is not item:
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out
    if isinstance(value, list):
        items = [swap_strings(item, swap) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


async def store_blobs(store: CallStore, found: PromptImages, seen: SeenImages | None = None) -> None:
    """Every distinct new image of the call, durable before the call goes on (and so before its
    record); then remembered in `seen`."""
    for digest, (data, media_type) in found.blobs.items():
        await store.put_blob(digest, data, media_type)
    if seen is not None:
        for url, ref in found.fresh:
            seen.add(url, ref)


def with_engine_grids(refs: list[ImageRef], reported: Any) -> list[ImageRef] | list[dict[str, Any]]:
    """`refs` with the engine's per-image `grid_thw`/`tokens` (its `openforgerl_images`, in prompt
    order) filled in, as the records' JSON objects; `refs` unchanged when the engine reported none
    or a different number of images. Plain dicts, not `ImageRef`s: building a model costs 7 us per
    image even unvalidated (`model_construct`, measured), on every call of a GUI rollout, and the
    record is JSON (`recording.build_record` validates them into models)."""
    if not isinstance(reported, list) or len(reported) != len(refs):
        return refs
    out = []
    for ref, info in zip(refs, reported, strict=True):
        grid = info.get("grid_thw") if isinstance(info, dict) else None
        tokens = info.get("tokens") if isinstance(info, dict) else None
        ok_grid = isinstance(grid, list) and all(type(v) is int for v in grid)
        out.append(
            {
                **ref.__dict__,
                "grid_thw": grid if ok_grid else None,
                "tokens": tokens if type(tokens) is int else None,
            }
        )
    return out
