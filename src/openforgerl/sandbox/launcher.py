"""How one bwrap launch runs on the host: the start pipe, the init's PID, capped output, and the kill.

`LocalSandbox` starts every command as a fresh bwrap (see `local.py`); these are the pieces of that
protocol that hold no sandbox state: a tiny `sh` writes one byte to the start pipe right before it execs
the command (so a setup failure is told apart from a run), bwrap's `--json-status-fd` names the
sandbox init, and killing the launcher takes the whole PID namespace down.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import BinaryIO

from openforgerl.sandbox.base import SandboxError

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MAX_OUTPUT = 32 * 1024 * 1024
KILL_GRACE_S = 10.0
SETUP_TIMEOUT_S = 120.0


async def read_capped(stream: asyncio.StreamReader | None) -> bytes:
    """Read to EOF, keeping at most MAX_OUTPUT bytes (the rest is drained and dropped)."""
    if stream is None:
        return b""
    buf = bytearray()
    while chunk := await stream.read(65536):
        if len(buf) < MAX_OUTPUT:
            buf += chunk[: MAX_OUTPUT - len(buf)]
    return bytes(buf)


def started_wrapper(fd: int) -> list[str]:
    """Inside the sandbox: write one byte to the start pipe, then exec the real command.

    Via /proc/self/fd: dash takes only one-digit fds in `>&N`. The command inherits the pipe's write
    end; harmless — the byte is written before it runs, so it cannot make a run look unstarted."""
    return ["/bin/sh", "-c", 'printf 1 > "/proc/self/fd/$0" && exec "$@"', str(fd)]


def drain(fd: int) -> bytes:
    os.set_blocking(fd, False)
    data = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            data += chunk
    return data


def child_pid(status: bytes) -> int | None:
    """The sandbox init's host PID from bwrap's `--json-status-fd` (its first document)."""
    for line in status.splitlines():
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            pid = json.loads(line).get("child-pid")
            if isinstance(pid, int):
                return pid
    return None


def gone(pid: int) -> bool:
    """The process left (or is a zombie): its PID namespace's other processes are already dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")


def is_namespace_init(pid: int) -> bool:
    """`pid` is PID 1 of a child PID namespace (its NSpid line ends in 1): still our sandbox init, not a
    recycled PID."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                ids = line.split()[1:]
                return len(ids) > 1 and ids[-1] == "1"
    except OSError:
        pass
    return False


async def wait_gone(pid: int | None) -> None:
    """Wait until the sandbox init `pid` is gone: it dies last (the kernel kills and reaps the rest
    of its PID namespace first), so afterwards no process of the command is left anywhere.

    Normally the launcher's death kills it (`--die-with-parent`); a launcher killed while the child was
    still being set up can leave it orphaned before its parent-death signal is armed (seen once under
    heavy load: a 0.5 s timeout, the init still running `sleep 30` 10 s later), so the init itself is
    killed too when it outlives a short grace: killing a PID namespace's init kills the namespace."""
    if pid is None:
        return
    deadline = time.monotonic() + KILL_GRACE_S
    grace = time.monotonic() + 0.5
    while not gone(pid):
        if time.monotonic() > grace and is_namespace_init(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise SandboxError(f"sandbox init {pid} still alive {KILL_GRACE_S}s after its launcher")
        await asyncio.sleep(0.005)


async def started(fd: int, proc: asyncio.subprocess.Process) -> bool:
    """For `spawn`: True once the command is about to run; False if bwrap died in setup (pipe EOF)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[bool] = loop.create_future()

    def readable() -> None:
        try:
            data = os.read(fd, 1)
        except BlockingIOError:
            return
        if not fut.done():
            fut.set_result(bool(data))

    os.set_blocking(fd, False)
    loop.add_reader(fd, readable)
    try:
        return await asyncio.wait_for(fut, SETUP_TIMEOUT_S)
    except TimeoutError:
        kill_group(proc)
        raise SandboxError(f"bwrap did not start the command within {SETUP_TIMEOUT_S}s") from None
    finally:
        loop.remove_reader(fd)


def kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the launcher (= the outer bwrap, via exec); die-with-parent takes the PID namespace down."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGKILL)


def open_log(path: Path) -> BinaryIO:
    path.parent.mkdir(exist_ok=True)
    return path.open("ab")
