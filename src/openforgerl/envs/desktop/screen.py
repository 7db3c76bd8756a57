"""`DesktopScreen`: an Xvfb desktop with the task's real applications, driven by xdotool.

`config["desktop"]["launch"]`: a list of `{"app": name, ...}`, each started by `LAUNCHERS[name]`:
- `mousepad` (`file`: a path under /workdir): Debian's Xfce text editor; its saved file is the state;
- `chromium` (`url`: a path on the apps server): Debian Chromium, headful, tab strip and URL bar
  visible, driven only by xdotool. Playwright launches it (so `locate` can map an element to screen
  pixels for oracles, and `env.computer.origin.OriginGuard` keeps it on the apps: a `file://` or any other
  origin typed into the URL bar is refused) but never sends it input.
Windows are undecorated and maximized (openbox-rc.xml), so a window's client area is the screen.

The applications run at nice `APP_NICE`: they are what the agent drives (the desktop Chromium runs any
`javascript:` URL typed into its URL bar, Web Workers included), and they share the sandbox's service
CPU group with Xvfb and the computer service (`sandbox.cgroups`). At nice 19 (weight 15 against 1024)
even 200 busy workers leave the screen ~40 % of that group, so the agent cannot starve its own
screenshots into the environment's fault; the sandbox cannot lower a nice value (no CAP_SYS_NICE).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from openforgerl.env.computer.actions import ActionError, Computer, Screen
from openforgerl.envs.desktop.computer import XdotoolComputer
from openforgerl.envs.desktop.xserver import XDisplay, open_display

__all__ = ["LAUNCHERS", "DesktopScreen"]

APP_READY_TIMEOUT_S = 30.0
APP_NICE = 19


def niced(argv: list[str]) -> list[str]:
    return ["nice", "-n", str(APP_NICE), *argv]


class DesktopScreen:
    def __init__(self, x: XDisplay, computer: XdotoolComputer) -> None:
        self.x = x
        self.computer: Computer = computer  # a `GuardedComputer` around it once a Chromium runs
        self.browser: Any = None  # (playwright, browser, page) when a Chromium runs
        self.closers: list[Callable[[], None]] = []

    @classmethod
    def open(cls, config: Mapping[str, Any], apps_url: str) -> DesktopScreen:
        w, h = config.get("screen", (1280, 720))
        env = {**os.environ, "NO_AT_BRIDGE": "1", "GSETTINGS_BACKEND": "memory", "GTK_A11Y": "none"}
        x = open_display(int(w), int(h), env)
        screen = cls(x, XdotoolComputer(x.env, Screen(int(w), int(h))))
        try:
            for item in config.get("desktop", {}).get("launch", []):
                LAUNCHERS[item["app"]](screen, item, apps_url)
        except BaseException:
            screen.close()
            raise
        return screen

    def locate(self, selector: str) -> dict[str, int]:
        if self.browser is None:
            raise ActionError("locate needs a Chromium on this desktop")
        from openforgerl.env.computer.chromium import box_of

        page = self.browser[2]
        top = int(page.evaluate("window.outerHeight - window.innerHeight"))
        left = int(page.evaluate("window.screenX + (window.outerWidth - window.innerWidth) / 2"))
        return box_of(page, selector, (left, int(page.evaluate("window.screenY")) + top))

    def close(self) -> None:
        for close in reversed(self.closers):
            with contextlib.suppress(Exception):
                close()
        self.computer.close()
        self.x.close()


def _wait_window(screen: DesktopScreen, name: str) -> None:
    import subprocess

    deadline = time.monotonic() + APP_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["xdotool", "search", "--onlyvisible", "--class", name], env=screen.x.env, capture_output=True
        )
        if out.stdout.strip():
            time.sleep(0.5)  # first paint
            return
        time.sleep(0.1)
    raise RuntimeError(f"no {name} window within {APP_READY_TIMEOUT_S}s")


def launch_mousepad(screen: DesktopScreen, item: Mapping[str, Any], apps_url: str) -> None:
    screen.x.spawn(niced(["mousepad", "--disable-server", str(item["file"])]))
    _wait_window(screen, "mousepad")


def launch_chromium(screen: DesktopScreen, item: Mapping[str, Any], apps_url: str) -> None:
    from playwright.sync_api import sync_playwright

    from openforgerl.env.computer.chromium import CHROMIUM_ARGS, chromium_path
    from openforgerl.env.computer.origin import GuardedComputer, OriginGuard, app_url, origin_of

    wrapper = Path(tempfile.mkdtemp(prefix="chromium-")) / "chromium"  # Playwright takes no launcher prefix
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.join(niced([chromium_path()]))} "$@"\n')
    wrapper.chmod(0o755)
    pw = sync_playwright().start()
    browser = pw.chromium.launch(
        executable_path=str(wrapper),
        headless=False,
        env=dict[str, str | float | bool](screen.x.env),
        args=[
            *CHROMIUM_ARGS,
            "--start-maximized",
            "--window-position=0,0",
            f"--window-size={screen.computer.screen.width},{screen.computer.screen.height}",
        ],
    )
    home = app_url(apps_url, str(item.get("url", "/")))
    guard = OriginGuard(origin_of(home), home)
    context = browser.new_context(no_viewport=True)
    guard.install(context)  # the agent types into its URL bar: only the apps load (see env.computer.origin)
    page = context.new_page()
    page.goto(home, wait_until="load")
    screen.computer = GuardedComputer(screen.computer, context, guard)
    screen.browser = (pw, browser, page)
    screen.closers += [pw.stop, browser.close]
    _wait_window(screen, "chromium")


LAUNCHERS: dict[str, Callable[[DesktopScreen, Mapping[str, Any], str], None]] = {
    "mousepad": launch_mousepad,
    "chromium": launch_chromium,
}
"""Desktop application name -> launcher. Adding an app = a launcher + its apt package in setup.sh."""
