"""Helpers shared by the sandbox and orchestrator tests (imported as a top-level module)."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="netns/cgroups need root")


class EchoServer:
    """A TCP server on the host that answers every connection with a fixed banner."""

    def __init__(self, banner: bytes) -> None:
        self.banner = banner
        self.server: asyncio.Server | None = None
        self.port = 0
        self.hits = 0

    async def start(self, host: str = "127.0.0.1") -> EchoServer:
        self.server = await asyncio.start_server(self._handle, host, 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def _handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.hits += 1
        data = await r.read(100)
        w.write(self.banner + b":" + data)
        await w.drain()
        w.close()

    async def aclose(self) -> None:
        if self.server:
            self.server.close()


def procs_with(marker: str) -> list[int]:
    """PIDs whose command line contains `marker` (to prove no process survived)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found
