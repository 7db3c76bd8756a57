"""Path containment for everything the viewer serves: only regular files inside the run directory.

Refused (the caller answers 404): an empty or absolute path, any `..` or `.` segment, a backslash or
NUL, a percent-encoded separator or dot left after the router decoded the path once, any component
that is a symlink (even one pointing back inside), and a resolved path outside the root.
(SWE-agent's inspector served `../` and bound 0.0.0.0: CVE-2026-75482.)
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["safe_file"]


def safe_file(root: Path, rel: str) -> Path | None:
    """`root/rel` if it is a regular, link-free file inside `root`, else None."""
    if not rel or "\\" in rel or "\x00" in rel or "%" in rel or rel.startswith("/"):
        return None
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    base = root.resolve()
    current = base
    for part in parts:
        current = current / part
        if current.is_symlink():
            return None
    try:
        resolved = current.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not resolved.is_relative_to(base) or not resolved.is_file():
        return None
    return resolved
