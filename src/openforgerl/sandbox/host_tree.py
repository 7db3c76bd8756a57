"""The host side's file work on a sandbox's folders, never following a link the agent may have left:
copy a tree (the workdir copy), clear a path for a trusted file, list a tree, lay out a verifier's inputs
and collect its outputs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path

from openforgerl.sandbox.base import SandboxError
from openforgerl.sandbox.hostfiles import write_bytes
from openforgerl.sandbox.safefile import MAX_READ_BYTES, read_under

__all__ = [
    "MAX_ENTRIES",
    "clear_path",
    "collect_outputs",
    "copy_tree",
    "inside",
    "layout_verifier",
    "list_tree",
]

MAX_ENTRIES = 100_000  # entries of an agent's folder copied or listed at most


def copy_tree(src: Path, dest: Path, max_entries: int = MAX_ENTRIES) -> None:
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
                    copy_file(e.path, target)
            except OSError:  # ENOSPC (the quota), a name that vanished: left out
                with contextlib.suppress(OSError):
                    if target.is_file() and not target.is_symlink():
                        target.unlink()


def copy_file(src: str, dest: Path) -> None:
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return
        out = os.open(
            dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, st.st_mode & 0o777
        )
        try:
            while os.sendfile(out, fd, None, 1 << 20):
                pass
        finally:
            os.close(out)
    finally:
        os.close(fd)


def clear_path(root: Path, rel: str) -> None:
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
        if (
            stat.S_ISLNK(st.st_mode)
            or (not last and not stat.S_ISDIR(st.st_mode))
            or (last and not stat.S_ISREG(st.st_mode))
        ):
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(here)
            else:
                here.unlink()
            return


def list_tree(root: Path, max_entries: int) -> list[str]:
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


def layout_verifier(base: Path, inputs: Mapping[str, bytes]) -> None:
    (base / "out").mkdir(parents=True)
    (base / "in").mkdir()
    for rel, data in inputs.items():
        write_bytes(inside(base / "in", rel), data)


def collect_outputs(out: Path) -> dict[str, bytes]:
    """The verifier's own files (trusted writer; still bounded, links not followed)."""
    found: dict[str, bytes] = {}
    for p in sorted(out.rglob("*")):
        if p.is_file() and not p.is_symlink():
            found[str(p.relative_to(out))] = read_under(out, str(p.relative_to(out)), limit=MAX_READ_BYTES)
    return found


def inside(work: Path, rel: str) -> Path:
    target = Path(os.path.normpath(work / rel.lstrip("/")))
    if target != work and work not in target.parents:
        raise SandboxError(f"file {rel!r} escapes /workdir")
    return target
