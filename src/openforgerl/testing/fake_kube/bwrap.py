"""A minimal bubblewrap container for the fake kubelet: the host root read-only, the Pod's
emptyDir volumes bound writable, every namespace unshared (loopback-only network).

The image is ignored (there is no registry here); what runs is the host's userland. `exec` enters
the container's namespaces with `nsenter`, so it shares the Pod's mounts, PIDs and network, as
`kubectl exec` would.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

SKIP_ROOT = {"proc", "dev", "sys", "tmp", "run"}
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CHILD_PID = re.compile(rb'"child-pid":\s*(\d+)')


def root_args() -> list[str]:
    """A tmpfs root with every top-level host dir bound read-only (so new mount points can exist)."""
    args = ["--tmpfs", "/"]
    for entry in sorted(os.listdir("/")):
        path = "/" + entry
        if entry in SKIP_ROOT:
            continue
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def bwrap_argv(argv: Sequence[str], binds: Mapping[str, Path], cwd: str, info_fd: int,
               ready_fd: int) -> list[str]:
    """bwrap + a tiny shim that reports "mounts are done" on `ready_fd`, then execs the command."""
    mounts = [a for target, src in binds.items() for a in ("--bind", str(src), target)]
    shim = ["/bin/sh", "-c", f'printf R > /proc/self/fd/{ready_fd}; exec "$@"', "sh"]
    return ["bwrap", *root_args(), "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", *mounts,
            "--remount-ro", "/", "--chdir", cwd, "--unshare-all", "--die-with-parent", "--new-session",
            "--info-fd", str(info_fd), "--", *shim, *argv]


class Container:
    """One running bwrap sandbox; `pid` is its init process inside the new namespaces.

    `start` returns only once the sandbox's mounts are in place (a shim inside writes to a pipe):
    bwrap reports the child pid *before* it sets up mounts, and an `nsenter` in that window sees a
    half-built root."""

    def __init__(self, proc: asyncio.subprocess.Process, pid: int, env: Mapping[str, str]) -> None:
        self.proc, self.pid, self.env = proc, pid, dict(env)

    @classmethod
    async def start(cls, argv: Sequence[str], *, env: Mapping[str, str], binds: Mapping[str, Path],
                    cwd: str, log_path: Path) -> Container:
        full_env = {"PATH": DEFAULT_PATH, **env}
        (read_fd, write_fd), (ready_r, ready_w) = os.pipe(), os.pipe()
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            proc = await asyncio.create_subprocess_exec(
                *bwrap_argv(argv, binds, cwd, write_fd, ready_w), env=full_env,
                pass_fds=(write_fd, ready_w), stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log)
        finally:
            for fd in (log, write_fd, ready_w):
                os.close(fd)
        loop = asyncio.get_running_loop()
        try:
            pid = await loop.run_in_executor(None, read_child_pid, read_fd)
            ready = await loop.run_in_executor(None, os.read, ready_r, 1)  # b"" if it died first
        finally:
            os.close(read_fd)
            os.close(ready_r)
        if pid is None or not ready:
            await proc.wait()
            raise OSError(f"bwrap exited with {proc.returncode} before starting (see {log_path})")
        return cls(proc, pid, full_env)

    async def exec(self, argv: Sequence[str], *, stdin: bool) -> asyncio.subprocess.Process:
        """Start argv inside the container's namespaces, cwd = the container's working dir."""
        enter = ["nsenter", "-t", str(self.pid), "-U", "-m", "-p", "-n", "-i", "-u",
                 "--preserve-credentials", "--wd"]
        pipe, devnull = asyncio.subprocess.PIPE, asyncio.subprocess.DEVNULL
        return await asyncio.create_subprocess_exec(
            *enter, *argv, env=self.env, stdin=pipe if stdin else devnull, stdout=pipe, stderr=pipe,
            start_new_session=True)

    def kill(self) -> None:
        """SIGKILL bwrap; `--die-with-parent` takes the whole PID namespace down with it."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)

    async def wait(self) -> int:
        return await self.proc.wait()


def read_child_pid(fd: int) -> int | None:
    """Read bwrap's info JSON to EOF (closing early would SIGPIPE bwrap mid-write)."""
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    found = CHILD_PID.search(data)
    return int(found.group(1)) if found else None
