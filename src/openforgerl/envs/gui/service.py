"""`python -I -m openforgerl.envs.gui.service --config FILE --token T`: one GUI rollout's services.

Started by the orchestrator (`TaskRuntime.service_argv`) inside the sandbox, it serves
- the web apps of the task (`env.apps`) on 127.0.0.1:8080, with their state behind the token;
- the screen of the task's environment kind (`env.screens`: a headless browser, or an Xvfb
  desktop) and its computer service (`env.computer.service`) on 127.0.0.1:8765.
Exits when killed (sandbox close); `-I` so nothing in /workdir can shadow our modules.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from pathlib import Path
from typing import Any

from openforgerl.env.computer.service import COMPUTER_PORT, serve_computer, token_id
from openforgerl.env.screens import get_environment

__all__ = ["FONTS_CONF", "main", "start_apps"]

FONTS_CONF = Path(__file__).with_name("fonts.conf")


def start_apps(config: dict[str, Any], token: str, port: int) -> str:
    """Serve the task's apps in a daemon thread; returns their base URL ("" when the task has none)."""
    if not config.get("apps"):
        return ""
    from openforgerl.env.apps import build_apps

    _, server = build_apps(config["apps"], token, port)
    threading.Thread(target=server.serve_forever, daemon=True, name="apps").start()
    return f"http://127.0.0.1:{server.server_address[1]}"


def seconds_since_start() -> float:
    """How long ago this process started (its start time in /proc against the system's uptime): the
    screen's start-up time, interpreter and imports included."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rpartition(")")[2].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m openforgerl.envs.gui.service")
    ap.add_argument("--config", type=Path, required=True, help="the task's environment config (JSON)")
    ap.add_argument("--token", default="", help="secret for the state and locate routes")
    ap.add_argument("--apps-port", type=int, default=8080)
    ap.add_argument("--computer-port", type=int, default=COMPUTER_PORT)
    ap.add_argument(
        "--id-file",
        type=Path,
        default=None,
        help="written once the screen is served: which token this service holds (`token_id`, a hash)",
    )
    ns = ap.parse_args(argv)
    os.environ.setdefault("FONTCONFIG_FILE", str(FONTS_CONF))  # inherited by Chromium, Xvfb's clients
    config = json.loads(ns.config.read_text())
    apps_url = start_apps(config, ns.token, ns.apps_port)
    screen = get_environment(config["kind"]).open_screen(config, apps_url)
    server = serve_computer(
        screen.computer,
        ns.computer_port,
        token=ns.token,
        locate=screen.locate,
        ready_s=seconds_since_start(),
        kind=config["kind"],
    )
    if ns.id_file is not None:
        ns.id_file.write_text(token_id(ns.token))
    try:
        server.serve_forever()
    finally:
        screen.close()


if __name__ == "__main__":
    main()
