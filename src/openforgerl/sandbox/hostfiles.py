"""File access for sandboxes whose /workdir and /tmp live in host folders (local and podman).

Writable paths are written on the host directly (no process started); anything else is read through
the sandbox's own eyes (`cat`), so symlinks and read-only mounts mean what they mean inside.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from openforgerl.sandbox.base import ExecResult, SandboxError


class _HostBacked(Protocol):
    def _host_file(self, path: str) -> Path | None: ...

    def _check_alive(self) -> None: ...

    async def exec(self, argv: Sequence[str], *, timeout_s: float | None = None) -> ExecResult: ...


def write_bytes(host: Path, data: bytes) -> None:
    host.parent.mkdir(parents=True, exist_ok=True)
    host.write_bytes(data)


class HostFilesMixin:
    """`read_file` / `write_file` on top of `_host_file(path)` (host path of a writable file, or None)."""

    async def read_file(self: _HostBacked, path: str) -> bytes:
        host = self._host_file(path)
        if host is None:  # outside the writable dirs or via a symlink: read with the sandbox's eyes
            res = await self.exec(["cat", "--", path], timeout_s=60)
            if res.returncode != 0:
                raise FileNotFoundError(path)
            return res.stdout
        return await asyncio.to_thread(host.read_bytes)

    async def write_file(self: _HostBacked, path: str, data: bytes) -> None:
        self._check_alive()
        host = self._host_file(path)
        if host is None:
            raise SandboxError(f"{path}: read-only in the sandbox (only /workdir and /tmp are writable)")
        await asyncio.to_thread(write_bytes, host, data)
