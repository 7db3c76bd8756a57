"""The action API every GUI environment implements, and the one place actions are validated.

Coordinates are **integer screen pixels of the screenshot** (origin top-left, x right, y down,
`0 <= x < width`, `0 <= y < height`; 1280x720 and DPR 1 by default). Model-specific conventions
(Qwen3-VL 0-1000, Qwen2.5-VL resized pixels) are converted by the harness, never here; a point off
the screen is refused (`ActionError`), not clamped, so a wrong scale factor shows up as an error.

| action | arguments | does |
|---|---|---|
| `click` | `x, y`, `button` = left/right/middle | press and release at (x, y) |
| `double_click` / `right_click` | `x, y` | |
| `drag` | `x, y, to_x, to_y` | left button down at (x, y), move, up at (to_x, to_y) |
| `type` | `text` (<= 2000 chars) | type into the focused element |
| `key` | `keys`, e.g. `"enter"`, `"ctrl+a"`, `"ctrl+shift+t"` | a key combination (names: `KEYS`) |
| `scroll` | `x, y, dy` (wheel notches, + = down), `dx` = 0 | scroll at (x, y) |
| `wait` | `seconds` (0..10) | let the screen settle |
| `screenshot` | | (the HTTP route `GET /screenshot`; in-process `Computer.screenshot()`) |

`apply(computer, body)` checks a JSON action and runs it; every environment's `Computer` only sees
clean, in-range arguments.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["ACTIONS", "KEYS", "ActionError", "Computer", "Screen", "apply", "parse_keys"]

MAX_TEXT = 2000
MAX_WAIT_S = 10.0
MAX_SCROLL = 50


class ActionError(ValueError):
    """A malformed or out-of-range action: the agent's error (HTTP 400), never infra."""


@dataclass(frozen=True)
class Screen:
    width: int = 1280
    height: int = 720


class Computer(Protocol):
    """One screen. Implemented in-process by `browser.PlaywrightComputer`, `desktop.XdotoolComputer`
    and over HTTP by `env.computer.client.HttpComputer` (what harnesses and oracles inside the sandbox
    use)."""

    screen: Screen

    def click(self, x: int, y: int, button: str = "left", count: int = 1) -> None: ...

    def drag(self, x: int, y: int, to_x: int, to_y: int) -> None: ...

    def type(self, text: str) -> None: ...

    def key(self, keys: list[str]) -> None: ...

    def scroll(self, x: int, y: int, dx: int, dy: int) -> None: ...

    def screenshot(self) -> bytes: ...

    def close(self) -> None: ...


# Canonical key names (lowercase). Values: (Playwright name, xdotool keysym).
KEYS: dict[str, tuple[str, str]] = {
    "enter": ("Enter", "Return"),
    "tab": ("Tab", "Tab"),
    "escape": ("Escape", "Escape"),
    "backspace": ("Backspace", "BackSpace"),
    "delete": ("Delete", "Delete"),
    "space": (" ", "space"),
    "up": ("ArrowUp", "Up"),
    "down": ("ArrowDown", "Down"),
    "left": ("ArrowLeft", "Left"),
    "right": ("ArrowRight", "Right"),
    "home": ("Home", "Home"),
    "end": ("End", "End"),
    "pageup": ("PageUp", "Prior"),
    "pagedown": ("PageDown", "Next"),
    "ctrl": ("Control", "ctrl"),
    "shift": ("Shift", "shift"),
    "alt": ("Alt", "alt"),
    "super": ("Meta", "super"),
    **{f"f{i}": (f"F{i}", f"F{i}") for i in range(1, 13)},
}
_ALIASES = {
    "return": "enter",
    "esc": "escape",
    "control": "ctrl",
    "cmd": "super",
    "meta": "super",
    "win": "super",
    "pgup": "pageup",
    "pgdn": "pagedown",
    "del": "delete",
    "arrowup": "up",
    "arrowdown": "down",
    "arrowleft": "left",
    "arrowright": "right",
}


def parse_keys(combo: str) -> list[str]:
    """`"Ctrl+Shift+T"` -> `["ctrl", "shift", "t"]`; single printable characters pass through."""
    if not isinstance(combo, str) or not combo.strip():
        raise ActionError("keys must be a non-empty string such as 'enter' or 'ctrl+a'")
    out = []
    for part in combo.strip().split("+") if combo.strip() != "+" else ["+"]:
        name = _ALIASES.get(part.strip().lower(), part.strip().lower())
        if name not in KEYS and not (len(name) == 1 and name.isprintable()):
            raise ActionError(f"unknown key {part!r}; known: {', '.join(sorted(KEYS))} or one character")
        out.append(name)
    return out


def _int(body: Mapping[str, Any], name: str, lo: int, hi: int) -> int:
    v = body.get(name)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v):
        raise ActionError(f"{name} must be an integer pixel coordinate (got {v!r})")
    if not lo <= int(v) < hi:
        raise ActionError(f"{name}={int(v)} is off the screen (0..{hi - 1})")
    return int(v)


def _point(c: Computer, body: Mapping[str, Any], xk: str = "x", yk: str = "y") -> tuple[int, int]:
    return _int(body, xk, 0, c.screen.width), _int(body, yk, 0, c.screen.height)


def _click(c: Computer, b: Mapping[str, Any]) -> None:
    button = b.get("button", "left")
    if button not in ("left", "right", "middle"):
        raise ActionError("button must be left, right or middle")
    c.click(*_point(c, b), button=button)


def _text(c: Computer, b: Mapping[str, Any]) -> None:
    text = b.get("text")
    if not isinstance(text, str) or not 0 < len(text) <= MAX_TEXT:
        raise ActionError(f"text must be a string of 1..{MAX_TEXT} characters")
    c.type(text)


def _scroll(c: Computer, b: Mapping[str, Any]) -> None:
    dx, dy = b.get("dx", 0), b.get("dy", 0)
    for v in (dx, dy):
        if isinstance(v, bool) or not isinstance(v, int) or abs(v) > MAX_SCROLL:
            raise ActionError(f"dx/dy must be integers within +-{MAX_SCROLL} (wheel notches)")
    c.scroll(*_point(c, b), dx=dx, dy=dy)


def _wait(c: Computer, b: Mapping[str, Any]) -> None:
    s = b.get("seconds", 1.0)
    if isinstance(s, bool) or not isinstance(s, (int, float)) or not 0 <= s <= MAX_WAIT_S:
        raise ActionError(f"seconds must be a number in 0..{MAX_WAIT_S}")
    time.sleep(float(s))


ACTIONS: dict[str, Callable[[Computer, Mapping[str, Any]], None]] = {
    "click": _click,
    "double_click": lambda c, b: c.click(*_point(c, b), count=2),
    "right_click": lambda c, b: c.click(*_point(c, b), button="right"),
    "drag": lambda c, b: c.drag(*_point(c, b), *_point(c, b, "to_x", "to_y")),
    "type": _text,
    "key": lambda c, b: c.key(parse_keys(b.get("keys", ""))),
    "scroll": _scroll,
    "wait": _wait,
}
"""Action name -> checker+runner. The names are the JSON `action` values of `POST /act`."""


def apply(computer: Computer, body: Any) -> dict[str, Any]:
    """Validate and run one JSON action; returns what was executed. Raises ActionError."""
    if not isinstance(body, Mapping):
        raise ActionError("an action is a JSON object with an 'action' field")
    name = body.get("action")
    run = ACTIONS.get(name) if isinstance(name, str) else None
    if run is None:
        raise ActionError(f"unknown action {name!r}; known: {', '.join(ACTIONS)}")
    run(computer, body)
    return dict(body)
