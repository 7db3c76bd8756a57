"""One rollout's podman container (`PodmanSandbox`), opened by `PodmanBackend` (podman.py, whose
docstring has the design): `podman exec` per command in its own process group, services in sidecar
containers (`spawn`), the verifier in a fresh container (`run_verifier`), the local backend's limits
where the spec names none (`resolve_limits`), and removal of everything on `aclose`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from openforgerl.sandbox.base import (
    WORKDIR,
    CommandNotFoundError,
    ExecResult,
    Limits,
    SandboxError,
    SandboxSpec,
    VerifierRun,
)
from openforgerl.sandbox.bwrap import VERIFIER_IN, VERIFIER_OUT
from openforgerl.sandbox.forwarder import Forwarder, open_forwarder
from openforgerl.sandbox.hostfiles import HostFilesMixin
from openforgerl.sandbox.local import DEFAULT_LIMITS
from openforgerl.sandbox.netns import NetNamespace, open_netns
from openforgerl.sandbox.safefile import MAX_READ_BYTES, read_under, write_under

__all__ = ["Podman", "PodmanSandbox", "resolve_limits"]

LABEL = "openforgerl.sandbox"
VERIFIER_PATH = "/opt/openforgerl/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_WRAP = (
    'mkdir -p /tmp/.ofrl; echo $$ > "$0"; '
    'command -v "$1" >/dev/null 2>&1 || { : > "$0.missing"; exit 127; }; exec "$@"'
)


def _read(stream: asyncio.StreamReader | None) -> asyncio.Future[bytes]:
    return asyncio.ensure_future(stream.read() if stream else asyncio.sleep(0, b""))


class Podman(Protocol):
    """What a sandbox needs of the backend that opened it (`podman.PodmanBackend`; a Protocol, so this
    module does not import the backend's, which imports it): its podman CLI calls, the environment and
    network mode they run with, and the hand-back when the sandbox closes."""

    podman: str
    network: str
    env: dict[str, str]

    async def run(
        self, *args: str, timeout_s: float = 120.0, stdin: bytes | None = None
    ) -> tuple[int, bytes, bytes]: ...

    def forget(self, sbx: PodmanSandbox) -> None: ...


class PodmanSandbox(HostFilesMixin):
    """One container. Create through `PodmanBackend.open_sandbox`."""

    def __init__(self, backend: Podman, spec: SandboxSpec, sid: str, home: Path) -> None:
        self.id = sid
        self.spec = spec
        self.home = home
        self.container = f"ofrl-{sid}"
        self.host_workdir: Path | None = home / "work"
        self.host_tmpdir = home / "tmp"
        self.gateway_url = ""
        self.netns: NetNamespace | None = None
        self._backend = backend
        self._forwarder: Forwarder | None = None
        self._procs: set[asyncio.subprocess.Process] = set()
        self._n = 0
        self._closed = False
        self._lost: str | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._kill_task: asyncio.Future[tuple[int, bytes, bytes]] | None = None
        self._network = "none"
        self._others: list[str] = []  # service and verifier containers, removed at aclose
        self._holder: str | None = None  # the loopback holder without root
        self._agent_gone = False
        self.violations: list[str] = []

    async def start(self) -> None:
        await asyncio.to_thread(self._layout)
        if self._backend.network == "netns":
            self._network = await self._open_network()
        else:
            self._holder = f"{self.container}-net"
            await self._run_detached(
                self._holder,
                [
                    "--network",
                    "none",
                    "--read-only",
                    "--init",
                    "--label",
                    f"{LABEL}={self.id}",
                    "--entrypoint",
                    "",
                ],
                ["sleep", "2147483647"],
            )
            self._network = f"container:{self._holder}"
        await self._run_detached(self.container, self._run_args(), ["sleep", "2147483647"])
        self._timer = asyncio.get_running_loop().call_later(self.spec.lifetime_s, self.expire)

    def _layout(self) -> None:
        for d in (self.home / "work" / ".home", self.host_tmpdir / ".ofrl"):
            d.mkdir(parents=True, exist_ok=True)
        self.host_tmpdir.chmod(0o1777)
        for rel, data in self.spec.files.items():
            target = _inside(self.home / "work", rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        for src, dest in self.spec.copy_dirs.items():
            shutil.copytree(src, _inside(self.home / "work", str(dest)), dirs_exist_ok=True, symlinks=True)

    async def _open_network(self) -> str:
        port = self.spec.gateway_port
        self.netns = await open_netns(f"ofrl-{self.id}"[:60], ("127.0.0.1", port) if port else None, pin=True)
        if self.netns.listener is not None:
            self._forwarder = await open_forwarder(self.netns.listener, (self.spec.gateway_host, port))
            self.gateway_url = f"http://127.0.0.1:{port}"
        return f"ns:{self.netns.path}"

    async def _run_detached(self, name: str, args: Sequence[str], argv: Sequence[str]) -> None:
        rc, _, err = await self._backend.run("run", "-d", "--name", name, *args, self.spec.image or "", *argv)
        if rc != 0:
            raise SandboxError(f"podman run failed ({rc}): {err.decode(errors='replace')[-500:]}")

    def _run_args(self) -> list[str]:
        lim = resolve_limits(self.spec.limits)
        args = [
            "--label",
            f"{LABEL}={self.id}",
            "--network",
            self._network,
            "--read-only",
            "--init",
            "--hostname",
            "sandbox",
            "--workdir",
            WORKDIR,
            "--entrypoint",
            "",
            "-v",
            f"{self.home / 'work'}:{WORKDIR}",
            "-v",
            f"{self.host_tmpdir}:/tmp",
            "-e",
            f"HOME={WORKDIR}/.home",
        ]
        if lim.memory_mb:
            args += ["--memory", f"{lim.memory_mb}m", "--memory-swap", f"{lim.memory_mb}m"]
        if lim.cpus:
            args += ["--cpus", str(lim.cpus)]
        # podman's own cap (2048) would stay in place without an explicit -1
        args += ["--pids-limit", str(lim.pids) if lim.pids else "-1"]
        for k, v in self.spec.env.items():
            args += ["-e", f"{k}={v}"]
        return args

    def _check_alive(self) -> None:
        if self._lost is not None:
            raise SandboxError(f"sandbox {self.id} lost: {self._lost}")
        if self._closed:
            raise SandboxError(f"sandbox {self.id} is closed")

    def _check_agent(self) -> None:
        self._check_alive()
        if self._agent_gone:
            raise SandboxError(f"sandbox {self.id}: the agent's container was removed for the verifier")

    def _exec_args(
        self, argv: Sequence[str], env: Mapping[str, str] | None, cwd: str, detach: bool, interactive: bool
    ) -> tuple[list[str], Path]:
        self._n += 1
        pidfile = f"/tmp/.ofrl/{self._n}.pid"
        args = ["exec", *(["-d"] if detach else []), *(["-i"] if interactive else []), "--workdir", cwd]
        for k, v in (env or {}).items():
            args += ["-e", f"{k}={v}"]
        return [
            *args,
            self.container,
            "sh",
            "-c",
            _WRAP,
            pidfile,
            *argv,
        ], self.host_tmpdir / ".ofrl" / f"{self._n}.pid"

    async def exec(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str = WORKDIR,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """`podman exec`; on timeout the command's process group is SIGKILLed inside."""
        self._check_agent()
        t0 = time.monotonic()
        args, pidfile = self._exec_args(argv, env, cwd, False, stdin is not None)
        proc = await asyncio.create_subprocess_exec(
            self._backend.podman,
            *args,
            env=self._backend.env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        self._procs.add(proc)
        try:
            return await self._collect(proc, pidfile, stdin, timeout_s, t0)
        except asyncio.CancelledError:
            # A cancelled exec (a stopped run) ends its command inside too: `podman exec`'s client going
            # away leaves the command running in the container until the sandbox closes.
            await self._kill_group(pidfile)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            raise
        finally:
            self._procs.discard(proc)

    async def _collect(
        self,
        proc: asyncio.subprocess.Process,
        pidfile: Path,
        stdin: bytes | None,
        timeout_s: float | None,
        t0: float,
    ) -> ExecResult:
        out, err = _read(proc.stdout), _read(proc.stderr)
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
                await self._kill_group(pidfile)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
            self._check_alive()
            self._raise_missing(pidfile, proc.returncode)
            rc = proc.returncode if proc.returncode is not None else -9
            return ExecResult(rc, await out, await err, timed_out, time.monotonic() - t0)
        finally:
            for reader in (out, err):  # an exec that ends early (cancelled, lost) leaves no reader behind
                reader.cancel()

    def _raise_missing(self, pidfile: Path, rc: int | None) -> None:
        if Path(f"{pidfile}.missing").exists():
            raise CommandNotFoundError(f"command not found in sandbox {self.id}")
        if rc in (125, 126, 127) and not pidfile.exists():  # podman/runc could not even run sh
            raise SandboxError(f"podman exec failed with {rc} before the command started")

    async def _kill_group(self, pidfile: Path) -> None:
        with contextlib.suppress(OSError, ValueError):
            pid = int((await asyncio.to_thread(pidfile.read_text)).strip())
            await self._backend.run("exec", self.container, "kill", "-9", f"-{pid}", timeout_s=30)

    async def spawn(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str = WORKDIR
    ) -> None:
        """A service in its own container on the sandbox's network, with the same /workdir and /tmp and
        limits; it outlives the agent's container (the verifier may query it) and goes at `aclose`."""
        self._check_alive()
        self._n += 1
        name = f"{self.container}-svc{self._n}"
        args = [*self._run_args(), "--workdir", cwd]
        for k, v in (env or {}).items():
            args += ["-e", f"{k}={v}"]
        self._others.append(name)
        await self._run_detached(name, args, ["sh", "-c", _WRAP, f"/tmp/.ofrl/{self._n}.pid", *argv])

    async def run_verifier(
        self,
        argv: Sequence[str],
        *,
        inputs: Mapping[str, bytes],
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> VerifierRun:
        """Run a trusted verifier in a fresh container once the agent's container is gone.

        The agent's container (the harness and everything it started) is removed first; services keep
        running in theirs. The verifier's container sees the rollout's /workdir read-only, an empty
        /tmp, `inputs` read-only at /verifier/in and an empty writable /verifier/out (its cwd), on the
        sandbox's network, without the agent's limits (the agent's memory use cannot starve it). argv[0]
        must be an absolute path outside /workdir and /tmp: nothing of the agent's is ever executed."""
        self._check_alive()
        if not argv or not argv[0].startswith("/") or self._writable(argv[0]) is not None:
            raise SandboxError(f"verifier program {argv[0] if argv else ''!r} is not a trusted image path")
        await self._remove_agent()
        self._n += 1
        name, base = f"{self.container}-verify{self._n}", self.home / f"verifier-{self._n}"
        await asyncio.to_thread(_layout_verifier, base, inputs)
        venv = {
            "PATH": VERIFIER_PATH,
            "HOME": VERIFIER_OUT,
            "LANG": "C.UTF-8",
            "TMPDIR": "/tmp",
            **(env or {}),
        }
        args = [
            "run",
            "--rm",
            "--name",
            name,
            "--label",
            f"{LABEL}={self.id}",
            "--network",
            self._network,
            "--read-only",
            "--init",
            "--hostname",
            "sandbox",
            "--entrypoint",
            "",
            "--workdir",
            VERIFIER_OUT,
            "-v",
            f"{self.home / 'work'}:{WORKDIR}:ro",
            "-v",
            f"{base / 'in'}:{VERIFIER_IN}:ro",
            "-v",
            f"{base / 'out'}:{VERIFIER_OUT}",
            "-v",
            f"{base / 'tmp'}:/tmp",
        ]
        for k, v in venv.items():
            args += ["-e", f"{k}={v}"]
        self._others.append(name)
        t0 = time.monotonic()
        try:
            result = await self._run_verifier_container(
                name, [*args, self.spec.image or "", *argv], timeout_s, t0
            )
            outputs = await asyncio.to_thread(_collect_outputs, base / "out")
        finally:
            await asyncio.to_thread(shutil.rmtree, base, True)
        return VerifierRun(result, outputs)

    async def _run_verifier_container(
        self, name: str, args: Sequence[str], timeout_s: float | None, t0: float
    ) -> ExecResult:
        proc = await asyncio.create_subprocess_exec(
            self._backend.podman,
            *args,
            env=self._backend.env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        out, err = _read(proc.stdout), _read(proc.stderr)
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            timed_out = True
            await self._backend.run("rm", "-f", "-t", "0", name, timeout_s=60)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        rc = proc.returncode if proc.returncode is not None else -9
        return ExecResult(rc, await out, await err, timed_out, time.monotonic() - t0)

    async def _remove_agent(self) -> None:
        """End every exec and remove the agent's container (idempotent)."""
        if self._agent_gone:
            return
        self._agent_gone = True
        for proc in list(self._procs):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        rc, _, err = await self._backend.run("rm", "-f", "-t", "0", self.container, timeout_s=60)
        if rc != 0:
            raise SandboxError(
                f"could not remove the agent's container: {err.decode(errors='replace')[-300:]}"
            )

    def _writable(self, path: str) -> tuple[Path, str] | None:
        """(host dir, relative path) of a path under /workdir or /tmp, else None (read-only inside).

        No symlink is resolved here: `safefile` walks the relative path without following any."""
        p = Path(os.path.normpath(path if path.startswith("/") else os.path.join(WORKDIR, path)))
        for inner, outer in ((Path(WORKDIR), self.home / "work"), (Path("/tmp"), self.host_tmpdir)):
            if p != inner and inner in p.parents:
                return outer, str(p.relative_to(inner))
        return None

    def expire(self, reason: str = "lifetime exceeded") -> None:
        """Mark lost and kill the container (later calls raise SandboxError)."""
        if self._lost is None and not self._closed:
            self._lost = reason
            for proc in list(self._procs):
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            self._kill_task = asyncio.ensure_future(self._backend.run("kill", self.container, *self._others))

    async def aclose(self) -> None:
        """Remove the container (all its processes), the namespace and the host dirs. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        for proc in list(self._procs):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        await self._backend.run("rm", "-f", "-i", "-t", "0", self.container, *self._others)
        if self._holder is not None:  # last: the others share its network
            await self._backend.run("rm", "-f", "-i", "-t", "0", self._holder)
        if self._forwarder is not None:
            await self._forwarder.aclose()
        if self.netns is not None:
            await self.netns.aclose()
        await asyncio.to_thread(shutil.rmtree, self.home, True)
        self._backend.forget(self)


def resolve_limits(limits: Limits) -> Limits:
    """The spec's limits with the local backend's defaults where it names none (`0`: no limit), so a task
    gets the same CPU, memory and pids caps on both backends. Per container: each service's container
    has its own (the local backend's services share the agent's cgroup). Disk is not capped here: /workdir
    and /tmp are host folders."""
    return Limits(
        cpus=DEFAULT_LIMITS.cpus if limits.cpus is None else limits.cpus,
        memory_mb=DEFAULT_LIMITS.memory_mb if limits.memory_mb is None else limits.memory_mb,
        pids=DEFAULT_LIMITS.pids if limits.pids is None else limits.pids,
        disk_mb=limits.disk_mb,
    )


def _layout_verifier(base: Path, inputs: Mapping[str, bytes]) -> None:
    for d in ("in", "out", "tmp"):
        (base / d).mkdir(parents=True)
    (base / "tmp").chmod(0o1777)
    for rel, data in inputs.items():
        write_under(base / "in", rel, data)


def _collect_outputs(out: Path) -> dict[str, bytes]:
    """The verifier's own files (trusted writer; still bounded, links not followed)."""
    return {
        str(p.relative_to(out)): read_under(out, str(p.relative_to(out)), limit=MAX_READ_BYTES)
        for p in sorted(out.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def _inside(work: Path, rel: str) -> Path:
    target = Path(os.path.normpath(work / rel.lstrip("/")))
    if target != work and work not in target.parents:
        raise SandboxError(f"file {rel!r} escapes /workdir")
    return target
