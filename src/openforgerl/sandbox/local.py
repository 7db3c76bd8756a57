"""The embedded default backend: one bubblewrap sandbox per rollout (see `bwrap.py` for the layout).

Design choice (measured, see benchmarks/rollouts.py): every `exec`/`spawn` is a *fresh* bwrap
process joined to the sandbox's network namespace and bound to its /workdir and /tmp, rather than
`nsenter` into a long-lived init. A fresh bwrap costs about the same as nsenter plus a process
start, needs no init to babysit, and gives each command its own PID namespace: a timeout kills the
outer bwrap and the kernel tears down the whole PID namespace, so no child survives (setsid,
double fork and ignored SIGTERM included). What persists across execs is exactly what a rollout
needs: files (/workdir, /tmp) and the network namespace (services on 127.0.0.1).

Exec semantics: a command runs at most once. A tiny `sh` inside writes one byte to a pipe right
before it execs the command; only a bwrap that exited by itself *without* that byte (its setup
failed, nothing of the command ran) is retried. A launcher killed by a signal we did not send is
reported (`ExecResult.killed_by_signal`), never re-run: before this, a harness SIGKILLed from outside
was taken for a setup failure and run again in the same sandbox, mixing two runs in one call log.

Networking (root): a namespace per sandbox with only `lo`, created in-process (`netns.py`); a
listener bound inside it at 127.0.0.1:<gateway port> is served by the host event loop and forwarded
to the gateway (`forwarder.py`). So `gateway_url` is `http://127.0.0.1:<port>` inside, and nothing
else is reachable. Not root: `--unshare-net` and no gateway (`gateway_url == ""`).

Limits (on by default, `DEFAULT_LIMITS`): cgroup v1/v2 (`cgroups.py`) for CPU, memory and pids; a
size-limited tmpfs holding /workdir and /tmp (`quota.py`). Breaches are reported per command in
`ExecResult.limits_hit`. Inside the CPU quota, services (`spawn`) have ten times the weight of execs
(the agent), so the agent cannot starve the environment it is judged by.

The verifier (`run_verifier`) runs after every exec of the sandbox has ended and its PID namespace
is gone, in a fresh bwrap that sees the workdir read-only, an empty /tmp and its own folders.

Cleanup (`aclose`): kill every process, remove cgroups, forwarder and namespace, unmount the quota;
the host dir is renamed into `<root>/.trash` and deleted in the background (`LocalBackend.aclose`
waits for it). What a killed process could not clean up, the next backend's first `open_sandbox` under
the same root does (`orphans.py`).

Modules: this one holds the backend (`LocalBackend`); the sandbox is `local_sandbox.py`, one launch's
host-side protocol (start pipe, init PID, kill) `launcher.py`, the link-refusing file work on its folders
`host_tree.py`.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path

from openforgerl.sandbox import bwrap, quota
from openforgerl.sandbox.base import Limits, SandboxError, SandboxSpec
from openforgerl.sandbox.cgroups import open_cgroup
from openforgerl.sandbox.forwarder import open_forwarder
from openforgerl.sandbox.host_tree import copy_tree, inside
from openforgerl.sandbox.hostfiles import write_bytes
from openforgerl.sandbox.local_sandbox import LocalSandbox
from openforgerl.sandbox.netns import netns_supported, open_netns
from openforgerl.sandbox.orphans import OWNER, owner_mark, sweep

__all__ = ["DEFAULT_ROOT", "LocalBackend", "LocalSandbox", "copy_tree", "raise_nofile_limit"]

DEFAULT_ROOT = Path("/tmp/openforgerl-sbx")
log = logging.getLogger(__name__)

DEFAULT_LIMITS = Limits(cpus=2.0, memory_mb=4096, pids=1024, disk_mb=1024)
"""On unless a spec or the backend says otherwise (`0` turns one off). Sized for one harness CLI plus
the task's service: a Node CLI peaks at a few hundred MiB and ~30 threads (each thread counts against
`pids`); Claw workdirs hold kilobytes. The tmpfs pages of /workdir and /tmp count against memory too."""


def raise_nofile_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (each sandbox holds ~8 fds); returns it.

    Call once at program start when running hundreds of sandboxes (the CLI and benchmarks do).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


class LocalBackend:
    """bubblewrap sandboxes under `root` (one dir per sandbox, hidden from every sandbox)."""

    name = "local"

    def __init__(
        self,
        root: Path | str = DEFAULT_ROOT,
        *,
        network: str = "auto",
        ro_binds: Sequence[Path | str] = (),
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        """`network`: "netns" (root; gateway forwarded), "none" (no network at all), "auto".

        `ro_binds`: host folders shown read-only in every sandbox besides `bwrap.SYSTEM_RO_BINDS` and
        the project's own Python, package and tools dir (e.g. a harness CLI installed elsewhere).
        `limits`: what a spec's `None` limits become (`Limits(0, 0, 0, 0)`: none at all).
        """
        self.limits = limits
        self.root = Path(root).resolve()
        if network == "auto":
            network = "netns" if netns_supported() else "none"
        self.network = network
        self.root_args = bwrap.system_args()
        self.system_mounts = bwrap.system_mounts()
        self.ro_binds = bwrap.runtime_ro_binds(ro_binds)
        self._open: set[LocalSandbox] = set()
        self._deleting: set[asyncio.Future[None]] = set()
        self._swept = False

    async def open_sandbox(self, spec: SandboxSpec) -> LocalSandbox:
        """Dirs + files, namespace + forwarder, cgroup; SandboxError when any of it fails.

        Without root (`network="none"`) there is no forwarder, so a spec that needs the gateway
        (`gateway_port`) is refused rather than started with a dead `gateway_url`.
        """
        if spec.gateway_port and self.network != "netns":
            raise SandboxError(
                "the gateway forwarder needs network='netns' (root); "
                f"this backend has network={self.network!r}"
            )
        if not self._swept:
            self._swept = True
            if swept := await asyncio.to_thread(sweep, self.root):
                log.warning("removed %d sandbox(es) under %s left by processes that ended", swept, self.root)
        sid = f"{_safe(spec.rollout_id)}-{uuid.uuid4().hex[:6]}"
        sbx = LocalSandbox(self, spec, sid, self.root / sid)
        self._open.add(sbx)
        try:
            await self._prepare(sbx, spec)
        except BaseException as e:
            await sbx.aclose()
            if isinstance(e, (SandboxError, asyncio.CancelledError)):
                raise
            raise SandboxError(f"cannot open sandbox {sid}: {e}") from e
        sbx._timer = asyncio.get_running_loop().call_later(spec.lifetime_s, sbx.expire)
        return sbx

    async def _prepare(self, sbx: LocalSandbox, spec: SandboxSpec) -> None:
        limits = sbx.limits = spec.limits.resolved(self.limits)
        await asyncio.to_thread(_own, sbx.home)
        if limits.disk_mb:
            sbx.quota = quota.mount_quota(sbx.fs, limits.disk_mb)
        if self.network == "netns":
            await asyncio.gather(asyncio.to_thread(_layout, sbx.home, spec), self._open_network(sbx, spec))
        else:
            await asyncio.to_thread(_layout, sbx.home, spec)
        if any((limits.cpus, limits.memory_mb, limits.pids)):
            sbx.cgroup = open_cgroup(sbx.id, limits)

    async def _open_network(self, sbx: LocalSandbox, spec: SandboxSpec) -> None:
        listen = ("127.0.0.1", spec.gateway_port) if spec.gateway_port else None
        sbx.netns = await open_netns(f"ofrl-{sbx.id}"[:60], listen)
        if sbx.netns.listener is not None:
            sbx._forwarder = await open_forwarder(sbx.netns.listener, (spec.gateway_host, spec.gateway_port))
            sbx.gateway_url = f"http://127.0.0.1:{spec.gateway_port}"

    def forget(self, sbx: LocalSandbox) -> None:
        self._open.discard(sbx)

    def discard_dir(self, home: Path) -> None:
        """Move a closed sandbox's dir to `<root>/.trash` now, delete it in the background.

        Why: `rmdir` costs ~3 ms per directory on this VM's ext4 (rename: 0.01 ms), which made
        deletion the largest part of a sandbox's lifecycle. `aclose` of the backend waits for
        every pending deletion, so nothing is left once the backend is closed.
        """
        trash = self.root / ".trash" / home.name
        try:
            trash.parent.mkdir(exist_ok=True)
            home.rename(trash)
        except OSError:
            trash = home
        task = asyncio.ensure_future(asyncio.to_thread(shutil.rmtree, trash, True))
        self._deleting.add(task)
        task.add_done_callback(self._deleting.discard)

    async def aclose(self) -> None:
        """Close every sandbox still open and finish every pending directory deletion."""
        await asyncio.gather(*(s.aclose() for s in list(self._open)), return_exceptions=True)
        await asyncio.gather(*list(self._deleting), return_exceptions=True)
        await asyncio.to_thread(shutil.rmtree, self.root / ".trash", True)


def _own(home: Path) -> None:
    """Name this process as the sandbox's owner before anything that outlives it is made."""
    home.mkdir(parents=True, exist_ok=True)
    (home / OWNER).write_text(owner_mark())


def _safe(rollout_id: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_" else "-" for c in rollout_id)
    return keep[:40] or "sbx"


def _layout(home: Path, spec: SandboxSpec) -> None:
    """Create fs/work/ fs/tmp/ and lay out `spec.files` and `spec.copy_dirs` under fs/work/."""
    work, tmp = home / "fs" / "work", home / "fs" / "tmp"
    for d in (tmp, work / ".home"):
        d.mkdir(parents=True, exist_ok=True)
    tmp.chmod(0o1777)
    for rel, data in spec.files.items():
        write_bytes(inside(work, rel), data)
    for src, dest in spec.copy_dirs.items():
        shutil.copytree(src, inside(work, str(dest)), dirs_exist_ok=True, symlinks=True)
