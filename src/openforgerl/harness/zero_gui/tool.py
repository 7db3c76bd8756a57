"""The `computer_use` tool (Qwen3-VL's schema) and its translation to the computer service's actions.

Coordinates are `[x, y]` in **0-1000 normalised units** of the screen (Qwen3-VL's convention: (0, 0)
is the top-left corner, (1000, 1000) the bottom-right one), whatever the screen's size; the real size
is stated in the description, as Qwen and Anthropic do. `to_pixels` is the only place they become
pixels. Out-of-range or ill-typed arguments are the model's error (`MalformedAction`), never clamped
into something the model did not ask for.

Differences from Qwen's cookbook schema, on purpose: no `mouse_move`/`middle_click`/`triple_click`/
`hscroll` (the computer service has no such action); `left_click_drag` takes an optional
`start_coordinate` (default: where the last pointer action left the mouse), since the service's drag
needs both ends; `scroll` takes an optional `coordinate` (default: the last pointer position, else the
screen's centre) and `pixels` counts wheel notches (positive scrolls up, as in Qwen's schema).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ACTIONS",
    "COMPACT_SYSTEM_PROMPT",
    "NAME",
    "Act",
    "MalformedAction",
    "Terminal",
    "compact_schema",
    "computer_use_schema",
    "parse_call",
    "to_pixels",
]

NAME = "computer_use"
ACTIONS = (
    "left_click",
    "double_click",
    "right_click",
    "left_click_drag",
    "type",
    "key",
    "scroll",
    "wait",
    "terminate",
    "answer",
)
SCALE = 1000

Point = tuple[int, int]


class MalformedAction(ValueError):
    """The model's tool call cannot be executed as asked (the agent's error, never infra)."""


@dataclass(frozen=True)
class Act:
    """One computer-service action (`POST /act` body) and where the pointer is afterwards."""

    body: dict[str, Any]
    pointer: Point | None


@dataclass(frozen=True)
class Terminal:
    """`terminate` or `answer`: the model ends the episode."""

    status: str
    text: str = ""


_DESCRIPTION = """Use a mouse and keyboard to interact with a computer, and take screenshots.
* This is an interface to a {kind} GUI. After each action you get the new screenshot.
* The screen's resolution is {width}x{height}.
* Coordinates are [x, y] in 0-1000 normalised units: [0, 0] is the top-left corner and [1000, 1000] the \
bottom-right corner of the screen, whatever its resolution.
* Make sure to click any buttons, links, icons, etc with the cursor tip in the center of the element."""

_ACTION_HELP = """The action to perform. The available actions are:
* `left_click`, `right_click`, `double_click`: click at `coordinate`.
* `left_click_drag`: press the left button at `start_coordinate` (default: the current mouse position) \
and release it at `coordinate`.
* `type`: type `text` into the focused element.
* `key`: press the key combination `keys`, e.g. ["ctrl", "s"] or ["enter"].
* `scroll`: turn the mouse wheel by `pixels` notches at `coordinate` (positive scrolls up, negative down).
* `wait`: wait `time` seconds for the screen to change.
* `terminate`: end the task and report its `status`.
* `answer`: end the task with the answer `text`."""


def computer_use_schema(width: int, height: int, kind: str = "desktop") -> dict[str, Any]:
    """The one function tool the model sees, with the screen's resolution in its description."""
    point = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
    props: dict[str, Any] = {
        "action": {"type": "string", "enum": list(ACTIONS), "description": _ACTION_HELP},
        "coordinate": {
            **point,
            "description": "[x, y] in 0-1000 units. Required by the click actions, "
            "`left_click_drag` (end point); optional for `scroll`.",
        },
        "start_coordinate": {**point, "description": "[x, y] start of `left_click_drag` (optional)."},
        "text": {"type": "string", "description": "Required by `type` and `answer`."},
        "keys": {"type": "array", "items": {"type": "string"}, "description": "Required by `key`."},
        "pixels": {
            "type": "number",
            "description": "Wheel notches for `scroll`: positive up, negative down.",
        },
        "time": {"type": "number", "description": "Seconds for `wait`."},
        "status": {
            "type": "string",
            "enum": ["success", "failure"],
            "description": "Required by `terminate`.",
        },
    }
    params = {"type": "object", "properties": props, "required": ["action"]}
    desc = _DESCRIPTION.format(kind=kind, width=width, height=height)
    return {"type": "function", "function": {"name": NAME, "description": desc, "parameters": params}}


COMPACT_SYSTEM_PROMPT = "You are a GUI agent. Look at the screenshot and act with the computer_use tool."


