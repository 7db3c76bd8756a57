"""GUI rollouts: the screenshots a call's request carried, and where the model clicked on each (pure).

A call is a GUI call when its request holds images. Its frame is the last image of its request
(what the model saw when it answered); its actions are the `computer`-style tool calls it made
(read from the next request, like every tool call): Anthropic `computer` `{action, coordinate: [x, y]}`,
OpenAI `computer_call` `{type: click, x, y}`, or any tool whose arguments carry `x`/`y` or
`coordinate`. Coordinates are screen pixels of that screenshot.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openforgerl.analytics.events import ToolEvent
from openforgerl.analytics.wire import request_items
from openforgerl.records import CallRecord

__all__ = ["Click", "Frame", "gui_frames", "image_size"]


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


def image_size(data_url: str) -> tuple[int, int]:
    """Width and height of a PNG or JPEG data URL ((0, 0) when unknown)."""
    try:
        raw = base64.b64decode(data_url.split(",", 1)[1][:65536] + "==")
    except (IndexError, ValueError):
        return 0, 0
    if raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) >= 24:
        return struct.unpack(">II", raw[16:24])
    i = 2
    while raw[:2] == b"\xff\xd8" and i + 9 < len(raw):
        marker, length = raw[i + 1], struct.unpack(">H", raw[i + 2:i + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            h, w = struct.unpack(">HH", raw[i + 5:i + 9])
            return w, h
        i += 2 + length
    return 0, 0


def _point(args: Mapping[str, Any]) -> tuple[float, float] | None:
    coord = args.get("coordinate") or args.get("coordinates") or args.get("position")
    if isinstance(coord, list | tuple) and len(coord) >= 2 and all(isinstance(v, int | float) for v in coord[:2]):
        return float(coord[0]), float(coord[1])
    x, y = args.get("x"), args.get("y")
    if isinstance(x, int | float) and isinstance(y, int | float):
        return float(x), float(y)
    return None


def gui_frames(calls: Sequence[CallRecord], events: Sequence[ToolEvent]) -> list[Frame]:
    frames = []
    by_call: dict[int, list[ToolEvent]] = {}
    for e in events:
        if e.call_index is not None:
            by_call.setdefault(e.call_index, []).append(e)
    for call in sorted(calls, key=lambda c: c.index):
        images = [i.image for i in request_items(call.protocol, call.request) if i.image]
        if not images:
            continue
        clicks: list[Click] = []
        for e in by_call.get(call.index, []):
            point = _point(e.args)
            if point is not None:
                action = str(e.args.get("action") or e.args.get("type") or e.tool)
                clicks.append(Click(point[0], point[1], action, f"{len(clicks) + 1}: {action} ({point[0]:g}, {point[1]:g})"))
        w, h = image_size(images[-1])
        frames.append(Frame(call.index, images[-1], w, h, tuple(clicks)))
    return frames
