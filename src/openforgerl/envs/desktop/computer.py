"""`XdotoolComputer`: the action API on an X display (xdotool for input, `mss` for screenshots).

Measured: a click followed at once by typing lost the text, so actions
are spaced by at least `MIN_GAP_S`; long text is typed in chunks (Anthropic's demo: 50 chars, 12 ms).
No `mousemove --sync`: when the pointer is already at the target it waits ~15 s for a motion event
that never comes (measured); XTest events of one connection are processed in order anyway.
`mss` grabs the full screen in well under a millisecond; PNG encoding (`mss.tools.to_png`) is the cost.
"""

from __future__ import annotations

import subprocess
import time

from openforgerl.env.computer.actions import KEYS, Screen

__all__ = ["XdotoolComputer"]

MIN_GAP_S = 0.15
CHUNK = 50
BUTTONS = {"left": "1", "middle": "2", "right": "3"}
_SYMBOLS = {
    "+": "plus",
    "-": "minus",
    " ": "space",
    ".": "period",
    ",": "comma",
    "/": "slash",
    "=": "equal",
    ";": "semicolon",
    "'": "apostrophe",
    "[": "bracketleft",
    "]": "bracketright",
    "\\": "backslash",
}


class XdotoolComputer:
    def __init__(self, env: dict[str, str], screen: Screen = Screen()) -> None:
        import mss

        self.env, self.screen = env, screen
        self._mss = getattr(mss, "MSS", mss.mss)(display=env["DISPLAY"])  # mss >= 10.2 renamed it
        self._last = 0.0

    def _xdo(self, *args: str) -> None:
        gap = self._last + MIN_GAP_S - time.monotonic()
        if gap > 0:
            time.sleep(gap)
        subprocess.run(["xdotool", *args], env=self.env, check=True, capture_output=True, timeout=30)
        self._last = time.monotonic()

    def click(self, x: int, y: int, button: str = "left", count: int = 1) -> None:
        self._xdo(
            "mousemove", str(x), str(y), "click", "--repeat", str(count), "--delay", "80", BUTTONS[button]
        )

    def drag(self, x: int, y: int, to_x: int, to_y: int) -> None:
        self._xdo("mousemove", str(x), str(y), "mousedown", "1")
        self._xdo(
            "mousemove",
            str((x + to_x) // 2),
            str((y + to_y) // 2),
            "mousemove",
            str(to_x),
            str(to_y),
            "mouseup",
            "1",
        )

    def type(self, text: str) -> None:
        for i in range(0, len(text), CHUNK):
            self._xdo("type", "--delay", "12", "--", text[i : i + CHUNK])

    def key(self, keys: list[str]) -> None:
        syms = [KEYS[k][1] if k in KEYS else _SYMBOLS.get(k, k) for k in keys]
        self._xdo("key", "--clearmodifiers", "+".join(syms))

    def scroll(self, x: int, y: int, dx: int, dy: int) -> None:
        self._xdo("mousemove", str(x), str(y))
        for n, (neg, pos) in ((dy, ("4", "5")), (dx, ("6", "7"))):
            if n:
                self._xdo("click", "--repeat", str(abs(n)), "--delay", "30", pos if n > 0 else neg)

    def screenshot(self) -> bytes:
        import mss.tools

        shot = self._mss.grab({"left": 0, "top": 0, "width": self.screen.width, "height": self.screen.height})
        data = mss.tools.to_png(shot.rgb, shot.size)
        assert data is not None  # no output path: the PNG comes back
        return data

    def close(self) -> None:
        self._mss.close()
