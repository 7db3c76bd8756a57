"""One rollout's Pod, seen through the `Sandbox` contract.

Everything runs through `exec`: the harness's commands in the agent's container, the task's services
(`spawn`) in the Pod's services container (`manifests.services_container`). Each call's budget is clipped to
the sandbox's remaining lifetime; at the lifetime the backend deletes the Pod (before the kubelet's
`activeDeadlineSeconds`, which is the backstop if we are gone). When an exec ends badly (stream broken, exit
137) the Pod's status is consulted so the error names the real cause (Evicted, a deleted Pod) rather than its
symptom. A container that ended by the agent's own doing (OOMKilled, or its PID 1 TERM-ed from inside:
`status.agents_doing`) is no fault: the exec ends 137, with "memory" in `limits_hit` for an OOM kill.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import posixpath
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Protocol

from openforgerl.sandbox.base import (
    WORKDIR,
    CommandNotFoundError,
    ExecResult,
    SandboxError,
    SandboxSpec,
    VerifierRun,
)
from openforgerl.sandbox.bwrap import VERIFIER_IN, VERIFIER_OUT
from openforgerl.sandbox.kubernetes import commands
from openforgerl.sandbox.kubernetes.client import ExecOutput, ExecTimedOut, KubeApi, Obj
from openforgerl.sandbox.kubernetes.config import KubernetesConfig
from openforgerl.sandbox.kubernetes.errors import KubeSandboxError, PodLost, SandboxExpired
from openforgerl.sandbox.kubernetes.informer import PodInformer
from openforgerl.sandbox.kubernetes.manifests import VERIFIER_MOUNT as VERIFIER_ROOT
from openforgerl.sandbox.kubernetes.status import agents_doing, fault
from openforgerl.sandbox.safefile import MAX_READ_BYTES

KILLED = (124, 137)  # `timeout` exit codes: TERM-ed / KILL-ed at the budget
NOT_FOUND = (b"not found", b"No such file", b"cannot execute", b"Permission denied")
FAULT_GRACE_S = 5.0  # how long to wait for the watch to explain a broken exec
VERIFIER_PATH = "/opt/openforgerl/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SEAL = 'mkdir -p -- "$0" && chmod -R a-w -- "$1" "$2"'
# A fresh /verifier in the services container for each run: only this code writes there (the agent's
# container does not mount it), but a second run must not see the first one's files.
RESET_VERIFIER = 'chmod -R u+w -- "$0" 2>/dev/null; rm -rf -- "$0"/* && mkdir -p -- "$1" "$2"'
# The live workdir as the fresh-Pod path lays it out (`commands.clean_tar`): no FIFO or socket (a verifier
# that opens one would hang into a timeout), no link leaving it (one could point into /verifier/in). A
# folder the agent made untraversable is passed over: the verifier, without capabilities, cannot enter it.
CLEAN_WORKDIR = (
    'find "$0" \\( -type p -o -type s \\) -delete 2>/dev/null; find "$0" -type l -exec sh -c '
    '\'for l; do case "$(readlink -f -- "$l")" in "$0"|"$0"/*) ;; *) rm -f -- "$l";; esac; done\' '
    '"$0" {} + 2>/dev/null; true'
)
# A workdir file read in the services container, which also mounts /verifier and a /tmp of its own: the
# path resolved, every link in it followed, must stay in /workdir and name a regular file (no FIFO).
READ_WORKDIR_FILE = (
    'p=$(realpath -e -- "$0") || exit 1; case "$p" in "$1"/*) ;; *) exit 1;; esac; '
    '[ -f "$p" ] || exit 1; exec cat -- "$p"'
)
END_AGENT = "kill -TERM 1"  # the keep-alive's trap exits; the kernel then kills all its PID namespace held
AGENT_END_S = 30.0  # how long the agent's container may take to show terminated
AGENT_ENDED_ITSELF = "the agent's container has ended: its PID 1 took a TERM from inside"
OOM_KILLED = "the container was OOMKilled: what ran in it went past its memory limit"
SERVICES_OOM = (
    "the services container was OOMKilled: a task service, driven through the API the agent "
    "called, went past its memory limit"
)
EXIT_TAMPERED = 3  # `tasks.verdicts.EXIT_TAMPERED`: the agent's doing, reward 0, never infra


class PodOwner(Protocol):
    """What a sandbox asks of the backend that made its Pod (`backend.KubernetesBackend`): the API, the
    watch, deletes, and a verifier Pod beside it. Declared here so the backend, which makes sandboxes,
    is the only one of the two that imports the other."""

    config: KubernetesConfig
    api: KubeApi
    informer: PodInformer

    def schedule_delete(self, name: str) -> asyncio.Task[None]: ...

    async def release(self, name: str) -> None: ...

    async def wait_for_fault(
        self, name: str, timeout_s: float, ended: Collection[str] = ()
    ) -> Obj | None: ...

    async def wait_ended(self, name: str, container: str, timeout_s: float) -> bool: ...

    async def open_verifier(self, spec: SandboxSpec, n: int) -> KubernetesSandbox: ...


class KubernetesSandbox:
    def __init__(self, backend: PodOwner, pod_name: str, spec: SandboxSpec, deadline: float) -> None:
        self.id = spec.rollout_id
        self.pod_name = pod_name
        self.gateway_url = backend.config.effective_gateway_url
        self.host_workdir: Path | None = None
        self._backend, self._cfg = backend, backend.config
        self._deadline = deadline
        self._expired = False
        self._closed = False
        self._spawned = 0
        self._agent_ended = False  # the agent's container was ended for a verifier beside the services
        self._spec = spec
        self._workdir: bytes | None = None  # the agent's workdir, cleaned, once its Pod is gone
        self._verifies = 0
        self._timer = asyncio.get_running_loop().call_at(deadline, self._expire)

    def remaining_s(self) -> float:
        return self._deadline - asyncio.get_running_loop().time()

    def _expire(self) -> None:
        self._expired = True
        self._backend.schedule_delete(self.pod_name)

    def _check_usable(self) -> None:
        if self._workdir is not None or self._agent_ended:
            raise PodLost(
                f"sandbox {self.id}: the agent's pod or container was ended for the verifier",
                pod=self.pod_name,
                reason="Verified",
            )
        self._check_open()

    def _check_open(self) -> None:
        if self._closed:
            raise PodLost(f"sandbox {self.id} is closed", pod=self.pod_name, reason="Closed")
        if self._expired or self.remaining_s() <= 0:
            raise SandboxExpired(f"sandbox {self.id} outlived its lifetime", pod=self.pod_name)

    async def exec(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str = WORKDIR,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        self._check_usable()
        return await self._exec_in(
            self._cfg.container_name, argv, env=env, cwd=cwd, timeout_s=timeout_s, stdin=stdin
        )

    async def _exec_in(
        self,
        container: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str = WORKDIR,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        self._check_open()
        budget = min(timeout_s if timeout_s is not None else math.inf, self.remaining_s())
        wrapped = commands.exec_argv(argv, cwd=cwd, env=env, timeout_s=budget)
        started = time.monotonic()
        try:
            out = await self._raw_exec(wrapped, stdin or b"", budget + self._cfg.exec_grace_s, container)
        except ExecTimedOut:
            return ExecResult(-9, b"", b"", timed_out=True, duration_s=time.monotonic() - started)
        duration = time.monotonic() - started
        timed_out = out.exit_code in KILLED and duration >= budget - 0.01
        limits: tuple[str, ...] = ()
        if out.exit_code == 137 and not timed_out:  # OOMKilled/Evicted look like 137 from inside
            limits = await self._raise_pod_fault(None, container) or ()
        if out.exit_code in (126, 127) and any(m in out.stderr for m in NOT_FOUND):
            raise CommandNotFoundError(f"{argv[0]!r} not found or not executable in pod {self.pod_name}")
        return ExecResult(out.exit_code, out.stdout, out.stderr, timed_out, duration, limits_hit=limits)

    async def _raw_exec(self, argv: list[str], stdin: bytes, wait_s: float, container: str) -> ExecOutput:
        api, cfg = self._backend.api, self._cfg
        try:
            return await api.exec(cfg.namespace, self.pod_name, container, argv, stdin, wait_s)
        except KubeSandboxError as e:
            limits = await self._raise_pod_fault(e, container)
            if limits is None:
                raise
            return ExecOutput(137, b"", (OOM_KILLED if limits else AGENT_ENDED_ITSELF).encode())

    def _agents_doing(self, pod: Obj | None) -> dict[str, tuple[str, ...]]:
        cfg = self._cfg
        return {} if pod is None else agents_doing(pod, cfg.container_name, cfg.services_container_name)

    async def _raise_pod_fault(
        self, default: KubeSandboxError | None, container: str
    ) -> tuple[str, ...] | None:
        """Raise the Pod's own fault if it shows one within a few seconds, else `default`. Where instead
        `container` ended by the agent's own doing (`status.agents_doing`: its PID 1 TERM-ed from inside,
        an OOM kill), return the limits that ended it (none, or "memory"): never infra. None: no fault."""
        if self._expired:
            raise SandboxExpired(f"sandbox {self.id} outlived its lifetime", pod=self.pod_name)
        seen = self._agents_doing(self.pod())
        if container in seen:
            return seen[container]
        ended = {*seen, *((self._cfg.container_name,) if self._agent_ended else ())}
        pod = await self._backend.wait_for_fault(self.pod_name, FAULT_GRACE_S if default else 1.0, ended)
        doing = self._agents_doing(pod)
        if container in doing:
            return doing[container]
        if pod is not None and (err := fault(pod, {*ended, *doing})) is not None:
            raise err
        if default is not None:
            raise default
        return None

    async def exec_checked(
        self, argv: Sequence[str], stdin: bytes = b"", what: str = "", container: str | None = None
    ) -> bytes:
        if container is None:
            self._check_usable()
        res = await self._exec_in(
            container or self._cfg.container_name, argv, stdin=stdin, timeout_s=self._cfg.boot_timeout_s
        )
        if res.returncode != 0:
            raise SandboxError(
                f"{what or argv[0]} failed ({res.returncode}): {res.stderr.decode(errors='replace')}"
            )
        return res.stdout

    async def spawn(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str = WORKDIR
    ) -> None:
        """A task service, in the services container: the agent reaches it over the Pod's network and
        through /workdir, never its processes (another PID namespace) or its /tmp."""
        self._check_usable()
        self._spawned += 1
        log = f"/tmp/openforgerl-spawn-{self._spawned}.log"
        await self.exec_checked(
            commands.spawn_argv(argv, cwd=cwd, env=env, log_path=log),
            what="spawn",
            container=self._cfg.services_container_name,
        )

    async def read_file(self, path: str) -> bytes:
        """The file, read in the agent's container; once the agent's own doing ended that container (an
        OOM kill, `kill 1`), a file of /workdir is read through the services container, which mounts the
        same volume (what the agent had in /tmp went with its container)."""
        argv = ["cat", "--", path]
        if not self._agent_ended and _within(path, WORKDIR):
            res = await self._agents_or_services(argv, ["sh", "-c", READ_WORKDIR_FILE, path, WORKDIR])
        else:
            res = await self.exec(argv, timeout_s=self._cfg.boot_timeout_s)
        if res.returncode != 0:
            raise FileNotFoundError(path)
        return res.stdout

    async def write_file(self, path: str, data: bytes) -> None:
        await self.exec_checked(commands.write_file_argv(path), stdin=data, what=f"write {path}")

    async def lay_out(self, spec: SandboxSpec) -> None:
        """Put the task's files and copied dirs into /workdir with a single tar-over-exec."""
        if spec.files or spec.copy_dirs:
            blob = commands.tar_bytes(spec.files, spec.copy_dirs)
            await self.exec_checked(commands.untar_argv(WORKDIR), stdin=blob, what="lay out files")

    async def run_verifier(
        self,
        argv: Sequence[str],
        *,
        inputs: Mapping[str, bytes],
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> VerifierRun:
        """Run a trusted verifier in a fresh Pod once the agent's Pod is gone.

        The agent's workdir is copied out (a tar over exec, re-packed by `commands.clean_tar`), the
        agent's Pod is deleted and waited for (the harness and everything it left running go with it),
        then a verifier Pod (`manifests.render_verifier_pod`) gets that workdir, `inputs` at
        /verifier/in, both made read-only, and runs argv with /verifier/out (empty) as its cwd and a
        PATH of image folders only. A later run (a grader's second round) gets a fresh Pod of its own
        over the same copy. argv[0] must be an absolute path outside /workdir and /tmp.

        A sandbox that started a task service keeps its Pod (the service holds the state the verifier
        reads, in its memory) and ends the agent's container instead (`_verify_beside_services`)."""
        if not argv or not argv[0].startswith("/") or _agents(argv[0]):
            raise SandboxError(f"verifier program {argv[0] if argv else ''!r} is not a trusted image path")
        venv = {
            "PATH": VERIFIER_PATH,
            "HOME": VERIFIER_OUT,
            "LANG": "C.UTF-8",
            "TMPDIR": "/tmp",
            **(env or {}),
        }
        if self._spawned:
            return await self._verify_beside_services(argv, inputs, venv, timeout_s)
        if self._workdir is None:
            self._check_usable()
            self._workdir = commands.clean_tar(await self._copy_out_workdir(), WORKDIR)
            self._timer.cancel()
            await self._backend.release(self.pod_name)
        if self._closed:
            raise PodLost(f"sandbox {self.id} is closed", pod=self.pod_name, reason="Closed")
        self._verifies += 1
        verifier = await self._backend.open_verifier(self._spec, self._verifies)
        try:
            return await verifier.verify_here(argv, inputs, venv, timeout_s, self._workdir)
        finally:
            await verifier.aclose()

    async def _copy_out_workdir(self) -> bytes:
        """The agent's workdir as GNU tar reads it. What the agent left running may still change it, and a
        file it made unreadable cannot be read (the Pod has no capabilities): tar then warns and exits 1,
        or is told to go on (`--ignore-failed-read`), and what it could not read is left out, as if the
        agent had not written it. Only a fatal tar error (2 and up, or no archive at all) is the sandbox's.

        Where the agent's own doing ended its container (an OOM kill, `kill 1`), tar reads the same
        /workdir volume from the services container: the verdict is on what the agent left there."""
        argv = commands.agent_tar_out_argv(WORKDIR)
        res = await self._agents_or_services(argv, argv)
        if res.returncode not in (0, 1) or not res.stdout:
            raise SandboxError(
                f"copy the workdir out failed ({res.returncode}): {res.stderr.decode(errors='replace')}"
            )
        return res.stdout

    async def _agents_or_services(self, argv: Sequence[str], services_argv: Sequence[str]) -> ExecResult:
        """argv in the agent's container; once the agent's own doing has ended it (seen before, or by this
        very exec), `services_argv` in the services container, which mounts the same /workdir."""
        agent, budget = self._cfg.container_name, self._cfg.boot_timeout_s
        if agent not in self._agents_doing(self.pod()):
            res = await self.exec(argv, timeout_s=budget)
            if res.returncode != 137 or agent not in self._agents_doing(self.pod()):
                return res
        return await self._exec_in(self._cfg.services_container_name, services_argv, timeout_s=budget)

    async def verify_here(
        self,
        argv: Sequence[str],
        inputs: Mapping[str, bytes],
        env: Mapping[str, str],
        timeout_s: float | None,
        workdir: bytes,
    ) -> VerifierRun:
        """In a verifier Pod: lay out the workdir and the inputs read-only, run argv, read /verifier/out."""
        await self.exec_checked(commands.untar_argv(WORKDIR), stdin=workdir, what="lay out the workdir")
        await self.exec_checked(
            commands.untar_argv(VERIFIER_IN),
            stdin=commands.tar_bytes(inputs, {}),
            what="lay out the verifier's inputs",
        )
        # every capability is dropped, so without write bits even root cannot write there
        await self.exec_checked(
            ["sh", "-c", SEAL, VERIFIER_OUT, WORKDIR, VERIFIER_IN], what="seal the inputs"
        )
        result = await self.exec(argv, env=env, cwd=VERIFIER_OUT, timeout_s=timeout_s)
        raw = await self.exec_checked(commands.tar_out_argv(VERIFIER_OUT), what="read the verifier's outputs")
        return VerifierRun(result, commands.regular_files(raw, MAX_READ_BYTES))

    async def _verify_beside_services(
        self,
        argv: Sequence[str],
        inputs: Mapping[str, bytes],
        env: Mapping[str, str],
        timeout_s: float | None,
    ) -> VerifierRun:
        """End the agent's container, then run the verifier in the services container.

        The agent's container is ended from inside (its PID 1 exits on TERM; the kernel then kills every
        process left in that PID namespace at once, so no fork loop outruns it) and waited for until the
        kubelet reports it terminated: from then on nothing the agent started runs. The verifier gets
        what the fresh-Pod path gives it: its inputs read-only at /verifier/in (a folder the agent's
        container never mounted), an empty /verifier/out as its cwd, a /tmp the agent never touched, the
        live /workdir less what the fresh-Pod path leaves out (`CLEAN_WORKDIR`), and the services on
        127.0.0.1. If the agent's container does not end (it would
        have to have taken over its PID 1), the run is the agent's: exit `EXIT_TAMPERED`, no outputs.

        So is a services container OOMKilled, before the run or during it (`SERVICES_OOM`): its memory
        holds the service's state, which the agent drove through the service's API, and what the verifier
        reads of it and of the workdir, both the agent's making. A services container that ended any
        other way, an eviction, a deleted Pod, stay infra (`_raise_pod_fault`)."""
        svc = self._cfg.services_container_name
        try:
            run: VerifierRun | None = await self._verify_in_services(argv, inputs, env, timeout_s)
        except SandboxError:
            if svc not in self._agents_doing(self.pod()):
                raise
            run = None
        if run is None or svc in self._agents_doing(self.pod()):
            return VerifierRun(
                ExecResult(EXIT_TAMPERED, b"", SERVICES_OOM.encode(), limits_hit=("memory",)), {}
            )
        return run

    async def _verify_in_services(
        self,
        argv: Sequence[str],
        inputs: Mapping[str, bytes],
        env: Mapping[str, str],
        timeout_s: float | None,
    ) -> VerifierRun:
        if not self._agent_ended:
            self._check_usable()
            self._agent_ended = True
            if not await self._end_agent():
                why = f"the agent's container did not end within {AGENT_END_S:.0f}s of TERM to its PID 1"
                return VerifierRun(ExecResult(EXIT_TAMPERED, b"", why.encode()), {})
            await self.exec_checked(
                ["sh", "-c", CLEAN_WORKDIR, WORKDIR],
                what="clean the workdir",
                container=self._cfg.services_container_name,
            )
        svc = self._cfg.services_container_name
        await self.exec_checked(
            ["sh", "-c", RESET_VERIFIER, VERIFIER_ROOT, VERIFIER_IN, VERIFIER_OUT],
            what="reset the verifier's folder",
            container=svc,
        )
        await self.exec_checked(
            commands.untar_argv(VERIFIER_IN),
            stdin=commands.tar_bytes(inputs, {}),
            what="lay out the verifier's inputs",
            container=svc,
        )
        await self.exec_checked(
            ["chmod", "-R", "a-w", "--", VERIFIER_IN], what="seal the inputs", container=svc
        )
        result = await self._exec_in(svc, argv, env=env, cwd=VERIFIER_OUT, timeout_s=timeout_s)
        raw = await self.exec_checked(
            commands.tar_out_argv(VERIFIER_OUT), what="read the verifier's outputs", container=svc
        )
        return VerifierRun(result, commands.regular_files(raw, MAX_READ_BYTES))

    async def _end_agent(self) -> bool:
        """TERM the agent's PID 1 and wait until its container is terminated. The exec itself dies with
        that PID namespace (a broken stream, exit 137) or finds the container already ended (the agent
        ended it): neither is a fault; only the kubelet's report counts."""
        api, cfg = self._backend.api, self._cfg
        with contextlib.suppress(KubeSandboxError, ExecTimedOut):
            await api.exec(
                cfg.namespace,
                self.pod_name,
                cfg.container_name,
                ["sh", "-c", END_AGENT],
                b"",
                cfg.exec_grace_s,
            )
        return await self._backend.wait_ended(self.pod_name, cfg.container_name, AGENT_END_S)

    async def logs(self) -> bytes:
        """The keep-alive container's log (what the Pod itself printed)."""
        return await self._backend.api.logs(self._cfg.namespace, self.pod_name, self._cfg.container_name)

    def pod(self) -> Obj | None:
        return self._backend.informer.get(self.pod_name)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._timer.cancel()
        await self._backend.release(self.pod_name)


def _agents(path: str) -> bool:
    """A path in the agent's space (its workdir or /tmp), where it could have left a program."""
    return _within(path, WORKDIR) or _within(path, "/tmp")


def _within(path: str, root: str) -> bool:
    p = PurePosixPath(posixpath.normpath(path))
    return p == PurePosixPath(root) or PurePosixPath(root) in p.parents