def compact_schema() -> dict[str, Any]:
    """The short `computer_use` tool `tiny-vl` is warmed up on (`scripts/build_tiny_vl.py` imports it and
    `COMPACT_SYSTEM_PROMPT`, so the warm-up's prompt is this harness's by construction): ~70 prompt tokens
    instead of ~900, so a tiny model sees the prompt it was warmed up on. Same tool name and
    arguments: `parse_call` reads both."""
    return {
        "type": "function",
        "function": {
            "name": NAME,
            "description": "Use the mouse. Coordinates are x, y in 0-1000 of the screen width and height.",
            "parameters": {
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["left_click"]},
                    "coordinate": {"type": "array", "description": "[x, y] in 0-1000."},
                },
                "required": ["action", "coordinate"],
            },
        },
    }


def to_pixels(coord: Any, width: int, height: int) -> Point:
    """`[x, y]` in 0-1000 units -> integer pixels: `floor(v * size / 1000 + 0.5)` (round half up, so
    500 on 1280 px is 640 and the map is monotone), then `min(., size - 1)`: 1000 is the far edge itself,
    one past the last pixel. Anything outside 0..1000, or not two numbers, is `MalformedAction`."""
    if not isinstance(coord, (list, tuple)) or len(coord) != 2:
        raise MalformedAction(f"coordinate must be [x, y] (got {coord!r})")
    out = []
    for v, size in zip(coord, (width, height), strict=True):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= SCALE:
            raise MalformedAction(f"coordinate values must be numbers in 0..{SCALE} (got {coord!r})")
        out.append(min(int(v * size / SCALE + 0.5), size - 1))
    return out[0], out[1]


def _arguments(arguments: str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(arguments, Mapping):
        return arguments
    try:
        args = json.loads(arguments or "{}")
    except ValueError as exc:
        raise MalformedAction(f"arguments are not JSON: {exc}") from None
    if not isinstance(args, dict):
        raise MalformedAction("arguments must be a JSON object")
    return args


def _text(args: Mapping[str, Any], action: str) -> str:
    text = args.get("text")
    if not isinstance(text, str):
        raise MalformedAction(f"`{action}` needs `text` (a string)")
    return text


def _keys(args: Mapping[str, Any]) -> str:
    keys = args.get("keys", args.get("text"))
    if isinstance(keys, str) and keys.strip():
        return keys.strip()
    if isinstance(keys, list) and keys and all(isinstance(k, str) and k for k in keys):
        return "+".join(keys)
    raise MalformedAction('`key` needs `keys`, e.g. ["ctrl", "s"]')


def _number(args: Mapping[str, Any], name: str, default: float) -> float:
    v = args.get(name, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise MalformedAction(f"`{name}` must be a number (got {v!r})")
    return float(v)


_CLICKS = {"left_click": "click", "double_click": "double_click", "right_click": "right_click"}


def parse_call(
    name: str, arguments: str | Mapping[str, Any], width: int, height: int, pointer: Point | None = None
) -> Act | Terminal:
    """One tool call -> the service action it means (or the episode's end). Raises MalformedAction."""
    if name != NAME:
        raise MalformedAction(f"unknown tool {name!r}; the only tool is {NAME!r}")
    args = _arguments(arguments)
    action = args.get("action")
    if action in _CLICKS:
        x, y = to_pixels(args.get("coordinate"), width, height)
        return Act({"action": _CLICKS[action], "x": x, "y": y}, (x, y))
    if action == "left_click_drag":
        to = to_pixels(args.get("coordinate"), width, height)
        start = to_pixels(args["start_coordinate"], width, height) if "start_coordinate" in args else pointer
        if start is None:
            raise MalformedAction("`left_click_drag` needs `start_coordinate` (the mouse has not moved yet)")
        return Act({"action": "drag", "x": start[0], "y": start[1], "to_x": to[0], "to_y": to[1]}, to)
    if action == "scroll":
        at = to_pixels(args["coordinate"], width, height) if "coordinate" in args else pointer
        at = at or (width // 2, height // 2)
        notches = _number(args, "pixels", 0)
        if notches != int(notches):
            raise MalformedAction("`pixels` counts wheel notches: an integer")
        return Act({"action": "scroll", "x": at[0], "y": at[1], "dy": -int(notches)}, at)
    if action == "type":
        return Act({"action": "type", "text": _text(args, action)}, pointer)
    if action == "key":
        return Act({"action": "key", "keys": _keys(args)}, pointer)
    if action == "wait":
        return Act({"action": "wait", "seconds": _number(args, "time", 1.0)}, pointer)
    if action == "terminate":
        status = args.get("status", "success")
        if status not in ("success", "failure"):
            raise MalformedAction("`terminate` needs `status`: success or failure")
        return Terminal(str(status))
    if action == "answer":
        return Terminal("answer", _text(args, action))
    raise MalformedAction(f"unknown action {action!r}; known: {', '.join(ACTIONS)}")
