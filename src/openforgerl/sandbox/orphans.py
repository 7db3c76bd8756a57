"""Sandboxes a killed process left behind, removed by the next backend opening one under the same root.

`LocalSandbox.aclose` undoes a sandbox; a process killed outright (`kill -9`, the kernel's OOM killer,
a scheduler's preemption) cannot. What ran inside ends with it (bwrap `--die-with-parent`, one PID
namespace per command) and so do the network namespaces (held by its file descriptors), but three
things stay: the sandbox's folder, its cgroups and its quota tmpfs, whose pages (up to `disk_mb` per
sandbox) stay in memory until it is unmounted. Benchmark runs killed at their time limit on one machine
left 36 such mounts and 40 cgroups behind.

So each sandbox's folder names its owner (`owner`: the PID and the start time the kernel gives that
process, so a PID reused by another process is not taken for it), and the first `open_sandbox` of a
`LocalBackend` removes every sandbox under its root, and under `<root>/.trash`, whose owner has ended:
what is still running in its cgroups killed, the tmpfs unmounted, the cgroups and the folder removed.
A live process's sandboxes (another run sharing the root) are never touched.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

from openforgerl.sandbox import quota
from openforgerl.sandbox.cgroups import existing_cgroup

__all__ = ["OWNER", "owner_alive", "owner_mark", "sweep"]

OWNER = "owner"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks after boot (`/proc/<pid>/stat` field 22); None: gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name, in parentheses, may hold spaces
    return fields[19] if len(fields) > 19 else None


def owner_mark(pid: int | None = None) -> str:
    """`<pid> <start time>` of `pid` (default: this process)."""
    pid = os.getpid() if pid is None else pid
    return f"{pid} {_start_time(pid)}"


def owner_alive(mark: str) -> bool:
    """Whether the process `mark` names still runs; an unreadable mark counts as alive (never swept)."""
    pid, _, started = mark.strip().partition(" ")
    if not pid.isdigit() or not started:
        return True
    return _start_time(int(pid)) == started


def _orphans(root: Path) -> list[Path]:
    found: list[Path] = []
    for parent in (root, root / ".trash"):
        with contextlib.suppress(OSError):
            for home in parent.iterdir():
                try:
                    mark = (home / OWNER).read_text()
                except OSError:  # not a sandbox, or one of another version: left alone
                    continue
                if not owner_alive(mark):
                    found.append(home)
    return found


def _remove(home: Path) -> bool:
    """Undo what `LocalBackend._prepare` did for a sandbox whose owner has ended; False when a cgroup
    still holds a process after the kill (left for the next sweep)."""
    fs = home / "fs"
    if os.path.ismount(fs):
        quota.unmount_quota(fs)
    group = existing_cgroup(home.name)
    if group is not None:
        group.kill_all()
        for _ in range(20):  # a killed process leaves its cgroup once the kernel has reaped it
            if group.remove():
                break
            time.sleep(0.05)
        else:
            return False
    shutil.rmtree(home, ignore_errors=True)
    return True


def sweep(root: Path) -> int:
    """Remove the sandboxes under `root` whose owner has ended; how many were removed."""
    return sum(_remove(home) for home in _orphans(root))
