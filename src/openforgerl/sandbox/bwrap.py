"""The bubblewrap command line of a local sandbox (pure functions, no I/O but `lstat`s of host paths).

Layout inside — an allow-list of binds on an empty tmpfs root, never the host root (with
`--ro-bind / /` the task's `solution/solve.sh`, `/etc/shadow`, `/root` and host unix sockets were all
reachable from a rollout):
- `SYSTEM_RO_BINDS`: what programs need to run at all (`/usr`, the `/bin`/`/lib*` links, and the
  handful of `/etc` files libc, Python, Node and TLS read). No `/root`, `/home`, `/run`, `/var`,
  `/etc/shadow`, `/etc/resolv.conf` (no DNS: the only peer is the gateway on 127.0.0.1);
- `runtime_ro_binds()`: the project's Python (the venv and its base interpreter — possibly under
  `/root/.pyenv`, then only that version's folder is shown), this package (its task suites masked:
  they hold `solution/` and `tests/`), and the harness tools dir; plus `extra` per backend or per
  sandbox (`SandboxSpec.ro_binds`, `$OPENFORGERL_SANDBOX_RO_BINDS`, colon-separated). They are bound
  *after* `/tmp`, so a checkout or venv under the host's /tmp shows through the sandbox's own /tmp;
- `/workdir` -> the rollout's host dir (rw; `/workspace` links to it, the name upstream Claw-Eval's
  tasks use), `/tmp` -> the rollout's own host tmp dir (rw; shared by
  every exec/spawn of this sandbox so services and harness see the same /tmp), fresh `/dev`, `/proc`;
- own user (root mapped to root, no host capabilities), PID, IPC, UTS and cgroup namespaces;
  the network namespace is joined from outside (`nsenter --net=`) or unshared (`--unshare-net`);
- `--die-with-parent` + PID namespace: killing the outer bwrap kills every process of the exec,
  including children that ignore SIGTERM or call setsid.
- no new session (`--new-session`, `setsid`, `start_new_session`): creating a session doubles the
  start cost on this kernel (`setsid true` 4.9 ms vs `true` 1.2 ms; bwrap 6.8 vs 13.7 ms — the
  scheduler autogroup a new session gets). What `--new-session` guards against, TIOCSTI keystroke
  injection into the orchestrator's terminal, is closed instead by masking `/dev/tty` with
  `/dev/null` (stdio are pipes, `/dev/pts` is private and other PIDs are invisible, so no other
  handle to the terminal exists inside).

The verifier's sandbox (`verifier_args`) uses the same system binds, the rollout's workdir
read-only, a fresh empty `/tmp`, and its own input (ro) and output (rw) folders under `/verifier`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path

__all__ = [
    "MASKED_IN_PACKAGE",
    "SYSTEM_RO_BINDS",
    "VERIFIER_IN",
    "VERIFIER_OUT",
    "Mounts",
    "runtime_ro_binds",
    "sandbox_args",
    "system_args",
    "verifier_args",
    "wrap_command",
]

SYSTEM_RO_BINDS: tuple[str, ...] = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",  # links to usr/ on merged-/usr hosts
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/localtime",
    "/etc/os-release",
    "/etc/mime.types",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki",
    "/etc/profile",
    "/etc/bash.bashrc",
    "/etc/inputrc",
    "/etc/terminfo",
)
"""Host paths shown read-only in every sandbox (missing ones are skipped; symlinks are recreated)."""

MASKED_IN_PACKAGE: tuple[str, ...] = ("envs/claw/suite/tasks", "envs/gui/suite/tasks")
"""Folders of this package covered by an empty tmpfs inside: task folders with solutions and tests."""

MASKED_FOREIGN: dict[str, tuple[str, ...]] = {"tau2": ("data/tau2/domains/*/tasks*.json",)}
"""Files of other installed packages covered inside by `/dev/null` (which cannot even be opened there: the
sandbox's binds are nodev), by package and glob under its folder:
an installed benchmark's task files hold every task's gold answers (tau2: the gold actions), while its
code and the rest of its data (the domains' DBs and policies) must stay readable for its services."""

RO_BINDS_ENV = "OPENFORGERL_SANDBOX_RO_BINDS"
VERIFIER_IN = "/verifier/in"
WORKSPACE_ALIAS = "/workspace"
VERIFIER_OUT = "/verifier/out"


def _is_under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _dedupe(paths: Iterable[Path]) -> list[Path]:
    """Existing paths, sorted, without those already inside another one."""
    found = sorted({p for p in paths if os.path.lexists(p)})
    return [p for p in found if not any(q != p and _is_under(p, q) for q in found)]


def runtime_ro_binds(extra: Iterable[Path | str] = ()) -> list[Path]:
    """The project's own host folders a harness needs inside: Python, this package, the tools dir."""
    from openforgerl.harness.install import tools_dir

    wanted = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent, _package(), tools_dir()]
    wanted += [Path(p) for p in os.environ.get(RO_BINDS_ENV, "").split(":") if p]
    return _dedupe(Path(os.path.realpath(p)) for p in [*wanted, *extra])


def _package() -> Path:
    return Path(__file__).resolve().parents[1]


class Mounts:
    """Inside path -> host path of one sandbox, for `host_path` (longest prefix wins; None = hidden)."""

    def __init__(self, table: Iterable[tuple[str, Path | None]]) -> None:
        self.table = sorted(table, key=lambda kv: len(kv[0]), reverse=True)

    def host(self, inside: str) -> Path | None:
        p = Path(os.path.normpath(inside))
        for inner, outer in self.table:
            ip = Path(inner)
            if _is_under(p, ip):
                return None if outer is None else outer / p.relative_to(ip)
        return None


def system_args() -> list[str]:
    """The system part of every sandbox: `SYSTEM_RO_BINDS`, fresh /dev and /proc (computed once)."""
    args: list[str] = []
    for path in SYSTEM_RO_BINDS:
        if os.path.islink(path) and os.path.dirname(path) == "/":  # /bin -> usr/bin
            args += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            args += ["--ro-bind", path, path]
    return [*args, "--dev", "/dev", "--proc", "/proc"]


def system_mounts() -> list[tuple[str, Path | None]]:
    return [(p, Path(p)) for p in SYSTEM_RO_BINDS if os.path.lexists(p)]


def _ro_bind_args(ro_binds: Sequence[Path], hide: Sequence[Path] = ()) -> list[str]:
    args: list[str] = []
    for path in ro_binds:
        args += ["--ro-bind", str(path), str(path)]
    for path in hide:  # e.g. the sandboxes' root, if it happens to lie inside a bound folder
        if any(_is_under(path, p) for p in ro_binds):
            args += ["--tmpfs", str(path)]
    package = _package()
    if any(_is_under(package, p) for p in ro_binds):
        for rel in MASKED_IN_PACKAGE:
            if (package / rel).is_dir():
                args += ["--tmpfs", str(package / rel)]
    for path in foreign_masked():
        if any(_is_under(path, p) for p in ro_binds):
            args += ["--ro-bind", "/dev/null", str(path)]
    return args


def masked_mounts() -> list[tuple[str, Path | None]]:
    masked: list[tuple[str, Path | None]] = [(str(_package() / rel), None) for rel in MASKED_IN_PACKAGE]
    return masked + [(str(p), None) for p in foreign_masked()]


@cache
def foreign_masked() -> tuple[Path, ...]:
    """The installed files `MASKED_FOREIGN` names (found without importing their packages)."""
    from importlib.util import find_spec

    found: list[Path] = []
    for package, globs in MASKED_FOREIGN.items():
        spec = find_spec(package)
        folder = Path(spec.origin).parent if spec is not None and spec.origin else None
        found += [p.resolve() for g in globs for p in sorted(folder.glob(g))] if folder else []
    return tuple(found)


def _namespaces(unshare_net: bool) -> list[str]:
    args = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if unshare_net:
        args.append("--unshare-net")
    return [*args, "--hostname", "sandbox", "--die-with-parent"]


def sandbox_args(
    root_args: Sequence[str],
    workdir: Path,
    tmpdir: Path,
    *,
    unshare_net: bool,
    ro_binds: Sequence[Path] = (),
    hide: Sequence[Path] = (),
) -> list[str]:
    """Everything but the command: mounts and namespaces of one sandbox."""
    args = ["bwrap", *root_args, "--bind", str(workdir), "/workdir", "--bind", str(tmpdir), "/tmp"]
    args += ["--symlink", "/workdir", WORKSPACE_ALIAS]  # upstream Claw-Eval's tasks name it /workspace
    args += _ro_bind_args(ro_binds, hide)  # after /tmp, so they show through the sandbox's own /tmp
    args += ["--remount-ro", "/", "--dev-bind", "/dev/null", "/dev/tty"]
    return [*args, *_namespaces(unshare_net)]


def verifier_args(
    root_args: Sequence[str],
    workdir: Path,
    inputs: Path,
    outputs: Path,
    *,
    unshare_net: bool,
    ro_binds: Sequence[Path] = (),
    hide: Sequence[Path] = (),
    tmp_mb: int = 64,
) -> list[str]:
    """A fresh sandbox for the verifier: the rollout's workdir read-only, nothing else of the agent's."""
    args = [
        "bwrap",
        *root_args,
        "--ro-bind",
        str(workdir),
        "/workdir",
        "--size",
        str(tmp_mb * 1024 * 1024),
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        str(inputs),
        VERIFIER_IN,
        "--bind",
        str(outputs),
        VERIFIER_OUT,
    ]
    args += _ro_bind_args(ro_binds, hide)
    args += ["--remount-ro", "/", "--dev-bind", "/dev/null", "/dev/tty"]
    return [*args, *_namespaces(unshare_net)]


def wrap_command(
    prefix: Sequence[str], bwrap_args: Sequence[str], argv: Sequence[str], cwd: str
) -> list[str]:
    """`prefix` (cgroup launcher, nsenter) + bwrap + `--chdir cwd -- argv`."""
    return [*prefix, *bwrap_args, "--chdir", cwd, "--", *argv]
