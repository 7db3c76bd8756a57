"""The sandbox contract: one isolated environment per rollout.

Backends (`local` bubblewrap, `podman`, `kubernetes`) implement `SandboxBackend`; the orchestrator
only ever sees `Sandbox`. Inside every sandbox the gateway is reachable at `gateway_url` (a loopback
address inside the sandbox's own network namespace, forwarded to the real gateway), and nothing else.
Paths given to `exec` are paths *inside* the sandbox; `/workdir` is the per-rollout writable folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

WORKDIR = "/workdir"


class SandboxError(Exception):
    """The sandbox itself failed (could not start, was lost, exec channel broke): an infra fault."""


class TamperError(Exception):
    """What the agent left behind broke the verifier's rules (a symlink, FIFO, device or oversized file
    where a file was expected, a dead task service): the agent's outcome — reward 0, `agent_failed`,
    the reason in the verifier log — never infra. Raised by `read_file` and by verifier runs."""


class CommandNotFoundError(Exception):
    """`exec`/`spawn` could not start argv[0] (missing or not executable inside the sandbox).

    Not a `SandboxError`: the sandbox is fine, the command is not there. Backends raise it when they
    can tell (local: argv[0] resolved against the sandbox's view of the filesystem before launch;
    podman/kubernetes: the runtime's "executable file not found" exit, 127). The orchestrator
    classifies it as `infra_error:harness_start` when it happens to the harness command.
    """


@dataclass(frozen=True)
class Limits:
    """Per-sandbox resource limits. `None`: the backend's default; `0`: no limit at all.

    The local backend's defaults are on (`local.DEFAULT_LIMITS`); podman and
    kubernetes keep their own defaults. A breach is the agent's failure: an OOM kill and the pids cap
    end the harness (`ExecResult.limits_hit`), a full disk makes the write fail inside (ENOSPC) — the
    rollout is scored, never dropped as infra.
    """

    cpus: float | None = None
    memory_mb: int | None = None
    pids: int | None = None
    disk_mb: int | None = None
    """Size of the tmpfs holding /workdir and /tmp together (local backend, root only)."""

    def resolved(self, defaults: Limits) -> Limits:
        """Each `None` taken from `defaults`, then each `0` turned into `None` (= unlimited)."""
        values: dict[str, Any] = {}
        for f in fields(self):
            mine = getattr(self, f.name)
            values[f.name] = (getattr(defaults, f.name) if mine is None else mine) or None
        return Limits(**values)


@dataclass(frozen=True)
class SandboxSpec:
    """What a rollout needs from its sandbox."""

    rollout_id: str
    gateway_host: str = "127.0.0.1"
    gateway_port: int = 0
    image: str | None = None  # podman / kubernetes image; local uses the host root read-only
    files: Mapping[str, bytes] = field(default_factory=dict)  # relative to /workdir, laid out at start
    copy_dirs: Mapping[str, Path] = field(default_factory=dict)  # host dir -> relative target in /workdir
    env: Mapping[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    ro_binds: Sequence[Path] = ()  # extra host paths shown read-only inside (e.g. a harness's own tools)
    lifetime_s: float = 3600.0  # outer deadline; the backend kills everything past it


@dataclass(frozen=True)
class ExecResult:
    returncode: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    duration_s: float = 0.0
    killed_by_signal: int | None = None
    """The sandbox's launcher died of this signal, sent from outside the sandbox and not by us (the
    timeout kill is `timed_out`): the command was cut, and must never be re-run."""
    limits_hit: tuple[str, ...] = ()
    """Limits breached during this command: "memory" (OOM kill), "pids", "disk" (quota full)."""


@dataclass(frozen=True)
class VerifierRun:
    """A verifier command run apart from the agent (`LocalSandbox.run_verifier`)."""

    result: ExecResult
    outputs: Mapping[str, bytes]  # files the verifier wrote to its private output folder


class Sandbox(Protocol):
    id: str
    gateway_url: str  # e.g. "http://127.0.0.1:18000", valid inside the sandbox
    host_workdir: Path | None  # where /workdir lives on the host, when the backend has one

    async def exec(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str = WORKDIR,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        """Run a command to completion; on timeout kill its whole process tree, `timed_out=True`."""
        ...

    async def spawn(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str = WORKDIR
    ) -> None:
        """Start a long-running background process (a task's services); killed at `aclose`."""
        ...

    async def read_file(self, path: str) -> bytes:
        """A file's bytes. Under /workdir or /tmp (the agent's space) no link is followed, a FIFO
        never blocks, only a regular file up to 8 MiB is read; otherwise `TamperError`."""
        ...

    async def write_file(self, path: str, data: bytes) -> None:
        """Write under /workdir or /tmp (links and non-regular files refused: `TamperError`)."""
        ...

    async def aclose(self) -> None:
        """Kill every process and remove everything the sandbox created. Idempotent."""
        ...


class SandboxBackend(Protocol):
    name: str

    async def open_sandbox(self, spec: SandboxSpec) -> Sandbox: ...

    async def aclose(self) -> None: ...


def limits_breached(sandbox: object) -> list[str]:
    """The sandbox limits breached so far ("memory": an OOM kill, "pids", "cpu", "disk"), as far as the
    backend tells (the local one: its cgroup counters and its quota, `LocalSandbox.limits_breached`;
    others: nothing known). For a verifier that must tell a limit the agent hit from its own failure,
    without knowing the backend."""
    breached = getattr(sandbox, "limits_breached", None)
    return list(breached()) if callable(breached) else []
