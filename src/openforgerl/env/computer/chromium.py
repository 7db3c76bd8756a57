"""Which Chromium a GUI environment launches, and with what flags (the browser and desktop kinds, and
Claw's page snapshots, start the same one).

Debian's `chromium` binary is launched by path (`/usr/lib/chromium/chromium`: the `/usr/bin/chromium`
wrapper is a shell script that reads `/etc/chromium.d`), never Playwright's own download. Flags:
`--no-sandbox` (inside bubblewrap, root is mapped to root and Chromium's own sandbox refuses to
start), no GPU, no background networking/component updates/sync (there is no network anyway).

`box_of` locates an element on a page of it (the oracles' `locate`, in the browser and desktop kinds).
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from openforgerl.env.computer.actions import ActionError

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "box_of", "chromium_path"]

CHROMIUM = "/usr/lib/chromium/chromium"
LOCATE_TIMEOUT_MS = 10000  # oracle only: auto-waits for the element (a page still loading under load)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-features=Translate,MediaRouter",
    "--disable-dev-shm-usage",
    "--password-store=basic",
    "--font-render-hinting=none",
]


def chromium_path() -> str:
    """The Debian Chromium binary (env `OPENFORGERL_CHROMIUM` overrides)."""
    found = os.environ.get("OPENFORGERL_CHROMIUM") or (CHROMIUM if os.path.exists(CHROMIUM) else None)
    found = found or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise FileNotFoundError("no chromium (apt-get install chromium)")
    return found


def box_of(page: Any, selector: str, offset: tuple[int, int]) -> dict[str, int]:
    """{x, y, width, height, cx, cy} of the first visible match, scrolled into view, plus `offset`."""
    loc = page.locator(selector).first
    try:
        loc.scroll_into_view_if_needed(timeout=LOCATE_TIMEOUT_MS)
        box = loc.bounding_box(timeout=LOCATE_TIMEOUT_MS)
    except Exception as exc:
        raise ActionError(f"no visible element for {selector!r}: {type(exc).__name__}") from exc
    if box is None:
        raise ActionError(f"element {selector!r} has no box (hidden)")
    x, y = int(box["x"]) + offset[0], int(box["y"]) + offset[1]
    w, h = int(box["width"]), int(box["height"])
    return {"x": x, "y": y, "width": w, "height": h, "cx": x + w // 2, "cy": y + h // 2}
