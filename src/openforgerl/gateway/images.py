"""The images of one call's prompt: found, checked, hashed, stored once, referenced from the record.

Runs after protocol translation, on the chat body the engine gets, so one walk serves all three
protocols (Chat `image_url` parts, Responses `input_image`, Anthropic `image` blocks, in user and
tool-result positions alike: the translators turn every one into a chat `image_url` part with the
client's data URL or base64 payload untouched, so the engine decodes exactly the bytes sent).
On the Chat pass-through the gate (`may_have_images`) costs the cheaper of a walk of the messages
and one substring scan, so the text hot path pays nothing else.

Per image: the data URL's base64 is decoded, its size checked (`ImagePolicy.max_bytes`, 413), its
header parsed for width and height without decoding pixels (PNG, JPEG, GIF, WebP by hand, other
formats through Pillow's lazy `Image.open`; undecodable 400, over `max_pixels` 413), and its bytes
hashed (sha256). The record lists `ImageRef`s in prompt order; each distinct image goes to the blob
store once; the stored request and engine request hold `BLOB_REF_PREFIX` references where the
inline base64 was (`stored_copy`).

http(s) image URLs are refused unless `ImagePolicy.allow_urls`: the gateway never fetches them
itself (a rollout could make it reach addresses inside the cluster, and it would double the
engine's download); when allowed they are forwarded for the engine to fetch, and recorded by URL
only (no bytes: such a call cannot be replayed with its pixels).
"""

from __future__ import annotations

import binascii
import hashlib
import io
import struct
from dataclasses import dataclass, field
from typing import Any

from openforgerl.gateway.errors import GatewayError
from openforgerl.records import BLOB_REF_PREFIX, ImageRef
from openforgerl.store.base import CallStore

_URL_REFUSED = ("image URLs are not accepted: the gateway does not fetch images (a rollout could make it "
                "reach internal addresses, and the record could not keep the pixels); send the image inline "
                "as a base64 data URL")


@dataclass(frozen=True)
class ImagePolicy:
    """What the gateway accepts as a prompt image."""

    allow_urls: bool = False
    """Forward http(s) image URLs for the engine to fetch (recorded by URL only, no bytes)."""
    max_bytes: int = 20 * 1024 * 1024
    """Largest decoded image accepted (413 above)."""
    max_pixels: int = 40_000_000
    """Largest width x height accepted (413 above): a decompression bomb never reaches the engine."""


@dataclass
class PromptImages:
    """What `find_images` found: the refs in order, the distinct blobs, and what to replace."""

    refs: list[ImageRef] = field(default_factory=list)
    blobs: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # sha256 -> (bytes, media type)
    replace: dict[str, str] = field(default_factory=dict)  # inline text (data URL, bare base64) -> ref
    fresh: dict[str, ImageRef] = field(default_factory=dict)  # decoded here: base64 -> ref, for the cache


class SeenImages:
    """Base64 payloads this gateway already decoded, hashed and stored, with their refs.

    A GUI rollout resends its last N screenshots on every call: looking the payload up (one string
    hash, a few GB/s) replaces decoding and hashing it again (about 0.3 ms per 1280x720 PNG). Only
    images whose blob is durable are entered (`store_blobs`), so a hit never skips a needed write.
    Bounded by payload size, least recently used first out; a miss only costs the decode."""

    def __init__(self, max_chars: int = 64 * 1024 * 1024) -> None:
        self.max_chars = max_chars
        self._refs: dict[str, ImageRef] = {}
        self._chars = 0

    def get(self, payload: str) -> ImageRef | None:
        ref = self._refs.pop(payload, None)
        if ref is not None:
            self._refs[payload] = ref  # most recently used last
        return ref

    def add(self, payload: str, ref: ImageRef) -> None:
        if payload in self._refs or len(payload) > self.max_chars:
            return
        self._refs[payload] = ref
        self._chars += len(payload)
        while self._chars > self.max_chars:
            old = next(iter(self._refs))
            self._chars -= len(old)
            del self._refs[old]


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


def find_images(chat: dict[str, Any], policy: ImagePolicy, seen: SeenImages | None = None) -> PromptImages | None:
    """The images of a chat body, in order, checked (GatewayError 400/413); None when it has none.
    `seen`: payloads already decoded and stored by this gateway (skipped: same bytes, same ref)."""
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
                _take(found, _part_url(part, len(found.refs)), policy, seen)
            elif kind in _REFUSED_PARTS:  # vLLM takes them, and the record could not hold them
                raise GatewayError(400, f"content part {kind!r} is not accepted: send images as image_url "
                                        "parts with base64 data URLs", param="messages")
    return found if found.refs else None


# Chat image parts vLLM reads: `image_url` (OpenAI) and `input_image` (its Responses-style alias,
# `image_url` a string); pixels or embeddings sent as such are refused.
_IMAGE_PARTS = frozenset(("image_url", "input_image"))
_REFUSED_PARTS = frozenset(("image_pil", "image_embeds"))


