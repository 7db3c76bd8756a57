"""The browser environment: per rollout, one headless Chromium (Playwright) at 1280x720, DPR 1, on
the web apps (`apps/`) served at 127.0.0.1:8080 inside the sandbox's network namespace.

Registers `kind = "browser"` with the SDK's `env.screens` (the GUI environment makes it a task family,
`envs.gui.family`). Heavy imports (Playwright) happen only in `open_screen`, inside the service process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openforgerl.env.screens import GuiEnvironment, OpenScreen, SandboxNeeds, register

__all__ = ["BROWSER", "open_browser"]


def open_browser(config: Mapping[str, Any], apps_url: str) -> OpenScreen:
    from openforgerl.envs.browser.screen import BrowserScreen

    return BrowserScreen.open(config, apps_url)


BROWSER = register(
    GuiEnvironment(
        "browser",
        open_browser,
        # Everything it needs is under /usr (chromium, fonts: gui/fonts.conf), plus a writable /tmp and a
        # fresh /dev with /dev/shm; bwrap.SYSTEM_RO_BINDS already covers it.
        SandboxNeeds(image="localhost/openforgerl-gui-browser:latest"),
    )
)
