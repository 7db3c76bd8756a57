"""GUI rollouts: the screenshots a call's request carried, and where the model clicked on each (pure).

A call is a GUI call when its request holds images. Its frame is the last image of its request
(what the model saw when it answered); its actions are the `computer`-style tool calls it made
(read from the next request, like every tool call): Anthropic `computer` `{action, coordinate: [x, y]}`,
OpenAI `computer_call` `{type: click, x, y}`, zero-gui's (Qwen3-VL's) `computer_use`
`{action, coordinate: [x, y]}` in 0-1000 units of the screen, or any tool whose arguments carry
`x`/`y` or `coordinate` in screen pixels.

Images: the gateway records a screenshot's bytes once in the call log's blob store and leaves
`openforgerl-blob:sha256:<hex>` in the stored request where the data URL was. `resolve_image` turns
such a reference back into a `data:` URL of the stored bytes (a page may load nothing from elsewhere,
and the bundle must work from disk), and its width and height come from the bytes' header.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openforgerl.analytics.events import ToolEvent
from openforgerl.analytics.wire import request_items
from openforgerl.records import BLOB_REF_PREFIX, CallRecord

__all__ = ["BlobReader", "Click", "Frame", "gui_frames", "image_size", "media_type", "resolve_image"]

BlobReader = Callable[[str], bytes | None]
ZERO_GUI_TOOL = "computer_use"
ZERO_GUI_SCALE = 1000  # zero-gui's coordinates: 0-1000 of each screen axis (harness/zero_gui/tool.py)


@dataclass(frozen=True, slots=True)
class Click:
    x: float
    y: float
    action: str
    label: str


@dataclass(frozen=True, slots=True)
class Frame:
    call_index: int
    image: str
    width: int
    height: int
    clicks: tuple[Click, ...]
    sha256: str = ""
    """The blob the screenshot was read from ("" for an image recorded inline)."""
    missing: bool = False
    """A blob reference whose bytes the call log does not hold (shown as a note, not an empty box)."""
    actions: tuple[str, ...] = ()
    """The call's other actions, with no point on the screen (`type 'text'`, `key`, `terminate`)."""


def media_type(raw: bytes) -> str:
    if raw[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    if raw[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    if raw[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    return "application/octet-stream"


def resolve_image(url: str, read_blob: BlobReader | None) -> tuple[str, str, bool]:
    """(a displayable URL, the blob's sha256 or "", missing): a blob reference becomes a `data:` URL of
    the stored bytes; a stored blob that is not a raster image is never labelled as one."""
    if not url.startswith(BLOB_REF_PREFIX):
        return url, "", False
    sha = url[len(BLOB_REF_PREFIX) :]
    raw = read_blob(sha) if read_blob is not None else None
    kind = media_type(raw) if raw is not None else ""
    if raw is None or not kind.startswith("image/"):
        return "", sha, True
    return f"data:{kind};base64,{base64.b64encode(raw).decode()}", sha, False


def image_size(data_url: str) -> tuple[int, int]:
    """Width and height of a PNG or JPEG data URL ((0, 0) when unknown)."""
    try:
        raw = base64.b64decode(data_url.split(",", 1)[1][:65536] + "==")
    except (IndexError, ValueError):
        return 0, 0
    if raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) >= 24:
        w, h = struct.unpack(">II", raw[16:24])
        return int(w), int(h)
    i = 2
    while raw[:2] == b"\xff\xd8" and i + 9 < len(raw):
        marker, length = raw[i + 1], struct.unpack(">H", raw[i + 2 : i + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            h, w = struct.unpack(">HH", raw[i + 5 : i + 9])
            return int(w), int(h)
        i += 2 + length
    return 0, 0


def _pair(value: Any) -> tuple[float, float] | None:
    if (
        isinstance(value, list | tuple)
        and len(value) >= 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value[:2])
    ):
        return float(value[0]), float(value[1])
    return None


def _point(tool: str, args: Mapping[str, Any], width: int, height: int) -> tuple[float, float] | None:
    point = _pair(args.get("coordinate") or args.get("coordinates") or args.get("position"))
    if point is None:
        x, y = args.get("x"), args.get("y")
        point = _pair([x, y])
    if point is None or tool != ZERO_GUI_TOOL or not width or not height:
        return point
    # zero-gui converts 0-1000 to pixels as `min(int(v * size / 1000 + 0.5), size - 1)`: the same here,
    # so the marker sits on the pixel the computer service clicked
    return (
        min(int(point[0] * width / ZERO_GUI_SCALE + 0.5), width - 1),
        min(int(point[1] * height / ZERO_GUI_SCALE + 0.5), height - 1),
    )


def gui_frames(
    calls: Sequence[CallRecord], events: Sequence[ToolEvent], read_blob: BlobReader | None = None
) -> list[Frame]:
    frames = []
    by_call: dict[int, list[ToolEvent]] = {}
    for e in events:
        if e.call_index is not None:
            by_call.setdefault(e.call_index, []).append(e)
    for call in sorted(calls, key=lambda c: c.index):
        images = [i.image for i in request_items(call.protocol, call.request) if i.image]
        if not images:
            continue
        url, sha, missing = resolve_image(images[-1], read_blob)
        w, h = image_size(url) if url.startswith("data:") else (0, 0)
        if not w and sha and not missing:  # GIF, WebP: the size the gateway read from the header
            ref = next((r for r in call.images if r.sha256 == sha), None)
            w, h = (ref.width, ref.height) if ref is not None else (0, 0)
        clicks: list[Click] = []
        others: list[str] = []
        for e in by_call.get(call.index, []):
            point = _point(e.tool, e.args, w, h)
            action = str(e.args.get("action") or e.args.get("type") or e.tool)
            if point is not None:
                clicks.append(
                    Click(
                        point[0],
                        point[1],
                        action,
                        f"{len(clicks) + 1}: {action} ({point[0]:g}, {point[1]:g})",
                    )
                )
            else:
                detail = e.args.get("text") or e.args.get("keys") or e.args.get("status") or ""
                others.append(f"{action} {detail!r}" if detail else action)
        frames.append(Frame(call.index, url, w, h, tuple(clicks), sha, missing, tuple(others)))
    return frames
