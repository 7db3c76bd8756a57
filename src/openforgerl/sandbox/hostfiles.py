"""File access for sandboxes whose /workdir and /tmp live in host folders (local and podman).

Paths in the agent's writable space (/workdir, /tmp) are read and written on the host directly (no
process started) and as hostile input (`safefile.py`): no link is followed, a FIFO never blocks,
only regular files of bounded size are read — a breach raises `TamperError` and is recorded in the
sandbox's `violations` (the agent's failure, never infra). Any other path (the read-only binds) is
read through the sandbox's own eyes (`cat`), so read-only mounts mean what they mean inside.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from openforgerl.sandbox.base import ExecResult, SandboxError, TamperError
from openforgerl.sandbox.safefile import read_under, write_under


class _HostBacked(Protocol):
    violations: list[str]

    def _writable(self, path: str) -> tuple[Path, str] | None: ...

    def _check_alive(self) -> None: ...

    async def exec(self, argv: Sequence[str], *, timeout_s: float | None = None) -> ExecResult: ...


def write_bytes(host: Path, data: bytes) -> None:
    """Lay out a file on the host before any agent ran (trusted folders only)."""
    host.parent.mkdir(parents=True, exist_ok=True)
    host.write_bytes(data)


class HostFilesMixin:
    """`read_file` / `write_file` on top of `_writable(path)` -> (host base dir, relative path) or None."""

    violations: list[str]

    async def read_file(self: _HostBacked, path: str) -> bytes:
        where = self._writable(path)
        if where is None:  # a read-only bind: read with the sandbox's eyes
            res = await self.exec(["cat", "--", path], timeout_s=60)
            if res.returncode != 0:
                raise FileNotFoundError(path)
            return res.stdout
        try:
            return await asyncio.to_thread(read_under, *where)
        except TamperError as e:
            self.violations.append(f"read {path}: {e}")
            raise

    async def write_file(self: _HostBacked, path: str, data: bytes) -> None:
        self._check_alive()
        where = self._writable(path)
        if where is None:
            raise SandboxError(f"{path}: read-only in the sandbox (only /workdir and /tmp are writable)")
        try:
            await asyncio.to_thread(write_under, *where, data)
        except TamperError as e:
            self.violations.append(f"write {path}: {e}")
            raise
