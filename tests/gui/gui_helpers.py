"""Shared helpers of the GUI tests: paths, `needs_gui` (Debian chromium, Xvfb, xdotool, openbox,
mousepad and Playwright present) and a fake `Computer` that records actions."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from openforgerl.env.computer.actions import Screen

DATA = Path(__file__).parent / "data"
GUI_SUITE = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/gui/suite/tasks"
GUI_BINARIES = ("Xvfb", "xdotool", "openbox", "mousepad", "xprop")


def gui_missing() -> str:
    """'' when the GUI stack is installed, else what is missing."""
    missing = [b for b in GUI_BINARIES if shutil.which(b) is None]
    if not (os.path.exists("/usr/lib/chromium/chromium") or shutil.which("chromium")):
        missing.append("chromium")
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing.append("playwright (pip)")
    return ", ".join(missing)


needs_gui = pytest.mark.skipif(bool(gui_missing()), reason=f"GUI stack missing: {gui_missing()}")


class FakeComputer:
    """Records every call; screenshots are a fixed tiny PNG. Does not render anything."""

    def __init__(self, screen: Screen = Screen()) -> None:
        self.screen = screen
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name in ("click", "drag", "type", "key", "scroll", "close"):
            return lambda *a, **kw: self.calls.append((name, a, kw))
        raise AttributeError(name)

    def screenshot(self) -> bytes:
        return b"\x89PNG\r\n\x1a\nfake"
