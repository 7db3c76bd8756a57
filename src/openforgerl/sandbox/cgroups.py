"""CPU / memory / pids limits through cgroups v1 or v2, whichever the machine has.

bwrap has no cgroup support, so the backend creates a group per sandbox and a launcher moves
itself into it before exec'ing bwrap (`enter_argv`), so every process of the sandbox is born inside
it. Detection is at runtime: v2 when `/sys/fs/cgroup/cgroup.controllers` exists, else v1 per
controller dirs (this machine kind is v1 hybrid). Without write access (not root) limits are
skipped with one warning — a sandbox without limits is still isolated.

CPU inside a sandbox is split in two child groups under the sandbox's quota: `service` (what the
backend `spawn`s: the task's tool service, the GUI screen and its Chromium) with ten times the weight
of `agent` (every `exec`: the harness and all it starts). So an agent that busy-loops with hundreds of
processes still leaves the service ~90 % of the quota when it wants it, and cannot starve a screenshot
into the environment's fault (infra, retried) to dodge a 0. Measured here with 200 busy loops in the
agent: 50 ms of the service's CPU took 3.9 s of wall time in one shared group, 0.050 s with the split.
Memory and pids stay one shared group, as their breaches are counted (`breaches`); so is CPU saturation
(`cpu`: seconds the quota throttled the sandbox), for a service fault that happens anyway.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

from openforgerl.sandbox.base import Limits

__all__ = ["CgroupGroup", "cgroup_mode", "existing_cgroup", "open_cgroup"]

log = logging.getLogger(__name__)
ROOT = Path("/sys/fs/cgroup")
PARENT = "openforgerl"
ROLES = ("agent", "service")
CPU_SHARES_V1 = {"agent": "1024", "service": "10240"}  # cpu.shares: 1:10
CPU_WEIGHT_V2 = {"agent": "100", "service": "1000"}  # cpu.weight: 1:10
CPU_BREACH_S = 5.0
"""Throttled seconds (summed over CPUs, as the kernel counts them) that count as a CPU breach: the
sandbox ran at its quota long enough to delay a screenshot (bounded at 10 s a try) by seconds. Only a
quota below the machine's cores can throttle: measured here (2 cores) with 200 busy loops in the agent,
0.01 s at the default 2 CPUs, 26 s over 17 s at 0.5 CPU."""
_warned = False


def cgroup_mode() -> str | None:
    """`"v2"`, `"v1"` or None (no writable cgroup fs)."""
    if not os.access(ROOT, os.W_OK) and os.geteuid() != 0:
        return None
    if (ROOT / "cgroup.controllers").exists():
        return "v2"
    if (ROOT / "memory").is_dir() and os.access(ROOT / "memory", os.W_OK):
        return "v1"
    return None


def _v1_settings(limits: Limits) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {"pids": {}}
    if limits.memory_mb:
        b = str(limits.memory_mb * 1024 * 1024)
        out["memory"] = {"memory.limit_in_bytes": b, "memory.memsw.limit_in_bytes": b}
    if limits.cpus:
        out["cpu"] = {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": str(int(limits.cpus * 100000))}
    if limits.pids:
        out["pids"] = {"pids.max": str(limits.pids)}
    return out


def _v2_settings(limits: Limits) -> dict[str, str]:
    out: dict[str, str] = {}
    if limits.memory_mb:
        out["memory.max"] = str(limits.memory_mb * 1024 * 1024)
        out["memory.swap.max"] = "0"
    if limits.cpus:
        out["cpu.max"] = f"{int(limits.cpus * 100000)} 100000"
    if limits.pids:
        out["pids.max"] = str(limits.pids)
    return out


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as e:  # e.g. memsw absent when swap accounting is off
        if not path.name.startswith("memory.memsw") and path.name != "memory.swap.max":
            raise OSError(f"cannot set {path}: {e}") from e


@dataclass
class CgroupGroup:
    """One sandbox's cgroup dirs (one per v1 controller, or one v2 dir) and, under the CPU one, a child
    per role (`ROLES`; absent when the sandbox has no CPU limit)."""

    dirs: list[Path]
    cpu_dir: Path | None = None
    children: dict[str, Path] = field(default_factory=dict)

    def enter_argv(self, role: str = "agent") -> list[str]:
        """A launcher prefix that moves itself into the sandbox's groups (the CPU one: its `role`'s
        child), then execs the rest of argv."""
        targets = [
            self.children[role] if d == self.cpu_dir and role in self.children else d for d in self.dirs
        ]
        writes = "; ".join(f'echo $$ > "{d}/cgroup.procs"' for d in targets)
        return ["/bin/sh", "-c", f'{writes} && exec "$@"', "cgroup-enter"]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in [*self.children.values(), *self.dirs]:
            with contextlib.suppress(OSError):
                found |= {int(p) for p in (d / "cgroup.procs").read_text().split()}
        return found

    def throttled_s(self) -> float:
        """Seconds the sandbox's CPU quota held it back so far
        (v1 `throttled_time` ns, v2 `throttled_usec`)."""
        if self.cpu_dir is None:
            return 0.0
        stat = _counters(self.cpu_dir / "cpu.stat")
        return stat.get("throttled_time", 0) / 1e9 + stat.get("throttled_usec", 0) / 1e6

    def breaches(self) -> dict[str, int]:
        """Counters of limit hits so far: {"memory": OOM kills, "pids": forks refused at pids.max,
        "cpu": whole `CPU_BREACH_S` spans the quota throttled the sandbox}.

        Compared before/after a command (`LocalSandbox.exec`) to tell an OOM kill or a fork bomb
        from an ordinary failure, so the rollout records *why* the agent failed.
        """
        found = {"memory": 0, "pids": 0, "cpu": int(self.throttled_s() // CPU_BREACH_S)}
        for d in self.dirs:
            found["memory"] += _counter(d / "memory.oom_control", "oom_kill")  # v1
            found["memory"] += _counter(d / "memory.events", "oom_kill")  # v2
            found["pids"] += _counter(d / "pids.events", "max")
        return found

    def kill_all(self) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> bool:
        """rmdir every dir; False while processes are still inside (caller retries)."""
        ok = True
        for d in [*self.children.values(), *self.dirs]:  # children before their parent
            try:
                d.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                ok = False
        return ok


def _counters(path: Path) -> dict[str, int]:
    """A flat-keyed cgroup file (`name value` lines) as a dict; {} when it is absent."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    pairs = (line.partition(" ") for line in lines)
    return {name: int(value) for name, _, value in pairs if value.strip().isdigit()}


