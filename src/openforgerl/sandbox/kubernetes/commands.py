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


def exec_argv(
    argv: Sequence[str], *, cwd: str, env: Mapping[str, str] | None = None, timeout_s: float | None = None
) -> list[str]:
    out = ["sh", "-c", CD_AND_EXEC, cwd]
    if timeout_s is not None:
        out += ["timeout", "-s", "KILL", f"{max(timeout_s, 0.001):.3f}"]
    if env:
        out += ["env", *(f"{k}={v}" for k, v in env.items())]
    return out + list(argv)


def spawn_argv(
    argv: Sequence[str], *, cwd: str, log_path: str, env: Mapping[str, str] | None = None
) -> list[str]:
    """Start argv detached (its output goes to `log_path`); the exec returns at once."""
    return exec_argv(["sh", "-c", SPAWN, "sh", log_path, *exec_argv(argv, cwd=cwd, env=env)], cwd=cwd)


def write_file_argv(path: str) -> list[str]:
    return ["sh", "-c", WRITE_FILE, "sh", path]


def untar_argv(dest: str) -> list[str]:
    return ["sh", "-c", 'mkdir -p -- "$0" && tar -x -f - -C "$0"', dest]


def tar_out_argv(src: str) -> list[str]:
    """The folder `src` as a tar on stdout (links stored as links, never followed)."""
    return ["tar", "-c", "-f", "-", "-C", src, "."]


def agent_tar_out_argv(src: str) -> list[str]:
    """The agent's folder `src` as a tar on stdout, going on past files it cannot read (GNU tar: the
    rollout image's)."""
    return ["tar", "--ignore-failed-read", "-c", "-f", "-", "-C", src, "."]


def clean_tar(raw: bytes, dest: str) -> bytes:
    """What the agent left, re-packed so that extracting it under `dest` cannot reach outside it.

    The archive comes out of the agent's Pod, so every name and link in it is the agent's: each member
    goes through tarfile's `data` filter (no absolute or `..` names, no link pointing outside `dest`,
    no device or FIFO, no set-id bits); a member it refuses is left out, as if the agent had not
    written it (the verifier then scores what is missing)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src:
            try:
                kept = tarfile.data_filter(member, dest)
            except tarfile.FilterError:
                continue
            kept = kept.replace(
                uid=0, gid=0, uname="", gname="", mode=0o777 if kept.mode is None else kept.mode, deep=False
            )  # the filter leaves a link's mode and every owner unset
            dst.addfile(kept, src.extractfile(member) if kept.isreg() else None)
    return out.getvalue()


def regular_files(raw: bytes, limit: int) -> dict[str, bytes]:
    """The regular files of a tar (a verifier's output folder), each at most `limit` bytes."""
    found: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
        for member in tar:
            if member.isreg() and member.size <= limit:
                data = tar.extractfile(member)
                if data is not None:
                    found[member.name.removeprefix("./")] = data.read()
    return found


def tar_bytes(files: Mapping[str, bytes], copy_dirs: Mapping[str, Path]) -> bytes:
    """One tar of the task's files (paths relative to /workdir) and host dirs to copy in."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel, data in files.items():
            info = tarfile.TarInfo(rel.lstrip("/"))
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        for host_dir, target in copy_dirs.items():
            tar.add(str(host_dir), arcname=str(target).strip("/") or ".")
    return buf.getvalue()
