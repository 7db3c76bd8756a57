"""An image's media type, width and height from its header alone, without decoding a pixel.

PNG, JPEG, GIF and WebP are read by hand (under 1 us for a screenshot); other formats go through
Pillow's lazy `Image.open`, which also reads the header only. Why the header and not the pixels:
see images.py.
"""

from __future__ import annotations

import io
import struct

from openforgerl.gateway.errors import GatewayError

__all__ = ["image_header"]


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
        (length,) = struct.unpack(">H", data[pos + 2 : pos + 4])
        if marker in _SOF:
            h, w = struct.unpack(">HH", data[pos + 5 : pos + 9])
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
        raise GatewayError(
            400, "image could not be decoded (not PNG, JPEG, GIF, WebP or another format Pillow reads)"
        ) from None
