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
waits for it).
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
import stat
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from openforgerl.sandbox import bwrap, quota
from openforgerl.sandbox.base import (
    WORKDIR,
    CommandNotFoundError,
    ExecResult,
    Limits,
    SandboxError,
    SandboxSpec,
    VerifierRun,
)
from openforgerl.sandbox.cgroups import CgroupGroup, open_cgroup
from openforgerl.sandbox.forwarder import Forwarder, open_forwarder
from openforgerl.sandbox.hostfiles import HostFilesMixin, write_bytes
from openforgerl.sandbox.netns import NetNamespace, netns_supported, open_netns
from openforgerl.sandbox.safefile import MAX_READ_BYTES, read_under, write_under

__all__ = ["DEFAULT_ROOT", "LocalBackend", "LocalSandbox", "WorkdirCopy", "copy_tree", "raise_nofile_limit"]

log = logging.getLogger(__name__)
DEFAULT_ROOT = Path("/tmp/openforgerl-sbx")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MAX_OUTPUT = 32 * 1024 * 1024
_KILL_GRACE_S = 10.0
SETUP_ATTEMPTS = 4
SETUP_TIMEOUT_S = 120.0

DEFAULT_LIMITS = Limits(cpus=2.0, memory_mb=4096, pids=1024, disk_mb=1024)
"""On unless a spec or the backend says otherwise (`0` turns one off). Sized for one harness CLI plus
the task's service: a Node CLI peaks at a few hundred MiB and ~30 threads (each thread counts against
`pids`); Claw workdirs hold kilobytes. The tmpfs pages of /workdir and /tmp count against memory too."""

BuildCommand = Callable[[int, int], list[str]]  # (started fd, status fd) -> full command line


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
    """Inside the sandbox: write one byte to the start pipe, then exec the real command.

    Via /proc/self/fd: dash takes only one-digit fds in `>&N`. The command inherits the pipe's write
    end; harmless — the byte is written before it runs, so it cannot make a run look unstarted."""
    return ["/bin/sh", "-c", 'printf 1 > "/proc/self/fd/$0" && exec "$@"', str(fd)]


def _drain(fd: int) -> bytes:
    os.set_blocking(fd, False)
    data = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            data += chunk
    return data


def _child_pid(status: bytes) -> int | None:
    """The sandbox init's host PID from bwrap's `--json-status-fd` (its first document)."""
    for line in status.splitlines():
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            pid = json.loads(line).get("child-pid")
            if isinstance(pid, int):
                return pid
    return None


