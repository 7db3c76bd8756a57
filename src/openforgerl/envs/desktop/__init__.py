"""The desktop environment: per rollout, its own Xvfb display with openbox, input by xdotool,
screenshots by `mss`, and real Debian applications (`mousepad`, a visible `chromium` on the web apps).

Registers `kind = "desktop"` with `envs.gui.registry`; the X stack is started only in `open_screen`,
inside the service process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openforgerl.envs.gui.family import register_kind
from openforgerl.envs.gui.registry import GuiEnvironment, OpenScreen, SandboxNeeds

__all__ = ["DESKTOP", "open_desktop"]


def open_desktop(config: Mapping[str, Any], apps_url: str) -> OpenScreen:
    from openforgerl.envs.desktop.screen import DesktopScreen

    return DesktopScreen.open(config, apps_url)


DESKTOP = register_kind(GuiEnvironment(
    "desktop", open_desktop,
    # Xvfb, openbox, xdotool, mousepad and their data (xkb, themes, GSettings schemas) are all under /usr;
    # the X socket is in the sandbox's own /tmp. Nothing beyond bwrap.SYSTEM_RO_BINDS.
    SandboxNeeds(image="localhost/openforgerl-gui-desktop:latest")))
