"""Pure argv builders for what the backend runs inside a Pod through `exec`.

The exec API has no cwd, env or timeout, so each call is wrapped: `sh` changes directory, GNU/busybox
`timeout -s KILL` kills the command's whole process group at its budget (exit 137; `timeout` puts
the command in its own group and signals all of it), `env` adds variables. Images need `sh`,
`timeout`, `env`, `cat` and `tar` — any Debian/Alpine/busybox base has them.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path

CD_AND_EXEC = 'cd -- "$0" || exit 126; exec "$@"'
WRITE_FILE = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
SPAWN = 'log="$1"; shift; nohup "$@" > "$log" 2>&1 < /dev/null &'


def exec_argv(argv: Sequence[str], *, cwd: str, env: Mapping[str, str] | None = None,
              timeout_s: float | None = None) -> list[str]:
    out = ["sh", "-c", CD_AND_EXEC, cwd]
    if timeout_s is not None:
        out += ["timeout", "-s", "KILL", f"{max(timeout_s, 0.001):.3f}"]
    if env:
        out += ["env", *(f"{k}={v}" for k, v in env.items())]
    return out + list(argv)


def spawn_argv(argv: Sequence[str], *, cwd: str, log_path: str,
               env: Mapping[str, str] | None = None) -> list[str]:
    """Start argv detached (its output goes to `log_path`); the exec returns at once."""
    return exec_argv(["sh", "-c", SPAWN, "sh", log_path, *exec_argv(argv, cwd=cwd, env=env)], cwd=cwd)


def write_file_argv(path: str) -> list[str]:
    return ["sh", "-c", WRITE_FILE, "sh", path]


def untar_argv(dest: str) -> list[str]:
    return ["sh", "-c", 'mkdir -p -- "$0" && tar -x -f - -C "$0"', dest]


def tar_bytes(files: Mapping[str, bytes], copy_dirs: Mapping[str, Path]) -> bytes:
    """One tar of the task's files (paths relative to /workdir) and host dirs to copy in."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel, data in files.items():
            info = tarfile.TarInfo(rel.lstrip("/"))
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        for host_dir, rel in copy_dirs.items():
            tar.add(str(host_dir), arcname=str(rel).strip("/") or ".")
    return buf.getvalue()
