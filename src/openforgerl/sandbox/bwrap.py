"""The bubblewrap command line of a local sandbox (pure functions, no I/O but one `scandir("/")`).

Layout inside:
- the host `/` bound read-only. `/workdir` must exist on the host as a mount point (it cannot be
  created under a read-only bind): as root we create it once (empty); otherwise every top-level
  entry of `/` is bound separately onto bwrap's tmpfs root (symlinks recreated), which is then
  remounted read-only;
- `/workdir` -> the rollout's host dir (rw), `/tmp` -> the rollout's own host tmp dir (rw; shared by
  every exec/spawn of this sandbox so services and harness see the same /tmp; a fresh tmpfs per
  exec would not be), fresh `/dev` and `/proc`;
- the sandboxes' root dir on the host is covered by an empty tmpfs, so no rollout sees another's;
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
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["host_paths_under_tmp", "host_root_args", "sandbox_args", "wrap_command"]

_SKIP = {"proc", "dev", "tmp", "workdir", "lost+found"}


def host_root_args() -> list[str]:
    """The read-only host root (computed once per backend).

    Fast path: when `/workdir` exists on the host (we create it, empty, when root), one
    `--ro-bind / /` is enough — 20 separate binds cost ~10 ms per start on this box.
    """
    if _ensure_workdir_mountpoint():
        return ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    args: list[str] = []
    for entry in sorted(os.scandir("/"), key=lambda e: e.name):
        if entry.name in _SKIP:
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry.path), entry.path]
        elif entry.is_dir() or entry.is_file():
            args += ["--ro-bind", entry.path, entry.path]
    return [*args, "--dev", "/dev", "--proc", "/proc"]


def _ensure_workdir_mountpoint() -> bool:
    try:
        os.makedirs("/workdir", mode=0o755, exist_ok=True)
    except OSError:
        return False
    return os.path.isdir("/workdir")


def _is_under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def host_paths_under_tmp(sandboxes_root: Path) -> list[Path]:
    """Host folders under /tmp that sandboxed programs need: the Python environment, this package and
    the installed tools. The sandbox's own /tmp hides the host's, so a checkout or venv under /tmp
    would vanish inside it; these are bound back read-only."""
    import sys

    from openforgerl.paths import install_root

    package = Path(__file__).resolve().parents[1]
    wanted = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), package, install_root().resolve()}
    tmp = Path("/tmp")
    out = [p for p in wanted if _is_under(p, tmp) and p != tmp and not _is_under(p, sandboxes_root)]
    return sorted({p for p in out if not any(q != p and _is_under(p, q) for q in out)})


def sandbox_args(root_args: Sequence[str], sandboxes_root: Path, workdir: Path, tmpdir: Path,
                 *, unshare_net: bool, tmp_ro_binds: Sequence[Path] = ()) -> list[str]:
    """Everything but the command: mounts and namespaces of one sandbox."""
    args = ["bwrap", *root_args]
    if not _is_under(sandboxes_root, Path("/tmp")):
        args += ["--tmpfs", str(sandboxes_root)]
    args += ["--bind", str(workdir), "/workdir", "--bind", str(tmpdir), "/tmp"]
    for path in tmp_ro_binds:  # after /tmp, so they show through the sandbox's own /tmp
        args += ["--ro-bind", str(path), str(path)]
    args += ["--remount-ro", "/", "--dev-bind", "/dev/null", "/dev/tty"]
    args += ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if unshare_net:
        args.append("--unshare-net")
    return [*args, "--hostname", "sandbox", "--die-with-parent"]


def wrap_command(prefix: Sequence[str], bwrap_args: Sequence[str], argv: Sequence[str],
                 cwd: str) -> list[str]:
    """`prefix` (cgroup launcher, nsenter) + bwrap + `--chdir cwd -- argv`."""
    return [*prefix, *bwrap_args, "--chdir", cwd, "--", *argv]