def _gone(pid: int) -> bool:
    """The process left (or is a zombie): its PID namespace's other processes are already dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")


def _is_namespace_init(pid: int) -> bool:
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


async def _wait_gone(pid: int | None) -> None:
    """Wait until the sandbox init `pid` is gone: it dies last (the kernel kills and reaps the rest
    of its PID namespace first), so afterwards no process of the command is left anywhere.

    Normally the launcher's death kills it (`--die-with-parent`); a launcher killed while the child was
    still being set up can leave it orphaned before its parent-death signal is armed (seen once under
    heavy load: a 0.5 s timeout, the init still running `sleep 30` 10 s later), so the init itself is
    killed too when it outlives a short grace: killing a PID namespace's init kills the namespace."""
    if pid is None:
        return
    deadline = time.monotonic() + _KILL_GRACE_S
    grace = time.monotonic() + 0.5
    while not _gone(pid):
        if time.monotonic() > grace and _is_namespace_init(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise SandboxError(f"sandbox init {pid} still alive {_KILL_GRACE_S}s after its launcher")
        await asyncio.sleep(0.005)


async def _started(fd: int, proc: asyncio.subprocess.Process) -> bool:
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
        _kill_group(proc)
        raise SandboxError(f"bwrap did not start the command within {SETUP_TIMEOUT_S}s") from None
    finally:
        loop.remove_reader(fd)


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
        self.home = home  # <root>/<id>: fs/ (quota: work/, tmp/), logs/, verifier-N/
        self.fs = home / "fs"
        self.host_workdir: Path | None = self.fs / "work"
        self.host_tmpdir = self.fs / "tmp"
        self.gateway_url = ""
        self.violations: list[str] = []
        self.ro_binds = bwrap.runtime_ro_binds([*backend.ro_binds, *spec.ro_binds]) if spec.ro_binds \
            else backend.ro_binds
        self.mounts = bwrap.Mounts([*backend.system_mounts, *((str(b), b) for b in self.ro_binds),
                                    *bwrap.masked_mounts(), (WORKDIR, self.fs / "work"),
                                    ("/tmp", self.host_tmpdir), *_hidden_root(backend.root)])
        self._backend = backend
        self.netns: NetNamespace | None = None
        self.cgroup: CgroupGroup | None = None
        self.quota = False
        self.limits = spec.limits  # resolved against the backend's defaults at open
        self._forwarder: Forwarder | None = None
        self._procs: set[asyncio.subprocess.Process] = set()
        self._execs: set[asyncio.subprocess.Process] = set()
        self._lost: str | None = None
        self._closed = False
        self._timer: asyncio.TimerHandle | None = None
        self._nspawn = 0
        self._nverify = 0
        self._ncopy = 0

    # ---- launch -----------------------------------------------------------------------------
    def _prefix(self, role: str | None = "agent") -> list[str]:
        """cgroup launcher (`role`: "agent" for execs, "service" for spawns, None: no cgroup) + nsenter."""
        prefix = self.cgroup.enter_argv(role) if (self.cgroup and role) else []
        if self.netns is not None:
            prefix = [*prefix, "nsenter", f"--net={self.netns.path}"]
        return prefix

    def _command(self, argv: Sequence[str], cwd: str, started_fd: int, status_fd: int | None,
                 role: str = "agent") -> list[str]:
        bargs = bwrap.sandbox_args(self._backend.root_args, self.fs / "work", self.host_tmpdir,
                                   unshare_net=self.netns is None, ro_binds=self.ro_binds,
                                   hide=[self._backend.root])
        if status_fd is not None:  # exec: the sandbox init's PID, to wait until its tree is gone
            bargs = [*bargs, "--json-status-fd", str(status_fd)]
        return bwrap.wrap_command(self._prefix(role), bargs, [*_started_wrapper(started_fd), *argv], cwd)

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
        """Where an inside path lives on the host (None: not visible inside, e.g. `/root`, `/home`,
        the sandboxes' root, masked task suites). Bound-back folders under /tmp map to themselves."""
        return self.mounts.host(path)

    def _prepare(self, argv: Sequence[str], env: Mapping[str, str] | None, cwd: str) -> dict[str, str]:
        self._check_alive()
        if not argv:
            raise CommandNotFoundError("empty argv")
        full_env = self._env(env)
        self._resolve(argv[0], full_env, cwd)
        return full_env

    async def _start(self, cmd: list[str], env: Mapping[str, str], stdin: int, stdout: int | BinaryIO,
                     stderr: int, fds: Sequence[int]) -> asyncio.subprocess.Process:
        """Start the launcher with `fds` (write ends of our pipes) passed through; closes them."""
        try:
            proc = await asyncio.create_subprocess_exec(*cmd, env=env, stdin=stdin, stdout=stdout,
                                                        stderr=stderr, pass_fds=tuple(fds))
        except OSError as e:
            raise SandboxError(f"cannot start bwrap: {e}") from e
        finally:
            for fd in fds:
                os.close(fd)
        self._procs.add(proc)
        return proc

    # ---- Sandbox protocol -------------------------------------------------------------------
    async def exec(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                   cwd: str = WORKDIR, timeout_s: float | None = None,
                   stdin: bytes | None = None) -> ExecResult:
        """Run at most once; past `timeout_s` the whole PID namespace is killed (`timed_out`).

        Retried only when bwrap exited by itself before the command started (its setup failed).
        """
        full_env = self._prepare(argv, env, cwd)
        return await self._run(lambda s, st: self._command(argv, cwd, s, st), full_env, timeout_s,
                               stdin, limits=True)

    async def _run(self, build: BuildCommand, env: Mapping[str, str], timeout_s: float | None,
                   stdin: bytes | None, *, limits: bool) -> ExecResult:
        failure = ""
        for _ in range(SETUP_ATTEMPTS):
            result, started = await self._exec_once(build, env, timeout_s, stdin, limits)
            if started or result.killed_by_signal is not None or result.timed_out:
                return result
            failure = result.stderr.decode(errors="replace")[-500:]
            self._check_alive()
        raise SandboxError(f"bwrap setup failed {SETUP_ATTEMPTS} times: {failure}")

    async def _exec_once(self, build: BuildCommand, env: Mapping[str, str], timeout_s: float | None,
                         stdin: bytes | None, limits: bool) -> tuple[ExecResult, bool]:
        t0 = time.monotonic()
        sp = asyncio.subprocess
        (r_started, w_started), (r_status, w_status) = os.pipe(), os.pipe()
        before = self._breaches() if limits else {}
        try:
            proc = await self._start(build(w_started, w_status), env,
                                     sp.PIPE if stdin is not None else sp.DEVNULL, sp.PIPE, sp.PIPE,
                                     (w_started, w_status))
            self._execs.add(proc)
            try:
                result = await self._collect(proc, stdin, timeout_s, t0)
            finally:
                _kill_group(proc)
                self._procs.discard(proc)
                self._execs.discard(proc)
                await _wait_gone(_child_pid(_drain(r_status)))
            self._check_alive()  # lost while running -> infra, not the command's result
            hit = self._limits_hit(before) if limits else ()
            return _with(result, hit), bool(_drain(r_started))
        finally:
            os.close(r_started)
            os.close(r_status)

    def _breaches(self) -> dict[str, int]:
        return self.cgroup.breaches() if self.cgroup is not None else {}

    def _limits_hit(self, before: Mapping[str, int]) -> tuple[str, ...]:
        after = self._breaches()
        hit = [k for k, v in after.items() if v > before.get(k, 0)]
        if self.quota and quota.full(self.fs):
            hit.append("disk")
        return tuple(hit)

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
        self._check_alive()
        rc = proc.returncode if proc.returncode is not None else -9
        killed = -rc if rc < 0 and not timed_out else None  # a signal we did not send
        return ExecResult(rc, out, err, timed_out, time.monotonic() - t0, killed_by_signal=killed)

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
            proc = await self._start(self._command(argv, cwd, w, None, role="service"), env,
                                     asyncio.subprocess.DEVNULL, log, asyncio.subprocess.STDOUT, (w,))
            if await _started(r, proc):
                return True
        finally:
            os.close(r)
        await asyncio.wait_for(proc.wait(), _KILL_GRACE_S)
        self._procs.discard(proc)
        return False

    def _writable(self, path: str) -> tuple[Path, str] | None:
        """(host dir, relative path) for a path under /workdir or /tmp (the agent's space), else None."""
        p = Path(os.path.normpath(path if path.startswith("/") else os.path.join(WORKDIR, path)))
        if self.mounts.host(str(p)) is None:
            return None
        for inner, outer in ((Path(WORKDIR), self.fs / "work"), (Path("/tmp"), self.host_tmpdir)):
            if p != inner and inner in p.parents and self.mounts.host(str(p)) == outer / p.relative_to(inner):
                return outer, str(p.relative_to(inner))
        return None

    # ---- verifier ---------------------------------------------------------------------------
    async def run_verifier(self, argv: Sequence[str], *, inputs: Mapping[str, bytes],
                           env: Mapping[str, str] | None = None,
                           timeout_s: float | None = None) -> VerifierRun:
        """Run a trusted verifier apart from the agent; its files come back as `outputs`.

        First every exec of this sandbox (the harness) is killed and its PID namespace waited for;
        services (`spawn`) keep running, so the verifier can query them. Then a fresh bwrap sees the
        rollout's /workdir read-only, an empty /tmp, `inputs` read-only at `/verifier/in` and an
        empty writable `/verifier/out` (its cwd), with no cgroup of the agent's (the agent's memory
        use cannot OOM it) and the sandbox's network namespace (the task's service on 127.0.0.1).
        argv[0] must not come from /workdir or /tmp: nothing of the agent's is ever executed.
        """
        self._check_alive()
        host = self.mounts.host(argv[0]) if argv and argv[0].startswith("/") else None
        if host is None or host == self.fs or self.fs in host.parents:
            raise SandboxError(f"verifier program {argv[0]!r} is not a trusted host path")
        await self._end_execs()
        self._nverify += 1
        base = self.home / f"verifier-{self._nverify}"
        await asyncio.to_thread(_layout_verifier, base, inputs)
        venv = {"PATH": DEFAULT_PATH, "HOME": bwrap.VERIFIER_OUT, "LANG": "C.UTF-8", "TMPDIR": "/tmp",
                **(env or {})}
        try:
            result = await self._run(lambda s, st: self._verifier_command(argv, base, s, st), venv,
                                     timeout_s, None, limits=False)
            outputs = await asyncio.to_thread(_collect_outputs, base / "out")
        finally:
            await asyncio.to_thread(shutil.rmtree, base, True)
        return VerifierRun(result, outputs)

    def _verifier_command(self, argv: Sequence[str], base: Path, started_fd: int,
                          status_fd: int) -> list[str]:
        bargs = bwrap.verifier_args(self._backend.root_args, self.fs / "work", base / "in", base / "out",
                                    unshare_net=self.netns is None, ro_binds=self.ro_binds,
                                    hide=[self._backend.root])
        bargs = [*bargs, "--json-status-fd", str(status_fd)]
        return bwrap.wrap_command(self._prefix(None), bargs,
                                  [*_started_wrapper(started_fd), *argv], bwrap.VERIFIER_OUT)

    async def _end_execs(self) -> None:
        """Kill every exec still running (a harness's leftovers) and wait until each tree is gone."""
        for proc in list(self._execs):
            _kill_group(proc)
        for proc in list(self._execs):
            with contextlib.suppress(TimeoutError, ProcessLookupError):
                await asyncio.wait_for(proc.wait(), _KILL_GRACE_S)

    # ---- a copy of the final workdir --------------------------------------------------------
    async def open_workdir_copy(self) -> WorkdirCopy:
        """A private copy of the rollout's final /workdir, for trusted post-run steps that must run
        commands over the agent's files (Claw-Eval's env snapshot). Every exec of the agent is ended
        first. The copy sits on the sandbox's disk quota (a file that does not fit is left out: filling
        the disk was the agent's doing) and is never seen by the agent or the verifier (`WorkdirCopy`)."""
        self._check_alive()
        await self._end_execs()
        self._ncopy += 1
        base = self.fs / f"copy-{self._ncopy}"
        await asyncio.to_thread(copy_tree, self.fs / "work", base / "work")
        tmp = base / "tmp"
        tmp.mkdir()
        tmp.chmod(0o1777)
        return WorkdirCopy(self, base)

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
        if self.quota:
            quota.unmount_quota(self.fs)
            self.quota = False
        self._backend.discard_dir(self.home)


class WorkdirCopy:
    """A copy of a rollout's final workdir (`LocalSandbox.open_workdir_copy`).

    `exec` runs a command in a fresh bwrap over the copy: the copy at /workdir (and /workspace, upstream
    Claw-Eval's name for it) read-write, its own /tmp, no network at all (not even the task's service:
    what runs here may be the agent's code), the sandbox's CPU, memory and pids limits, and its own PID
    namespace, killed past `timeout_s`. `read` and `write` go through the link-refusing `safefile`
    readers on the host; `paths` lists the copy without following a link.
    """

    MAX_ENTRIES = 100_000

    def __init__(self, sandbox: LocalSandbox, base: Path) -> None:
        self.sandbox = sandbox
        self.base = base
        self.work = base / "work"

    async def exec(self, argv: Sequence[str], *, timeout_s: float, cwd: str = WORKDIR,
                   env: Mapping[str, str] | None = None) -> ExecResult:
        sbx = self.sandbox
        sbx._check_alive()
        full = {"PATH": DEFAULT_PATH, "HOME": WORKDIR, "LANG": "C.UTF-8", "TMPDIR": "/tmp", **(env or {})}
        return await sbx._run(lambda s, st: self._command(argv, cwd, s, st), full, timeout_s, None, limits=True)

    def _command(self, argv: Sequence[str], cwd: str, started_fd: int, status_fd: int) -> list[str]:
        sbx = self.sandbox
        bargs = bwrap.sandbox_args(sbx._backend.root_args, self.work, self.base / "tmp", unshare_net=True,
                                   ro_binds=sbx.ro_binds, hide=[sbx._backend.root])
        prefix = sbx.cgroup.enter_argv("agent") if sbx.cgroup else []
        return bwrap.wrap_command(prefix, [*bargs, "--json-status-fd", str(status_fd)],
                                  [*_started_wrapper(started_fd), *argv], cwd)

    async def read(self, rel: str, *, limit: int = MAX_READ_BYTES) -> bytes:
        """The bytes of a regular file of the copy (`TamperError`: a link, FIFO, device or over `limit`)."""
        return await asyncio.to_thread(read_under, self.work, rel, limit=limit)

    async def write(self, rel: str, data: bytes) -> None:
        """Write a trusted file into the copy, replacing whatever the agent left on its path (a link, a
        file where a folder must be), as a file pushed into a container replaces it."""
        await asyncio.to_thread(_clear_path, self.work, rel)
        await asyncio.to_thread(write_under, self.work, rel, data)

    async def paths(self) -> list[str]:
        """Every entry of the copy but its folders (relative, "/"-separated), links listed but not followed."""
        return await asyncio.to_thread(_list_tree, self.work, self.MAX_ENTRIES)

    async def aclose(self) -> None:
        await asyncio.to_thread(shutil.rmtree, self.base, True)


def copy_tree(src: Path, dest: Path, max_entries: int = WorkdirCopy.MAX_ENTRIES) -> None:
    """Copy the agent's folder: folders, regular files (mode kept) and links as links, never followed;
    FIFOs, sockets and devices left out, as is a file that does not fit or anything past `max_entries`."""
    dest.mkdir(parents=True)
    todo, seen = [(src, dest)], 0
    while todo:
        s, d = todo.pop()
        try:
            entries = list(os.scandir(s))
        except OSError:
            continue
        for e in entries:
            seen += 1
            if seen > max_entries:
                return
            target = d / e.name
            try:
                if e.is_symlink():
                    os.symlink(os.readlink(e.path), target)
                elif e.is_dir(follow_symlinks=False):
                    target.mkdir()
                    todo.append((Path(e.path), target))
                elif e.is_file(follow_symlinks=False):
                    _copy_file(e.path, target)
            except OSError:  # ENOSPC (the quota), a name that vanished: left out
                with contextlib.suppress(OSError):
                    if target.is_file() and not target.is_symlink():
                        target.unlink()


def _copy_file(src: str, dest: Path) -> None:
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, st.st_mode & 0o777)
        try:
            while os.sendfile(out, fd, None, 1 << 20):
                pass
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _clear_path(root: Path, rel: str) -> None:
    """Remove what stands in the way of writing `root/rel` as a regular file (no link is followed)."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise SandboxError(f"{rel!r} is not a path inside the copy")
    here = root
    for i, name in enumerate(parts):
        here = here / name
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return
        last = i == len(parts) - 1
        if stat.S_ISLNK(st.st_mode) or (not last and not stat.S_ISDIR(st.st_mode)) or (
                last and not stat.S_ISREG(st.st_mode)):
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(here)
            else:
                here.unlink()
            return


def _list_tree(root: Path, max_entries: int) -> list[str]:
    out: list[str] = []
    todo = [""]
    while todo and len(out) < max_entries:
        rel = todo.pop()
        try:
            entries = list(os.scandir(root / rel if rel else root))
        except OSError:
            continue
        for e in entries:
            path = f"{rel}/{e.name}" if rel else e.name
            if e.is_dir(follow_symlinks=False):
                todo.append(path)
            else:
                out.append(path)
    return sorted(out[:max_entries])


def _with(result: ExecResult, limits_hit: tuple[str, ...]) -> ExecResult:
    if not limits_hit:
        return result
    return ExecResult(result.returncode, result.stdout, result.stderr, result.timed_out, result.duration_s,
                      killed_by_signal=result.killed_by_signal, limits_hit=limits_hit)


def _hidden_root(root: Path) -> list[tuple[str, Path | None]]:
    """The sandboxes' root is invisible inside; under /tmp the sandbox's own /tmp covers it anyway."""
    return [] if root == Path("/tmp") or Path("/tmp") in root.parents else [(str(root), None)]


def _layout_verifier(base: Path, inputs: Mapping[str, bytes]) -> None:
    (base / "out").mkdir(parents=True)
    (base / "in").mkdir()
    for rel, data in inputs.items():
        write_bytes(_inside(base / "in", rel), data)


def _collect_outputs(out: Path) -> dict[str, bytes]:
    """The verifier's own files (trusted writer; still bounded, links not followed)."""
    found: dict[str, bytes] = {}
    for p in sorted(out.rglob("*")):
        if p.is_file() and not p.is_symlink():
            found[str(p.relative_to(out))] = read_under(out, str(p.relative_to(out)), limit=MAX_READ_BYTES)
    return found


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

    def __init__(self, root: Path | str = DEFAULT_ROOT, *, network: str = "auto",
                 ro_binds: Sequence[Path | str] = (), limits: Limits = DEFAULT_LIMITS) -> None:
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
        limits = sbx.limits = spec.limits.resolved(self.limits)
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
    """Create fs/work/ fs/tmp/ and lay out `spec.files` and `spec.copy_dirs` under fs/work/."""
    work, tmp = home / "fs" / "work", home / "fs" / "tmp"
    for d in (tmp, work / ".home"):
        d.mkdir(parents=True, exist_ok=True)
    tmp.chmod(0o1777)
    for rel, data in spec.files.items():
        write_bytes(_inside(work, rel), data)
    for src, dest in spec.copy_dirs.items():
        shutil.copytree(src, _inside(work, str(dest)), dirs_exist_ok=True, symlinks=True)


def _inside(work: Path, rel: str) -> Path:
    target = Path(os.path.normpath(work / rel.lstrip("/")))
    if target != work and work not in target.parents:
        raise SandboxError(f"file {rel!r} escapes /workdir")
    return target
