"""Which Chromium a GUI environment launches, and with what flags (the browser and desktop kinds, and
Claw's page snapshots, start the same one).

Debian's `chromium` binary is launched by path (`/usr/lib/chromium/chromium`: the `/usr/bin/chromium`
wrapper is a shell script that reads `/etc/chromium.d`), never Playwright's own download. Flags:
`--no-sandbox` (inside bubblewrap, root is mapped to root and Chromium's own sandbox refuses to
start), no GPU, no background networking/component updates/sync (there is no network anyway).
"""

from __future__ import annotations

import os
import shutil

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "chromium_path"]

CHROMIUM = "/usr/lib/chromium/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-features=Translate,MediaRouter",
                 "--disable-dev-shm-usage", "--password-store=basic", "--font-render-hinting=none"]


def chromium_path() -> str:
    """The Debian Chromium binary (env `OPENFORGERL_CHROMIUM` overrides)."""
    found = os.environ.get("OPENFORGERL_CHROMIUM") or (CHROMIUM if os.path.exists(CHROMIUM) else None)
    found = found or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        raise FileNotFoundError("no chromium (apt-get install chromium)")
    return found