def _part_url(part: dict[str, Any], k: int) -> str:
    value = part.get("image_url")
    url = value.get("url") if isinstance(value, dict) else value
    if not isinstance(url, str):
        raise GatewayError(400, f"image {k + 1} of the prompt has no URL (image_url.url must be a string)",
                           param="image_url")
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
    payload = _payload(url, k)
    known = seen.get(payload) if seen is not None else None
    if known is None:
        data = _decode(payload, k, policy)
        media_type, width, height = image_header(data)
        if width * height > policy.max_pixels:
            raise GatewayError(413, f"image {k} is {width}x{height}, over {policy.max_pixels} pixels")
        known = ImageRef(sha256=hashlib.sha256(data).hexdigest(), media_type=media_type, width=width, height=height)
        found.blobs.setdefault(known.sha256, (data, media_type))
        found.fresh[payload] = known
    elif len(payload) // 4 * 3 > policy.max_bytes + 2:  # a policy is per gateway, but be exact anyway
        raise GatewayError(413, f"image {k} is over {policy.max_bytes} bytes")
    found.refs.append(known)
    ref = BLOB_REF_PREFIX + known.sha256
    found.replace[url] = ref
    found.replace[payload] = ref  # Anthropic sends the bare base64 in `source.data`


def _payload(url: str, k: int) -> str:
    comma = url.find(",")
    meta = url[5:comma].lower() if comma > 0 else ""
    if comma < 0 or not meta.endswith(";base64") or not meta.startswith("image/"):
        raise GatewayError(400, f"image {k}: a data URL must be data:image/<type>;base64,<data>", param="image_url")
    return url[comma + 1:]


def _decode(payload: str, k: int, policy: ImagePolicy) -> bytes:
    if len(payload) // 4 * 3 > policy.max_bytes + 2:
        raise GatewayError(413, f"image {k} is over {policy.max_bytes} bytes")
    try:  # from bytes: half the cost of decoding the str (measured)
        data = binascii.a2b_base64(payload.encode("ascii"))
    except (binascii.Error, ValueError):  # UnicodeEncodeError is a ValueError
        raise GatewayError(400, f"image {k}: the data URL is not valid base64", param="image_url") from None
    if len(data) > policy.max_bytes:
        raise GatewayError(413, f"image {k} is over {policy.max_bytes} bytes")
    return data


# --------------------------------------------------------------------------- headers


def image_header(data: bytes) -> tuple[str, int, int]:
    """(media type, width, height) from the header alone; GatewayError(400) when not an image."""
    try:
        found = _sniff(data)
    except (struct.error, IndexError, ValueError):
        found = None
    if found is None:
        found = _pillow_header(data)
    if found[1] <= 0 or found[2] <= 0:
        raise GatewayError(400, "image has no pixels (width or height is 0)")
    return found


def _sniff(data: bytes) -> tuple[str, int, int] | None:
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
        w, h = struct.unpack(">II", data[16:24])
        return "image/png", w, h
    if data[:2] == b"\xff\xd8":
        return _jpeg(data)
    if data[:6] in (b"GIF87a", b"GIF89a"):
        w, h = struct.unpack("<HH", data[6:10])
        return "image/gif", w, h
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp(data)
    return None


_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # start-of-frame markers (not DHT, JPG, DAC)


def _jpeg(data: bytes) -> tuple[str, int, int] | None:
    pos = 2
    while pos + 9 < len(data):
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # standalone markers carry no length
            pos += 2
            continue
        (length,) = struct.unpack(">H", data[pos + 2:pos + 4])
        if marker in _SOF:
            h, w = struct.unpack(">HH", data[pos + 5:pos + 9])
            return "image/jpeg", w, h
        if length < 2:
            return None
        pos += 2 + length
    return None


def _webp(data: bytes) -> tuple[str, int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", data[26:30])
        return "image/webp", w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L" and data[20] == 0x2F:
        (bits,) = struct.unpack("<I", data[21:25])
        return "image/webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return "image/webp", w, h
    return None


def _pillow_header(data: bytes) -> tuple[str, int, int]:
    """Other formats Pillow knows (BMP, TIFF, ...): `Image.open` reads the header only."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            mime = Image.MIME.get(image.format or "", "application/octet-stream")
            return mime, int(image.width), int(image.height)
    except Exception:  # Pillow's plugins raise many types on garbage: all of them mean "not an image"
        raise GatewayError(400, "image could not be decoded (not PNG, JPEG, GIF, WebP or another "
                                "format Pillow reads)") from None


# --------------------------------------------------------------------------- records and blobs


def stored_copy(value: Any, replace: dict[str, str]) -> Any:
    """`value` with every string in `replace` swapped for its reference; containers are copied only
    where something changed (the engine keeps the original)."""
    if isinstance(value, str):
        return replace.get(value, value)
    if isinstance(value, dict):
        out = None
        for key, item in value.items():
            new = stored_copy(item, replace)
            if new is not item:
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out
    if isinstance(value, list):
        items = [stored_copy(item, replace) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


async def store_blobs(store: CallStore, found: PromptImages, seen: SeenImages | None = None) -> None:
    """Every distinct new image of the call, durable before the call goes on (and so before its
    record); then remembered in `seen`."""
    for digest, (data, media_type) in found.blobs.items():
        await store.put_blob(digest, data, media_type)
    if seen is not None:
        for payload, ref in found.fresh.items():
            seen.add(payload, ref)


def with_engine_grids(refs: list[ImageRef], reported: Any) -> list[ImageRef]:
    """`refs` with the engine's per-image `grid_thw`/`tokens` (its `openforgerl_images`, in prompt
    order) filled in; unchanged when the engine reported none or a different number of images."""
    if not isinstance(reported, list) or len(reported) != len(refs):
        return refs
    out = []
    for ref, info in zip(refs, reported, strict=True):
        grid = info.get("grid_thw") if isinstance(info, dict) else None
        tokens = info.get("tokens") if isinstance(info, dict) else None
        ok_grid = isinstance(grid, list) and all(isinstance(v, int) for v in grid)
        out.append(ref.model_copy(update={"grid_thw": grid if ok_grid else None,
                                          "tokens": tokens if isinstance(tokens, int) else None}))
    return out