def _counter(path: Path, key: str) -> int:
    return _counters(path).get(key, 0)


def _make_v1(name: str, limits: Limits) -> CgroupGroup:
    group = CgroupGroup([])
    for ctrl, settings in _v1_settings(limits).items():
        d = ROOT / ctrl / PARENT / name
        d.mkdir(parents=True, exist_ok=True)
        group.dirs.append(d)
        for key, value in settings.items():
            _write(d / key, value)
        if ctrl == "cpu":
            group.cpu_dir = d
            for role in ROLES:
                (d / role).mkdir(exist_ok=True)
                _write(d / role / "cpu.shares", CPU_SHARES_V1[role])
                group.children[role] = d / role
    return group


def _make_v2(name: str, limits: Limits) -> CgroupGroup:
    parent = ROOT / PARENT
    parent.mkdir(exist_ok=True)
    with contextlib.suppress(OSError):
        (parent / "cgroup.subtree_control").write_text("+cpu +memory +pids")
    d = parent / name
    d.mkdir(exist_ok=True)
    settings = _v2_settings(limits)
    for key, value in settings.items():
        _write(d / key, value)
    group = CgroupGroup([d])
    if "cpu.max" in settings:  # v2 keeps processes in leaves only: both roles get a child
        group.cpu_dir = d
        (d / "cgroup.subtree_control").write_text("+cpu")
        for role in ROLES:
            (d / role).mkdir(exist_ok=True)
            _write(d / role / "cpu.weight", CPU_WEIGHT_V2[role])
            group.children[role] = d / role
    return group


def existing_cgroup(name: str) -> CgroupGroup | None:
    """The group `open_cgroup(name, ...)` made, from the folders still there (another process made it):
    None when there are none."""
    mode = cgroup_mode()
    if mode is None:
        return None
    bases = [ROOT / PARENT] if mode == "v2" else [ROOT / ctrl / PARENT for ctrl in ("cpu", "memory", "pids")]
    group = CgroupGroup([d for d in (base / name for base in bases) if d.is_dir()])
    for d in group.dirs:
        for role in ROLES:
            if (d / role).is_dir():
                group.cpu_dir, group.children[role] = d, d / role
    return group if group.dirs else None


def open_cgroup(name: str, limits: Limits) -> CgroupGroup | None:
    """Create the sandbox's group with `limits`; None (and a warning, once) when unsupported."""
    global _warned
    mode = cgroup_mode()
    if mode is None:
        if not _warned:
            log.warning("cgroups not writable here: sandbox limits %s are not enforced", limits)
            _warned = True
        return None
    return _make_v2(name, limits) if mode == "v2" else _make_v1(name, limits)
