"""Loopback-only network namespaces, created and entered in-process (root only).

Why in-process: `ip netns add` + `ip link set lo up` are two process starts (~7 ms together here),
as much as the whole bwrap start. The same syscalls from a worker thread cost microseconds:
`unshare(CLONE_NEWNET)` moves only the *calling thread* into a fresh namespace, where we bring `lo`
up, bind the forwarder's listening socket (a socket stays in the namespace it was created in), and
keep an fd to the namespace, so that `nsenter --net=/proc/<pid>/fd/<fd>` (bwrap execs) can join
it; podman gets a bind-mount pin at `/run/netns/<name>` instead (`pin=True`). Then the thread
`setns`es back home.

Python 3.11 has no `os.setns`/`os.unshare`, hence ctypes. Every namespace switch runs on one
dedicated thread (`_NS_THREAD`) so no event-loop or pool thread is ever left in a sandbox namespace.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import fcntl
import os
import socket
import struct
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

__all__ = ["NETNS_DIR", "NetNamespace", "netns_supported", "open_netns"]

NETNS_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
MS_BIND = 4096
MNT_DETACH = 2
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_NS_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openforgerl-netns")
T = TypeVar("T")


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def netns_supported() -> bool:
    """True when we may create network namespaces (root with CAP_SYS_ADMIN)."""
    return os.geteuid() == 0 and Path("/proc/self/ns/net").exists()


def _lo_up() -> None:
    """Bring `lo` up in the calling thread's namespace (ioctl, no `ip` process)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH14s", b"lo", 0, b"\0" * 14)
        flags = struct.unpack("16sH14s", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b"\0" * 14))


def _listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def _in_new_netns(path: Path | None, fn: Callable[[], T]) -> tuple[int, T]:
    """Create a namespace (pinned at `path` if given), run `fn` in it, come back; (ns fd, result).

    Runs on the ns thread only: `unshare` and `setns` act on the calling thread.
    """
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
        try:
            own = f"/proc/self/task/{threading.get_native_id()}/ns/net"
            if path is not None:
                _pin(own, path)
            nsfd = os.open(own, os.O_RDONLY)  # O_CLOEXEC: never inherited by children
            _lo_up()
            return nsfd, fn()
        finally:
            _check(_libc.setns(home, CLONE_NEWNET), "setns(home)")
    finally:
        os.close(home)


def _pin(own: str, path: Path) -> None:
    NETNS_DIR.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0o444))
    _check(_libc.mount(own.encode(), str(path).encode(), None, MS_BIND, None), f"mount {path}")


def _delete(path: Path) -> None:
    _libc.umount2(str(path).encode(), MNT_DETACH)
    path.unlink(missing_ok=True)


@dataclass
class NetNamespace:
    """A loopback-only namespace, held by an fd (and pinned at `/run/netns/<name>` if asked)."""

    name: str
    fd: int | None
    pinned: Path | None
    listener: socket.socket | None

    @property
    def path(self) -> Path:
        """A path other processes can join (`nsenter --net=`, podman `ns:`) while we are alive."""
        if self.pinned is not None:
            return self.pinned
        return Path(f"/proc/{os.getpid()}/fd/{self.fd}")

    async def aclose(self) -> None:
        """Close the listener and our fd, unpin; the namespace vanishes with its last process."""
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.pinned is not None:
            await asyncio.get_running_loop().run_in_executor(_NS_THREAD, _delete, self.pinned)
            self.pinned = None


async def open_netns(name: str, listen: tuple[str, int] | None = None, *, pin: bool = False) -> NetNamespace:
    """A fresh namespace with `lo` up; `listen` (host, port) bound inside it if given.

    Unpinned (default) it is reachable as `/proc/<our pid>/fd/<fd>`: no mount is created, so no
    mount event races other sandboxes' bwrap setup (see local.py). `pin=True` bind-mounts it at
    `/run/netns/<name>` for tools that want a stable path (podman records the path it is given).
    """
    path = NETNS_DIR / name if pin else None

    def build() -> socket.socket | None:
        return _listen(*listen) if listen else None

    loop = asyncio.get_running_loop()
    try:
        nsfd, sock = await loop.run_in_executor(_NS_THREAD, _in_new_netns, path, build)
    except BaseException:
        if path is not None:
            await loop.run_in_executor(_NS_THREAD, _delete, path)
        raise
    return NetNamespace(name=name, fd=nsfd, pinned=path, listener=sock)
