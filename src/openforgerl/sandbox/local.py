"""The embedded default backend: one bubblewrap sandbox per rollout (see `bwrap.py` for the layout).

Design choice (measured, see benchmarks/rollouts.py): every `exec`/`spawn` is a *fresh* bwrap
process joined to the sandbox's network namespace and bound to its /workdir and /tmp, rather than
`nsenter` into a long-lived init. A fresh bwrap costs about the same as nsenter plus a process
start, needs no init to babysit, and gives each command its own PID namespace: a timeout kills the
outer bwrap and the kernel tears down the whole PID namespace, so no child survives (setsid,
double fork and ignored SIGTERM included). What persists across execs is exactly what a rollout
needs: files (/workdir, /tmp) and the network namespace (services on 127.0.0.1).

Networking (root): a namespace per sandbox with only `lo`, created in-process (`netns.py`); a
listener bound inside it at 127.0.0.1:<gateway port> is served by the host event loop and forwarded
to the gateway (`forwarder.py`). So `gateway_url` is `http://127.0.0.1:<port>` inside, and nothing
else is reachable. Not root: `--unshare-net` and no gateway (`gateway_url == ""`).

Limits: cgroup v1/v2 (`cgroups.py`) when `spec.limits` asks for any and the machine allows.
Cleanup (`aclose`): kill every process, remove cgroups, forwarder and namespace; the host dir is
renamed into `<root>/.trash` and deleted in the background (`LocalBackend.aclose` waits for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import resource
import shutil
import signal
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from openforgerl.sandbox import bwrap
from openforgerl.sandbox.base import (
    WORKDIR,
    CommandNotFoundError,
    ExecResult,
    SandboxError,
    SandboxSpec,
)
from openforgerl.sandbox.cgroups import CgroupGroup, open_cgroup
from openforgerl.sandbox.forwarder import Forwarder, open_forwarder
from openforgerl.sandbox.hostfiles import HostFilesMixin, write_bytes
from openforgerl.sandbox.netns import NetNamespace, netns_supported, open_netns

__all__ = ["DEFAULT_ROOT", "LocalBackend", "LocalSandbox", "raise_nofile_limit"]

log = logging.getLogger(__name__)
DEFAULT_ROOT = Path("/tmp/openforgerl-sbx")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MAX_OUTPUT = 32 * 1024 * 1024
_KILL_GRACE_S = 10.0
SETUP_ATTEMPTS = 4
SETUP_TIMEOUT_S = 120.0


def raise_nofile_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (each sandbox holds ~8 fds); returns it.

    Call once at program start when running hundreds of sandboxes (the CLI and benchmarks do).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


async def _read_capped(stream: asyncio.StreamReader | None) -> bytes:
    """Read to EOF, keeping at most MAX_OUTPUT bytes (the rest is drained and dropped)."""
    if stream is None:
        return b""
    buf = bytearray()
    while chunk := await stream.read(65536):
        if len(buf) < MAX_OUTPUT:
            buf += chunk[: MAX_OUTPUT - len(buf)]
    return bytes(buf)


def _started_wrapper(fd: int) -> list[str]:
    """Inside the sandbox: write one byte to the start pipe, then exec the real command."""
    return ["/bin/sh", "-c", 'printf 1 > "/proc/self/fd/$0"; exec "$@"', str(fd)]


async def _started(fd: int, proc: asyncio.subprocess.Process) -> bool:
    """For `spawn`: True once the command is about to run; False if bwrap died in setup (pipe EOF).

    A background process has no exit code to look at (see `_command_ran`), so a tiny `sh` wrapper
    inside writes one byte to the pipe right before it execs the command.
    """
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
        _kill_group(proc)
        raise SandboxError(f"bwrap did not start the command within {SETUP_TIMEOUT_S}s") from None
    finally:
        loop.remove_reader(fd)


def _command_ran(fd: int) -> bool:
    """Did bwrap get as far as running the command? (read its `--json-status-fd` after exit)

    bwrap writes `{"exit-code": N}` only when the sandboxed command ran and exited; when its own
    setup fails it writes none (measured, bwrap 0.8). The setup can fail transiently: bwrap re-mounts
    every submount of the read-only root, and when another process unmounts something meanwhile
    (a netns pin, a podman overlay) it dies with "Can't bind mount /oldroot/ ... Invalid argument" —
    26 times in 400 concurrent rollouts here before this check. Retrying is then safe.
    """
    os.set_blocking(fd, False)
    data = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            data += chunk
    for line in data.splitlines():
        with contextlib.suppress(ValueError):
            if "exit-code" in json.loads(line):
                return True
    return False


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the launcher (= the outer bwrap, via exec); die-with-parent takes the PID namespace down."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGKILL)


class LocalSandbox(HostFilesMixin):
    """One rollout's bubblewrap sandbox. Create through `LocalBackend.open_sandbox`."""

    def __init__(self, backend: LocalBackend, spec: SandboxSpec, sid: str, home: Path) -> None:
        self.id = sid
        self.spec = spec
        self.home = home  # <root>/<id>: work/, tmp/, logs/
        self.host_workdir: Path | None = home / "work"
        self.host_tmpdir = home / "tmp"
        self.gateway_url = ""
        self._backend = backend
        self.netns: NetNamespace | None = None
        self.cgroup: CgroupGroup | None = None
        self._forwarder: Forwarder | None = None
        self._procs: set[asyncio.subprocess.Process] = set()
        self._lost: str | None = None
        self._closed = False
        self._timer: asyncio.TimerHandle | None = None
        self._nspawn = 0

    # ---- launch -----------------------------------------------------------------------------
    def _command(self, argv: Sequence[str], cwd: str, status_fd: int | None = None) -> list[str]:
        prefix = self.cgroup.enter_argv() if self.cgroup else []
        if self.netns is not None:
            prefix = [*prefix, "nsenter", f"--net={self.netns.path}"]
        bargs = bwrap.sandbox_args(self._backend.root_args, self._backend.root, self.home / "work",
                                   self.host_tmpdir, unshare_net=self.netns is None,
                                   tmp_ro_binds=self._backend.tmp_ro_binds)
        if status_fd is not None:
            bargs = [*bargs, "--json-status-fd", str(status_fd)]
        return bwrap.wrap_command(prefix, bargs, argv, cwd)

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        base = {"PATH": os.environ.get("PATH", DEFAULT_PATH), "HOME": WORKDIR, "LANG": "C.UTF-8",
                "TMPDIR": "/tmp"}
        return {**base, **self.spec.env, **(env or {})}

    def _check_alive(self) -> None:
        if self._lost is not None:
            raise SandboxError(f"sandbox {self.id} lost: {self._lost}")
        if self._closed:
            raise SandboxError(f"sandbox {self.id} is closed")

    def _resolve(self, cmd: str, env: Mapping[str, str], cwd: str) -> None:
        """Raise CommandNotFoundError unless argv[0] is executable in the sandbox's view."""
        if "/" in cmd:
            candidates = [os.path.join(cwd, cmd)]
        else:
            candidates = [os.path.join(d, cmd) for d in env.get("PATH", DEFAULT_PATH).split(":") if d]
        for c in candidates:
            host = self.host_path(c)
            if host is not None and host.is_file() and os.access(host, os.X_OK):
                return
        raise CommandNotFoundError(f"{cmd!r} not found or not executable in sandbox {self.id}")

    def host_path(self, path: str) -> Path | None:
        """Where an inside path lives on the host (None: hidden inside, e.g. the sandboxes' root)."""
        p = Path(os.path.normpath(path))
        for inner, outer in ((Path(WORKDIR), self.home / "work"), (Path("/tmp"), self.host_tmpdir)):
            if p == inner or inner in p.parents:
                return outer / p.relative_to(inner)
        root = self._backend.root
        if p == root or root in p.parents or p.parts[1:2] in (("proc",), ("dev",)):
            return None
        return p

    def _prepare(self, argv: Sequence[str], env: Mapping[str, str] | None, cwd: str) -> dict[str, str]:
        self._check_alive()
        if not argv:
            raise CommandNotFoundError("empty argv")
        full_env = self._env(env)
        self._resolve(argv[0], full_env, cwd)
        return full_env

    async def _start(self, cmd: list[str], env: Mapping[str, str], stdin: int, stdout: int | object,
                     stderr: int | object, fd: int) -> asyncio.subprocess.Process:
        """Start the launcher with `fd` (the status pipe's write end) passed through; closes `fd`."""
        try:
            proc = await asyncio.create_subprocess_exec(*cmd, env=env, stdin=stdin, stdout=stdout,
                                                        stderr=stderr, pass_fds=(fd,))
        except OSError as e:
            raise SandboxError(f"cannot start bwrap: {e}") from e
        finally:
            os.close(fd)
        self._procs.add(proc)
        return proc

    # ---- Sandbox protocol -------------------------------------------------------------------
    async def exec(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                   cwd: str = WORKDIR, timeout_s: float | None = None,
                   stdin: bytes | None = None) -> ExecResult:
        """Run to completion; past `timeout_s` the whole PID namespace is killed (`timed_out`).

        A bwrap whose setup failed before the command ran (see `_command_ran`) is retried.
        """
        full_env = self._prepare(argv, env, cwd)
        failure = ""
        for _ in range(SETUP_ATTEMPTS):
            result, ran = await self._exec_once(argv, full_env, cwd, timeout_s, stdin)
            if ran:
                return result
            failure = result.stderr.decode(errors="replace")[-500:]
            self._check_alive()
        raise SandboxError(f"bwrap setup failed {SETUP_ATTEMPTS} times: {failure}")

    async def _exec_once(self, argv: Sequence[str], env: Mapping[str, str], cwd: str,
                         timeout_s: float | None, stdin: bytes | None) -> tuple[ExecResult, bool]:
        t0 = time.monotonic()
        sp = asyncio.subprocess
        r, w = os.pipe()
        try:
            proc = await self._start(self._command(argv, cwd, w), env,
                                     sp.PIPE if stdin is not None else sp.DEVNULL, sp.PIPE, sp.PIPE, w)
            try:
                result = await self._collect(proc, stdin, timeout_s, t0)
            finally:
                _kill_group(proc)
                self._procs.discard(proc)
            return result, result.timed_out or _command_ran(r)
        finally:
            os.close(r)

    async def _collect(self, proc: asyncio.subprocess.Process, stdin: bytes | None,
                       timeout_s: float | None, t0: float) -> ExecResult:
        readers = asyncio.gather(_read_capped(proc.stdout), _read_capped(proc.stderr))
        if stdin is not None and proc.stdin is not None:
            with contextlib.suppress(ConnectionError):
                proc.stdin.write(stdin)
                await proc.stdin.drain()
            proc.stdin.close()
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            timed_out = True
            _kill_group(proc)
            await asyncio.wait_for(proc.wait(), _KILL_GRACE_S)
        out, err = await asyncio.wait_for(readers, _KILL_GRACE_S)
        self._check_alive()  # lost while running -> infra, not the command's result
        rc = proc.returncode if proc.returncode is not None else -9
        return ExecResult(rc, out, err, timed_out, time.monotonic() - t0)

    async def spawn(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                    cwd: str = WORKDIR) -> None:
        """Start a background process; output goes to `<home>/logs/spawn-N.log` on the host."""
        full_env = self._prepare(argv, env, cwd)
        self._nspawn += 1
        fh = await asyncio.to_thread(_open_log, self.home / "logs" / f"spawn-{self._nspawn}.log")
        try:
            for _ in range(SETUP_ATTEMPTS):
                if await self._spawn_once(argv, full_env, cwd, fh):
                    return
                self._check_alive()
        finally:
            fh.close()  # the child keeps its own copy of the descriptor
        raise SandboxError(f"bwrap setup failed {SETUP_ATTEMPTS} times (see {fh.name})")

    async def _spawn_once(self, argv: Sequence[str], env: Mapping[str, str], cwd: str,
                          log: BinaryIO) -> bool:
        r, w = os.pipe()
        try:
            proc = await self._start(self._command([*_started_wrapper(w), *argv], cwd), env,
                                     asyncio.subprocess.DEVNULL, log, asyncio.subprocess.STDOUT, w)
            if await _started(r, proc):
                return True
        finally:
            os.close(r)
        await asyncio.wait_for(proc.wait(), _KILL_GRACE_S)
        self._procs.discard(proc)
        return False

    def _host_file(self, path: str) -> Path | None:
        """Host path under work/ or tmp/ after resolving symlinks; None otherwise."""
        host = self.host_path(path if path.startswith("/") else os.path.join(WORKDIR, path))
        if host is None:
            return None
        real = Path(os.path.realpath(host))
        for d in (self.home / "work", self.host_tmpdir):
            if real == d or d in real.parents:
                return host
        return None

    # ---- lifetime ---------------------------------------------------------------------------
    def expire(self, reason: str = "lifetime exceeded") -> None:
        """Mark the sandbox lost and kill everything in it (later calls raise SandboxError)."""
        if self._lost is None and not self._closed:
            log.warning("sandbox %s lost: %s", self.id, reason)
            self._lost = reason
            for proc in list(self._procs):
                _kill_group(proc)

    async def aclose(self) -> None:
        """Kill every process, then remove cgroups, forwarder, namespace and host dirs. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        await self._kill_all()
        await self._release()
        self._backend._forget(self)

    async def _kill_all(self) -> None:
        for proc in list(self._procs):
            _kill_group(proc)
        for proc in list(self._procs):
            with contextlib.suppress(TimeoutError, ProcessLookupError):
                await asyncio.wait_for(proc.wait(), _KILL_GRACE_S)
        self._procs.clear()

    async def _release(self) -> None:
        if self._forwarder is not None:
            await self._forwarder.aclose()
        if self.cgroup is not None:
            await _remove_cgroup(self.cgroup)
        if self.netns is not None:
            await self.netns.aclose()
        self._backend.discard_dir(self.home)


def _open_log(path: Path) -> BinaryIO:
    path.parent.mkdir(exist_ok=True)
    return path.open("ab")



async def _remove_cgroup(group: CgroupGroup) -> None:
    for _ in range(50):
        group.kill_all()
        if group.remove():
            return
        await asyncio.sleep(0.05)
    log.warning("cgroup %s not removed (processes still inside)", group.dirs)


class LocalBackend:
    """bubblewrap sandboxes under `root` (one dir per sandbox, hidden from every sandbox)."""

    name = "local"

    def __init__(self, root: Path | str = DEFAULT_ROOT, *, network: str = "auto") -> None:
        """`network`: "netns" (root; gateway forwarded), "none" (no network at all), "auto"."""
        self.root = Path(root).resolve()
        if network == "auto":
            network = "netns" if netns_supported() else "none"
        self.network = network
        self.root_args = bwrap.host_root_args()
        self.tmp_ro_binds = bwrap.host_paths_under_tmp(self.root)
        self._open: set[LocalSandbox] = set()
        self._deleting: set[asyncio.Future[None]] = set()

    async def open_sandbox(self, spec: SandboxSpec) -> LocalSandbox:
        """Dirs + files, namespace + forwarder, cgroup; SandboxError when any of it fails.

        Without root (`network="none"`) there is no forwarder, so a spec that needs the gateway
        (`gateway_port`) is refused rather than started with a dead `gateway_url`.
        """
        if spec.gateway_port and self.network != "netns":
            raise SandboxError("the gateway forwarder needs network='netns' (root); "
                               f"this backend has network={self.network!r}")
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
        if self.network == "netns":
            await asyncio.gather(asyncio.to_thread(_layout, sbx.home, spec), self._open_network(sbx, spec))
        else:
            await asyncio.to_thread(_layout, sbx.home, spec)
        if any((spec.limits.cpus, spec.limits.memory_mb, spec.limits.pids)):
            sbx.cgroup = open_cgroup(sbx.id, spec.limits)

    async def _open_network(self, sbx: LocalSandbox, spec: SandboxSpec) -> None:
        listen = ("127.0.0.1", spec.gateway_port) if spec.gateway_port else None
        sbx.netns = await open_netns(f"ofrl-{sbx.id}"[:60], listen)
        if sbx.netns.listener is not None:
            sbx._forwarder = await open_forwarder(sbx.netns.listener,
                                                  (spec.gateway_host, spec.gateway_port))
            sbx.gateway_url = f"http://127.0.0.1:{spec.gateway_port}"

    def _forget(self, sbx: LocalSandbox) -> None:
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


def _safe(rollout_id: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_" else "-" for c in rollout_id)
    return keep[:40] or "sbx"


def _layout(home: Path, spec: SandboxSpec) -> None:
    """Create work/ tmp/ logs/ and lay out `spec.files` and `spec.copy_dirs` under work/."""
    work = home / "work"
    for d in (home / "tmp", work / ".home"):
        d.mkdir(parents=True, exist_ok=True)
    (home / "tmp").chmod(0o1777)
    for rel, data in spec.files.items():
        write_bytes(_inside(work, rel), data)
    for src, rel in spec.copy_dirs.items():
        shutil.copytree(src, _inside(work, str(rel)), dirs_exist_ok=True, symlinks=True)


def _inside(work: Path, rel: str) -> Path:
    target = Path(os.path.normpath(work / rel.lstrip("/")))
    if target != work and work not in target.parents:
        raise SandboxError(f"file {rel!r} escapes /workdir")
    return target
