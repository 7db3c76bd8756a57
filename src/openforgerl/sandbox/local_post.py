"""The trusted steps over a finished rollout's bubblewrap sandbox (`local_sandbox.py`) that run apart
from the agent: the verifier's command line (`verifier_command`, for `LocalSandbox.run_verifier`) and
a private copy of the final workdir to run commands over (`WorkdirCopy`)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from openforgerl.sandbox import bwrap
from openforgerl.sandbox.base import WORKDIR, ExecResult
from openforgerl.sandbox.cgroups import CgroupGroup
from openforgerl.sandbox.host_tree import MAX_ENTRIES, clear_path, list_tree
from openforgerl.sandbox.launcher import DEFAULT_PATH, started_wrapper
from openforgerl.sandbox.netns import NetNamespace
from openforgerl.sandbox.safefile import MAX_READ_BYTES, read_under, write_under

__all__ = ["PostRunHost", "WorkdirCopy", "verifier_command"]

BuildCommand = Callable[[int, int], list[str]]  # (started fd, status fd) -> full command line


class _BackendParts(Protocol):
    @property
    def root(self) -> Path: ...

    @property
    def root_args(self) -> list[str]: ...


class PostRunHost(Protocol):
    """What the post-run steps use of the sandbox they run in (`LocalSandbox`; a Protocol, so this module
    does not import the sandbox's, which imports it)."""

    fs: Path
    ro_binds: list[Path]
    netns: NetNamespace | None
    cgroup: CgroupGroup | None

    @property
    def _backend(self) -> _BackendParts: ...

    def _check_alive(self) -> None: ...

    def _prefix(self, role: str | None = "agent") -> list[str]: ...

    async def _run(
        self,
        build: BuildCommand,
        env: Mapping[str, str],
        timeout_s: float | None,
        stdin: bytes | None,
        *,
        limits: bool,
    ) -> ExecResult: ...


def verifier_command(
    sbx: PostRunHost, argv: Sequence[str], base: Path, started_fd: int, status_fd: int
) -> list[str]:
    """The bwrap command line of `LocalSandbox.run_verifier` (what it sees: see there)."""
    bargs = bwrap.verifier_args(
        sbx._backend.root_args,
        sbx.fs / "work",
        base / "in",
        base / "out",
        unshare_net=sbx.netns is None,
        ro_binds=sbx.ro_binds,
        hide=[sbx._backend.root],
    )
    bargs = [*bargs, "--json-status-fd", str(status_fd)]
    return bwrap.wrap_command(
        sbx._prefix(None), bargs, [*started_wrapper(started_fd), *argv], bwrap.VERIFIER_OUT
    )


class WorkdirCopy:
    """A copy of a rollout's final workdir (`LocalSandbox.open_workdir_copy`).

    `exec` runs a command in a fresh bwrap over the copy: the copy at /workdir (and /workspace, upstream
    Claw-Eval's name for it) read-write, its own /tmp, no network at all (not even the task's service:
    what runs here may be the agent's code), the sandbox's CPU, memory and pids limits, and its own PID
    namespace, killed past `timeout_s`. `read` and `write` go through the link-refusing `safefile`
    readers on the host; `paths` lists the copy without following a link.
    """

    def __init__(self, sandbox: PostRunHost, base: Path) -> None:
        self.sandbox = sandbox
        self.base = base
        self.work = base / "work"

    async def exec(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        cwd: str = WORKDIR,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        sbx = self.sandbox
        sbx._check_alive()
        full = {"PATH": DEFAULT_PATH, "HOME": WORKDIR, "LANG": "C.UTF-8", "TMPDIR": "/tmp", **(env or {})}
        return await sbx._run(
            lambda s, st: self._command(argv, cwd, s, st), full, timeout_s, None, limits=True
        )

    def _command(self, argv: Sequence[str], cwd: str, started_fd: int, status_fd: int) -> list[str]:
        sbx = self.sandbox
        bargs = bwrap.sandbox_args(
            sbx._backend.root_args,
            self.work,
            self.base / "tmp",
            unshare_net=True,
            ro_binds=sbx.ro_binds,
            hide=[sbx._backend.root],
        )
        prefix = sbx.cgroup.enter_argv("agent") if sbx.cgroup else []
        return bwrap.wrap_command(
            prefix, [*bargs, "--json-status-fd", str(status_fd)], [*started_wrapper(started_fd), *argv], cwd
        )

    async def read(self, rel: str, *, limit: int = MAX_READ_BYTES) -> bytes:
        """The bytes of a regular file of the copy (`TamperError`: a link, FIFO, device or over `limit`)."""
        return await asyncio.to_thread(read_under, self.work, rel, limit=limit)

    async def write(self, rel: str, data: bytes) -> None:
        """Write a trusted file into the copy, replacing whatever the agent left on its path (a link, a
        file where a folder must be), as a file pushed into a container replaces it."""
        await asyncio.to_thread(clear_path, self.work, rel)
        await asyncio.to_thread(write_under, self.work, rel, data)

    async def paths(self) -> list[str]:
        """Every entry of the copy but its folders (relative, "/"-separated),
        links listed but not followed."""
        return await asyncio.to_thread(list_tree, self.work, MAX_ENTRIES)

    async def aclose(self) -> None:
        await asyncio.to_thread(shutil.rmtree, self.base, True)
