"""A minimal bubblewrap container for the fake kubelet: the host root read-only, the Pod's
emptyDir volumes bound writable, every namespace unshared (loopback-only network).

The image is ignored (there is no registry here); what runs is the host's userland. The command is
the namespace's PID 1 (`--as-pid-1`), as a container's entrypoint is: signals from inside reach it
only where it handles them, and when it exits the kernel kills everything left in its PID
namespace. A Pod's later containers join the first one's network namespace (`nsenter -n`), and
nothing else of it, as containers of one Pod do. `exec` enters the container's namespaces with
`nsenter`, so it shares the container's mounts, PIDs and network, as `kubectl exec` would.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import re
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

SKIP_ROOT = {"proc", "dev", "sys", "tmp", "run"}
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PR_SET_PDEATHSIG = 1
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


IMAGE_VENV = "/openforgerl-image/venv"
"""Where a container finds this Python's venv, as a rollout image holds the project's: a path of the image,
not of the Pod's volumes (a verifier's program must not live in /tmp or /workdir)."""


def own_python_args() -> list[str]:
    """This Python's venv read-only at `IMAGE_VENV`, and this package's source (what an editable install
    points at) where it lives when that is under a folder a container gets fresh (a checkout in /tmp).
    Bound after the volumes, so a Pod's `/tmp` volume cannot hide them."""
    out = ["--ro-bind", str(Path(sys.prefix).resolve()), IMAGE_VENV]
    source = Path(__file__).resolve().parents[3]  # the folder holding the `openforgerl` package
    if len(source.parts) > 1 and source.parts[1] in SKIP_ROOT:
        out += ["--ro-bind", str(source), str(source)]
    return out


def bwrap_argv(
    argv: Sequence[str],
    binds: Mapping[str, Path],
    cwd: str,
    info_fd: int,
    ready_fd: int,
    net_of: int | None = None,
) -> list[str]:
    """bwrap + a tiny shim that reports "mounts are done" on `ready_fd`, then execs the command.
    `net_of`: the pid whose network namespace this container joins (a Pod's later container)."""
    mounts = [a for target, src in binds.items() for a in ("--bind", str(src), target)]
    shim = ["/bin/sh", "-c", f'printf R > /proc/self/fd/{ready_fd}; exec "$@"', "sh"]
    enter = [] if net_of is None else ["nsenter", "-t", str(net_of), "-n", "--"]
    unshare = (
        ["--unshare-all"]
        if net_of is None
        else ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    )
    return [
        *enter,
        "bwrap",
        *root_args(),
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        *mounts,
        *own_python_args(),
        "--remount-ro",
        "/",
        "--chdir",
        cwd,
        *unshare,
        "--as-pid-1",
        "--die-with-parent",
        "--new-session",
        "--info-fd",
        str(info_fd),
        "--",
        *shim,
        *argv,
    ]


class Container:
    """One running bwrap sandbox; `pid` is its init process inside the new namespaces.

    `start` returns only once the sandbox's mounts are in place (a shim inside writes to a pipe):
    bwrap reports the child pid *before* it sets up mounts, and an `nsenter` in that window sees a
    half-built root."""

    def __init__(self, proc: asyncio.subprocess.Process, pid: int, env: Mapping[str, str]) -> None:
        self.proc, self.pid, self.env = proc, pid, dict(env)
        self._pidfd = pidfd(pid)  # signals the right process even after its pid number is reused

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        binds: Mapping[str, Path],
        cwd: str,
        log_path: Path,
        net_of: int | None = None,
    ) -> Container:
        full_env = {"PATH": DEFAULT_PATH, **env}
        (read_fd, write_fd), (ready_r, ready_w) = os.pipe(), os.pipe()
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            proc = await asyncio.create_subprocess_exec(
                *bwrap_argv(argv, binds, cwd, write_fd, ready_w, net_of),
                env=full_env,
                pass_fds=(write_fd, ready_w),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=die_with_us,
            )
        finally:
            for fd in (log, write_fd, ready_w):
                os.close(fd)
        started = asyncio.ensure_future(wait_started(read_fd, ready_r))
        try:
            pid, ready = await asyncio.shield(started)
        except BaseException:  # cancelled (the Pod was deleted while starting): leave nothing behind
            await kill_when_started(proc, started)
            raise
        if pid is None or not ready:
            await proc.wait()
            raise OSError(f"bwrap exited with {proc.returncode} before starting (see {log_path})")
        return cls(proc, pid, full_env)

    async def exec(self, argv: Sequence[str], *, stdin: bool) -> asyncio.subprocess.Process:
        """Start argv inside the container's namespaces, cwd = the container's working dir."""
        enter = [
            "nsenter",
            "-t",
            str(self.pid),
            "-U",
            "-m",
            "-p",
            "-n",
            "-i",
            "-u",
            "--preserve-credentials",
            "--wd",
        ]
        pipe, devnull = asyncio.subprocess.PIPE, asyncio.subprocess.DEVNULL
        return await asyncio.create_subprocess_exec(
            *enter,
            *argv,
            env=self.env,
            stdin=pipe if stdin else devnull,
            stdout=pipe,
            stderr=pipe,
            start_new_session=True,
        )

    def kill(self) -> None:
        """SIGKILL the namespace's init (the whole PID namespace dies with it), then bwrap."""
        if self._pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        kill(self.proc)

    async def wait(self) -> int:
        code = await self.proc.wait()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        return code


def kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGKILL)


async def kill_when_started(
    proc: asyncio.subprocess.Process, started: asyncio.Future[tuple[int | None, bytes]]
) -> None:
    """Kill a bwrap that is still setting up. Killing it mid-setup can orphan its child before
    that child arms --die-with-parent, so wait (milliseconds) for the child's pid and kill that too."""
    pid = None
    with contextlib.suppress(Exception, asyncio.CancelledError):
        pid, _ = await asyncio.wait_for(asyncio.shield(started), 30)
    fd = pidfd(pid) if pid is not None and proc.returncode is None else None
    if fd is not None:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        os.close(fd)
    kill(proc)
    await proc.wait()


def pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return None


def die_with_us() -> None:
    """In the forked child: SIGKILL bwrap if the server process dies (no orphaned Pods)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


async def wait_started(info_fd: int, ready_fd: int) -> tuple[int | None, bytes]:
    """The sandbox's init pid (from --info-fd) and the shim's ready byte (b"" if it died first).

    The blocking reads run in a thread that owns and closes both fds: if we are cancelled, the
    caller kills bwrap, the pipes hit EOF and the thread ends by itself."""
    return await asyncio.get_running_loop().run_in_executor(None, read_start, info_fd, ready_fd)


def read_start(info_fd: int, ready_fd: int) -> tuple[int | None, bytes]:
    try:
        return read_child_pid(info_fd), os.read(ready_fd, 1)
    finally:
        os.close(info_fd)
        os.close(ready_fd)


def read_child_pid(fd: int) -> int | None:
    """Read bwrap's info JSON to EOF (closing early would SIGPIPE bwrap mid-write)."""
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    found = CHILD_PID.search(data)
    return int(found.group(1)) if found else None
