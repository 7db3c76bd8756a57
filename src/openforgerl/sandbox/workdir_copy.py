"""A private copy of a rollout's final workdir, for trusted post-run commands (`WorkdirCopy`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from openforgerl.sandbox import bwrap
from openforgerl.sandbox.base import WORKDIR, ExecResult, SandboxError
from openforgerl.sandbox.launcher import DEFAULT_PATH, started_wrapper
from openforgerl.sandbox.safefile import MAX_READ_BYTES, read_under, write_under

if TYPE_CHECKING:
    from openforgerl.sandbox.local_sandbox import LocalSandbox

__all__ = ["WorkdirCopy", "copy_tree"]

class WorkdirCopy:
    """A copy of a rollout's final workdir (`LocalSandbox.open_workdir_copy`).

    `exec` runs a command in a fresh bwrap over the copy: the copy at /workdir (and /workspace, upstream
    Claw-Eval's name for it) read-write, its own /tmp, no network at all (not even the task's service:
    what runs here may be the agent's code), the sandbox's CPU, memory and pids limits, and its own PID
    namespace, killed past `timeout_s`. `read` and `write` go through the link-refusing `safefile`
    readers on the host; `paths` lists the copy without following a link.
    """

    MAX_ENTRIES = 100_000

    def __init__(self, sandbox: LocalSandbox, base: Path) -> None:
        self.sandbox = sandbox
        self.base = base
        self.work = base / "work"

    async def exec(self, argv: Sequence[str], *, timeout_s: float, cwd: str = WORKDIR,
                   env: Mapping[str, str] | None = None) -> ExecResult:
        sbx = self.sandbox
        sbx._check_alive()
        full = {"PATH": DEFAULT_PATH, "HOME": WORKDIR, "LANG": "C.UTF-8", "TMPDIR": "/tmp", **(env or {})}
        return await sbx._run(lambda s, st: self._command(argv, cwd, s, st), full, timeout_s, None, limits=True)

    def _command(self, argv: Sequence[str], cwd: str, started_fd: int, status_fd: int) -> list[str]:
        sbx = self.sandbox
        bargs = bwrap.sandbox_args(sbx._backend.root_args, self.work, self.base / "tmp", unshare_net=True,
                                   ro_binds=sbx.ro_binds, hide=[sbx._backend.root])
        prefix = sbx.cgroup.enter_argv("agent") if sbx.cgroup else []
        return bwrap.wrap_command(prefix, [*bargs, "--json-status-fd", str(status_fd)],
                                  [*started_wrapper(started_fd), *argv], cwd)

    async def read(self, rel: str, *, limit: int = MAX_READ_BYTES) -> bytes:
        """The bytes of a regular file of the copy (`TamperError`: a link, FIFO, device or over `limit`)."""
        return await asyncio.to_thread(read_under, self.work, rel, limit=limit)

    async def write(self, rel: str, data: bytes) -> None:
        """Write a trusted file into the copy, replacing whatever the agent left on its path (a link, a
        file where a folder must be), as a file pushed into a container replaces it."""
        await asyncio.to_thread(_clear_path, self.work, rel)
        await asyncio.to_thread(write_under, self.work, rel, data)

    async def paths(self) -> list[str]:
        """Every entry of the copy but its folders (relative, "/"-separated), links listed but not followed."""
        return await asyncio.to_thread(_list_tree, self.work, self.MAX_ENTRIES)

    async def aclose(self) -> None:
        await asyncio.to_thread(shutil.rmtree, self.base, True)


def copy_tree(src: Path, dest: Path, max_entries: int = WorkdirCopy.MAX_ENTRIES) -> None:
    """Copy the agent's folder: folders, regular files (mode kept) and links as links, never followed;
    FIFOs, sockets and devices left out, as is a file that does not fit or anything past `max_entries`."""
    dest.mkdir(parents=True)
    todo, seen = [(src, dest)], 0
    while todo:
        s, d = todo.pop()
        try:
            entries = list(os.scandir(s))
        except OSError:
            continue
        for e in entries:
            seen += 1
            if seen > max_entries:
                return
            target = d / e.name
            try:
                if e.is_symlink():
                    os.symlink(os.readlink(e.path), target)
                elif e.is_dir(follow_symlinks=False):
                    target.mkdir()
                    todo.append((Path(e.path), target))
                elif e.is_file(follow_symlinks=False):
                    _copy_file(e.path, target)
            except OSError:  # ENOSPC (the quota), a name that vanished: left out
                with contextlib.suppress(OSError):
                    if target.is_file() and not target.is_symlink():
                        target.unlink()


def _copy_file(src: str, dest: Path) -> None:
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, st.st_mode & 0o777)
        try:
            while os.sendfile(out, fd, None, 1 << 20):
                pass
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _clear_path(root: Path, rel: str) -> None:
    """Remove what stands in the way of writing `root/rel` as a regular file (no link is followed)."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise SandboxError(f"{rel!r} is not a path inside the copy")
    here = root
    for i, name in enumerate(parts):
        here = here / name
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return
        last = i == len(parts) - 1
        if stat.S_ISLNK(st.st_mode) or (not last and not stat.S_ISDIR(st.st_mode)) or (
                last and not stat.S_ISREG(st.st_mode)):
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(here)
            else:
                here.unlink()
            return


def _list_tree(root: Path, max_entries: int) -> list[str]:
    out: list[str] = []
    todo = [""]
    while todo and len(out) < max_entries:
        rel = todo.pop()
        try:
            entries = list(os.scandir(root / rel if rel else root))
        except OSError:
            continue
        for e in entries:
            path = f"{rel}/{e.name}" if rel else e.name
            if e.is_dir(follow_symlinks=False):
                todo.append(path)
            else:
                out.append(path)
    return sorted(out[:max_entries])


