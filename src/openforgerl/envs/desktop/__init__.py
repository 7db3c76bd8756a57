"""The desktop environment: per rollout, its own Xvfb display with openbox, input by xdotool,
screenshots by `mss`, and real Debian applications (`mousepad`, a visible `chromium` on the web apps).

Registers `kind = "desktop"` with the SDK's `env.screens`; the X stack is started only in `open_screen`,
inside the service process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openforgerl.env.screens import GuiEnvironment, OpenScreen, SandboxNeeds, register

__all__ = ["DESKTOP", "open_desktop"]


def open_desktop(config: Mapping[str, Any], apps_url: str) -> OpenScreen:
    from openforgerl.envs.desktop.screen import DesktopScreen

    return DesktopScreen.open(config, apps_url)


DESKTOP = register(
    GuiEnvironment(
        "desktop",
        open_desktop,
        # Xvfb, openbox, xdotool, mousepad and their data (xkb, themes, GSettings schemas) are all under /usr;
        # the X socket is in the sandbox's own /tmp. Nothing beyond bwrap.SYSTEM_RO_BINDS.
        SandboxNeeds(image="localhost/openforgerl-gui-desktop:latest"),
    )
)
