"""Own X display per rollout: Xvfb (`-displayfd`, `-noreset`, no TCP) + openbox (undecorated,
maximized windows: `openbox-rc.xml`).

Measured pitfalls: read `-displayfd` up to the newline before closing the
pipe (closing early killed every second Xvfb); without `-noreset` Xvfb resets when the last client
(a readiness probe) leaves. The X socket lives in the sandbox's own /tmp, so every sandbox has `:0`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["XDisplay", "open_display"]

RC_XML = Path(__file__).with_name("openbox-rc.xml")
READY_TIMEOUT_S = 20.0


@dataclass
class XDisplay:
    display: str
    env: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def spawn(self, argv: list[str], extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            argv,
            env={**self.env, **(extra_env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.procs.append(proc)
        return proc

    def close(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        for proc in self.procs:
            with contextlib.suppress(Exception):
                proc.wait(5)


def _read_display(fd: int, proc: subprocess.Popen[bytes]) -> str:
    buf = b""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not buf.endswith(b"\n"):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"Xvfb did not start (exit {proc.poll()})")
        chunk = os.read(fd, 64)
        if not chunk:
            raise RuntimeError("Xvfb closed -displayfd without a display number")
        buf += chunk
    return ":" + buf.decode().strip()


def _wait_wm(env: dict[str, str]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        out = subprocess.run(["xprop", "-root", "_NET_SUPPORTING_WM_CHECK"], env=env, capture_output=True)
        if b"window id" in out.stdout:
            return
        time.sleep(0.05)
    raise RuntimeError("openbox did not take the display")


def open_display(width: int = 1280, height: int = 720, base_env: dict[str, str] | None = None) -> XDisplay:
    """Start Xvfb + openbox; returns the display with an env for its clients."""
    r, w = os.pipe()
    xvfb = subprocess.Popen(
        [
            "Xvfb",
            "-screen",
            "0",
            f"{width}x{height}x24",
            "-nolisten",
            "tcp",
            "-noreset",
            "-displayfd",
            str(w),
        ],
        pass_fds=(w,),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(w)
    try:
        display = _read_display(r, xvfb)
    finally:
        os.close(r)
    env = {**(base_env or os.environ), "DISPLAY": display}
    env.setdefault("XDG_RUNTIME_DIR", "/tmp/xdg")
    Path(env["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, exist_ok=True)
    x = XDisplay(display, env, [xvfb])
    x.spawn(["openbox", "--sm-disable", "--config-file", str(RC_XML)])
    _wait_wm(env)
    return x
