"""Reading a file the agent may have tampered with, without following it anywhere or blocking on it.

Everything under `/workdir` (and the sandbox's `/tmp`) was written by the agent, so the verifier and
`read_file` open it as hostile input (measured before this module: a `proof.txt` FIFO blocked a
worker thread forever — six of them starved every rollout of the process — and a `reward.json`
symlinked to `/etc/shadow` put the host's hashes into `verifier_log`):

- every component is opened with `O_NOFOLLOW` relative to the previous one (`openat`), so no
  symlink is followed, not even in a parent folder;
- the last one also with `O_NONBLOCK` (opening a FIFO never waits for a writer), then `fstat`: only
  a regular file is read (no FIFO, socket, device or folder);
- at most `limit` bytes (default 8 MiB) — a bigger file is refused, not truncated.

A breach raises `TamperError` (the agent's doing: reward 0, `agent_failed`); a missing file raises
`FileNotFoundError` as usual. Pure standard library: the verifier imports it inside its sandbox.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from openforgerl.sandbox.base import TamperError

__all__ = ["MAX_READ_BYTES", "read_under", "write_under"]

MAX_READ_BYTES = 8 * 1024 * 1024
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


def _parts(rel: str) -> list[str]:
    parts = [p for p in Path(rel.lstrip("/")).parts if p not in ("", ".")]
    if not parts or ".." in parts:
        raise TamperError(f"{rel!r}: not a plain relative path")
    return parts


def _open(name: str, flags: int, dir_fd: int, shown: str, mode: int = 0o644) -> int:
    try:
        return os.open(name, flags, mode, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):  # O_NOFOLLOW hit a link / a parent is no folder
            raise TamperError(f"{shown}: a symlink or not a folder on the way (not followed)") from None
        if e.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO without reader (O_NONBLOCK) / a folder
            raise TamperError(f"{shown}: not a regular file") from None
        if e.errno in (errno.EACCES, errno.EPERM):  # the agent chmod-ed it away
            raise TamperError(f"{shown}: not readable ({os.strerror(e.errno)})") from None
        raise


def _walk(root: Path | str, parts: list[str], shown: str, *, create: bool) -> int:
    """An fd of the folder holding the last part, every step without following links."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        for name in parts[:-1]:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
            nxt = _open(name, _DIR_FLAGS, fd, shown)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_fd(fd: int, shown: str, limit: int) -> bytes:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise TamperError(f"{shown}: not a regular file (mode {stat.filemode(st.st_mode)})")
    if st.st_size > limit:
        raise TamperError(f"{shown}: {st.st_size} bytes, over the {limit} byte limit")
    chunks, total = [], 0
    while chunk := os.read(fd, 1 << 20):
        total += len(chunk)
        if total > limit:  # grew while read (only possible if a writer survived)
            raise TamperError(f"{shown}: over the {limit} byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


def read_under(root: Path | str, rel: str, *, limit: int = MAX_READ_BYTES) -> bytes:
    """The bytes of `root/rel`, refusing links, non-regular files and files over `limit`."""
    parts = _parts(rel)
    shown = "/".join(parts)
    fd = _walk(root, parts, shown, create=False)
    try:
        leaf = _open(parts[-1], _FILE_FLAGS, fd, shown)
    finally:
        os.close(fd)
    try:
        return _read_fd(leaf, shown, limit)
    finally:
        os.close(leaf)


def write_under(root: Path | str, rel: str, data: bytes) -> None:
    """Write `root/rel` (parents created), refusing links and non-regular files on the way."""
    parts = _parts(rel)
    shown = "/".join(parts)
    fd = _walk(root, parts, shown, create=True)
    try:
        leaf = _open(
            parts[-1],
            os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY,
            fd,
            shown,
        )
    finally:
        os.close(fd)
    try:
        if not stat.S_ISREG(os.fstat(leaf).st_mode):
            raise TamperError(f"{shown}: not a regular file")
        os.ftruncate(leaf, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(leaf, view) :]
    finally:
        os.close(leaf)
