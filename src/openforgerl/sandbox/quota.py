"""A per-rollout disk quota: a size-limited tmpfs holding the sandbox's /workdir and /tmp (root only).

Why tmpfs: each exec is a fresh bwrap, so the quota must outlive one bwrap (its own `--size`
`--tmpfs` would not); a loop-mounted image needs an mkfs and a loop device per rollout. A tmpfs
mounted on the sandbox's host folder costs one `mount(2)` (in-process, no `mount` binary), and at
close a lazy unmount frees everything at once — no `rmtree` of the rollout's files. Its pages are
charged to the memory cgroup of the process that wrote them, so `memory_mb` bounds it too.
Filling it is the agent's doing: the write fails inside with ENOSPC and `full()` reports it.

No mount event reaches another sandbox's setup: bwrap binds only the allow-listed system folders
and its own rollout's folders (bwrap.py), none of which contains another rollout's folder.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from pathlib import Path

__all__ = ["full", "mount_quota", "quota_supported", "unmount_quota"]

log = logging.getLogger(__name__)
MS_NOSUID, MS_NODEV = 2, 4
MNT_DETACH = 2
FULL_BELOW_BYTES = 64 * 1024  # "full": less free than a couple of pages
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_warned = False


def quota_supported() -> bool:
    return os.geteuid() == 0


def mount_quota(path: Path, size_mb: int) -> bool:
    """Mount a tmpfs of `size_mb` MiB on `path` (created); False (warned once) when we may not."""
    global _warned
    path.mkdir(parents=True, exist_ok=True)
    if not quota_supported():
        if not _warned:
            log.warning("not root: no disk quota for sandboxes (disk_mb=%s is not enforced)", size_mb)
            _warned = True
        return False
    opts = f"size={size_mb}m,mode=0755".encode()
    if _libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount tmpfs on {path}: {os.strerror(err)}")
    return True


def unmount_quota(path: Path) -> None:
    """Lazy unmount: the files vanish now, even if something still holds one open."""
    if _libc.umount2(str(path).encode(), MNT_DETACH) != 0:
        err = ctypes.get_errno()
        log.warning("umount %s: %s", path, os.strerror(err))


def full(path: Path) -> bool:
    """True when the quota filesystem at `path` has (almost) no space left."""
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < FULL_BELOW_BYTES
