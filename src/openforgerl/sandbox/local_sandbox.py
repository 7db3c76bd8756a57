"""One rollout's bubblewrap sandbox (`LocalSandbox`): exec, spawn, the verifier, the workdir copy, cleanup
(the verifier's command line and `WorkdirCopy` are in `local_post.py`).

The design (a fresh bwrap per command, at-most-once execs, networking, limits) is described in `local.py`,
whose `LocalBackend` opens these.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO, Protocol

from openforgerl.sandbox import bwrap, quota
from openforgerl.sandbox.base import (
    WORKDIR,
    CommandNotFoundError,
    ExecResult,
    SandboxError,
    SandboxSpec,
    VerifierRun,
)
from openforgerl.sandbox.cgroups import CgroupGroup
from openforgerl.sandbox.forwarder import Forwarder
from openforgerl.sandbox.host_tree import (
    collect_outputs,
    copy_tree,
    layout_verifier,
)
from openforgerl.sandbox.hostfiles import HostFilesMixin
from openforgerl.sandbox.launcher import (
    DEFAULT_PATH,
    KILL_GRACE_S,
    child_pid,
    drain,
    kill_group,
    open_log,
    read_capped,
    started,
    started_wrapper,
    wait_gone,
)
from openforgerl.sandbox.local_post import BuildCommand, WorkdirCopy, verifier_command
from openforgerl.sandbox.netns import NetNamespace

__all__ = ["Backend", "LocalSandbox"]

log = logging.getLogger("openforgerl.sandbox.local")  # the backend's logger: one name for the whole backend
SETUP_ATTEMPTS = 4


class Backend(Protocol):
    """What a sandbox needs of the backend that opened it (`LocalBackend`): where the sandboxes live,
    the system part of every bwrap command line, and the hand-back when the sandbox closes."""

    root: Path
    root_args: list[str]
    system_mounts: list[tuple[str, Path | None]]
    ro_binds: list[Path]

    def forget(self, sbx: LocalSandbox) -> None: ...

    def discard_dir(self, home: Path) -> None: ...


class LocalSandbox(HostFilesMixin):
    """One rollout's bubblewrap sandbox. Create through `LocalBackend.open_sandbox`."""

    def __init__(self, backend: Backend, spec: SandboxSpec, sid: str, home: Path) -> None:
        self.id = sid
        self.spec = spec
        self.home = home  # <root>/<id>: fs/ (quota: work/, tmp/), logs/, verifier-N/
        self.fs = home / "fs"
        self.host_workdir: Path | None = self.fs / "work"
        self.host_tmpdir = self.fs / "tmp"
        self.gateway_url = ""
        self.violations: list[str] = []
        self.ro_binds = (
            bwrap.runtime_ro_binds([*backend.ro_binds, *spec.ro_binds]) if spec.ro_binds else backend.ro_binds
        )
        self.mounts = bwrap.Mounts(
            [
                *backend.system_mounts,
                *((str(b), b) for b in self.ro_binds),
                *bwrap.masked_mounts(),
                (WORKDIR, self.fs / "work"),
                ("/tmp", self.host_tmpdir),
                *_hidden_root(backend.root),
            ]
        )
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

    def _command(
        self, argv: Sequence[str], cwd: str, started_fd: int, status_fd: int | None, role: str = "agent"
    ) -> list[str]:
        bargs = bwrap.sandbox_args(
            self._backend.root_args,
            self.fs / "work",
            self.host_tmpdir,
            unshare_net=self.netns is None,
            ro_binds=self.ro_binds,
            hide=[self._backend.root],
        )
        if status_fd is not None:  # exec: the sandbox init's PID, to wait until its tree is gone
            bargs = [*bargs, "--json-status-fd", str(status_fd)]
        return bwrap.wrap_command(self._prefix(role), bargs, [*started_wrapper(started_fd), *argv], cwd)

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        base = {
            "PATH": os.environ.get("PATH", DEFAULT_PATH),
            "HOME": WORKDIR,
            "LANG": "C.UTF-8",
            "TMPDIR": "/tmp",
        }
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

    async def _start(
        self,
        cmd: list[str],
        env: Mapping[str, str],
        stdin: int,
        stdout: int | BinaryIO,
        stderr: int,
        fds: Sequence[int],
    ) -> asyncio.subprocess.Process:
        """Start the launcher with `fds` (write ends of our pipes) passed through; closes them."""
        try:
            proc = await asyncio.create_subprocess_exec(
                *cmd, env=env, stdin=stdin, stdout=stdout, stderr=stderr, pass_fds=tuple(fds)
            )
        except OSError as e:
            raise SandboxError(f"cannot start bwrap: {e}") from e
        finally:
            for fd in fds:
                os.close(fd)
        self._procs.add(proc)
        return proc

    # ---- Sandbox protocol -------------------------------------------------------------------
    async def exec(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str = WORKDIR,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """Run at most once; past `timeout_s` the whole PID namespace is killed (`timed_out`).

        Retried only when bwrap exited by itself before the command started (its setup failed).
        """
        full_env = self._prepare(argv, env, cwd)
        return await self._run(
            lambda s, st: self._command(argv, cwd, s, st), full_env, timeout_s, stdin, limits=True
        )

    async def _run(
        self,
        build: BuildCommand,
        env: Mapping[str, str],
        timeout_s: float | None,
        stdin: bytes | None,
        *,
        limits: bool,
    ) -> ExecResult:
        failure = ""
        for _ in range(SETUP_ATTEMPTS):
            result, started = await self._exec_once(build, env, timeout_s, stdin, limits)
            if started or result.killed_by_signal is not None or result.timed_out:
                return result
            failure = result.stderr.decode(errors="replace")[-500:]
            self._check_alive()
        raise SandboxError(f"bwrap setup failed {SETUP_ATTEMPTS} times: {failure}")

    async def _exec_once(
        self,
        build: BuildCommand,
        env: Mapping[str, str],
        timeout_s: float | None,
        stdin: bytes | None,
        limits: bool,
    ) -> tuple[ExecResult, bool]:
        t0 = time.monotonic()
        sp = asyncio.subprocess
        (r_started, w_started), (r_status, w_status) = os.pipe(), os.pipe()
        before = self._breaches() if limits else {}
        try:
            proc = await self._start(
                build(w_started, w_status),
                env,
                sp.PIPE if stdin is not None else sp.DEVNULL,
                sp.PIPE,
                sp.PIPE,
                (w_started, w_status),
            )
            self._execs.add(proc)
            try:
                result = await self._collect(proc, stdin, timeout_s, t0)
            finally:
                kill_group(proc)
                self._procs.discard(proc)
                self._execs.discard(proc)
                await wait_gone(child_pid(drain(r_status)))
            self._check_alive()  # lost while running -> infra, not the command's result
            hit = self._limits_hit(before) if limits else ()
            return _with(result, hit), bool(drain(r_started))
        finally:
            os.close(r_started)
            os.close(r_status)

    def _breaches(self) -> dict[str, int]:
        return self.cgroup.breaches() if self.cgroup is not None else {}

    def limits_breached(self) -> tuple[str, ...]:
        """Every limit breached since the sandbox opened (`sandbox.base.limits_breached`)."""
        return self._limits_hit({})

    def _limits_hit(self, before: Mapping[str, int]) -> tuple[str, ...]:
        after = self._breaches()
        hit = [k for k, v in after.items() if v > before.get(k, 0)]
        if self.quota and quota.full(self.fs):
            hit.append("disk")
        return tuple(hit)

    async def _collect(
        self, proc: asyncio.subprocess.Process, stdin: bytes | None, timeout_s: float | None, t0: float
    ) -> ExecResult:
        readers = asyncio.gather(read_capped(proc.stdout), read_capped(proc.stderr))
        try:
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
                kill_group(proc)
                await asyncio.wait_for(proc.wait(), KILL_GRACE_S)
            out, err = await asyncio.wait_for(readers, KILL_GRACE_S)
        finally:
            _abandon(readers)
        self._check_alive()
        rc = proc.returncode if proc.returncode is not None else -9
        killed = -rc if rc < 0 and not timed_out else None  # a signal we did not send
        return ExecResult(rc, out, err, timed_out, time.monotonic() - t0, killed_by_signal=killed)

    async def spawn(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str = WORKDIR
    ) -> None:
        """Start a background process; output goes to `<home>/logs/spawn-N.log` on the host."""
        full_env = self._prepare(argv, env, cwd)
        self._nspawn += 1
        fh = await asyncio.to_thread(open_log, self.home / "logs" / f"spawn-{self._nspawn}.log")
        try:
            for _ in range(SETUP_ATTEMPTS):
                if await self._spawn_once(argv, full_env, cwd, fh):
                    return
                self._check_alive()
        finally:
            fh.close()  # the child keeps its own copy of the descriptor
        raise SandboxError(f"bwrap setup failed {SETUP_ATTEMPTS} times (see {fh.name})")

    async def _spawn_once(self, argv: Sequence[str], env: Mapping[str, str], cwd: str, log: BinaryIO) -> bool:
        r, w = os.pipe()
        try:
            proc = await self._start(
                self._command(argv, cwd, w, None, role="service"),
                env,
                asyncio.subprocess.DEVNULL,
                log,
                asyncio.subprocess.STDOUT,
                (w,),
            )
            if await started(r, proc):
                return True
        finally:
            os.close(r)
        await asyncio.wait_for(proc.wait(), KILL_GRACE_S)
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
    async def run_verifier(
        self,
        argv: Sequence[str],
        *,
        inputs: Mapping[str, bytes],
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> VerifierRun:
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
        await asyncio.to_thread(layout_verifier, base, inputs)
        venv = {
            "PATH": DEFAULT_PATH,
            "HOME": bwrap.VERIFIER_OUT,
            "LANG": "C.UTF-8",
            "TMPDIR": "/tmp",
            **(env or {}),
        }
        try:
            result = await self._run(
                lambda s, st: verifier_command(self, argv, base, s, st), venv, timeout_s, None, limits=False
            )
            outputs = await asyncio.to_thread(collect_outputs, base / "out")
        finally:
            await asyncio.to_thread(shutil.rmtree, base, True)
        return VerifierRun(result, outputs)

    async def _end_execs(self) -> None:
        """Kill every exec still running (a harness's leftovers) and wait until each tree is gone."""
        for proc in list(self._execs):
            kill_group(proc)
        for proc in list(self._execs):
            with contextlib.suppress(TimeoutError, ProcessLookupError):
                await asyncio.wait_for(proc.wait(), KILL_GRACE_S)

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
                kill_group(proc)

    async def aclose(self) -> None:
        """Kill every process, then remove cgroups, forwarder, namespace and host dirs. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        await self._kill_all()
        await self._release()
        self._backend.forget(self)

    async def _kill_all(self) -> None:
        for proc in list(self._procs):
            kill_group(proc)
        for proc in list(self._procs):
            with contextlib.suppress(TimeoutError, ProcessLookupError):
                await asyncio.wait_for(proc.wait(), KILL_GRACE_S)
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


def _with(result: ExecResult, limits_hit: tuple[str, ...]) -> ExecResult:
    if not limits_hit:
        return result
    return ExecResult(
        result.returncode,
        result.stdout,
        result.stderr,
        result.timed_out,
        result.duration_s,
        killed_by_signal=result.killed_by_signal,
        limits_hit=limits_hit,
    )


def _hidden_root(root: Path) -> list[tuple[str, Path | None]]:
    """The sandboxes' root is invisible inside; under /tmp the sandbox's own /tmp covers it anyway."""
    return [] if root == Path("/tmp") or Path("/tmp") in root.parents else [(str(root), None)]


async def _remove_cgroup(group: CgroupGroup) -> None:
    for _ in range(50):
        group.kill_all()
        if group.remove():
            return
        await asyncio.sleep(0.05)
    log.warning("cgroup %s not removed (processes still inside)", group.dirs)


def _abandon(readers: asyncio.Future[tuple[bytes, bytes]]) -> None:
    """Stop output readers an exec no longer waits for (it was cancelled, or timed out).

    Left running, the event loop's shutdown cancels them one by one, their gather then holds a
    CancelledError nobody reads, and asyncio prints it as a traceback into the user's log on Ctrl-C or
    SIGTERM (seen in `openforgerl train`'s interrupted runs)."""
    readers.cancel()
    readers.add_done_callback(lambda f: f.cancelled() or f.exception())
