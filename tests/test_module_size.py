"""No module of the package is over 500 lines: past that a module holds more than one idea, and is split
along its seams (a module keeps re-exporting what callers import from it)."""

from __future__ import annotations

from pathlib import Path

import openforgerl

PACKAGE = Path(openforgerl.__file__).resolve().parent
MAX_LINES = 500


def oversized(root: Path, limit: int = MAX_LINES) -> list[tuple[str, int]]:
    """(path relative to `root`, lines) of every Python module under `root` longer than `limit` lines."""
    out = []
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_bytes().splitlines())
        if lines > limit:
            out.append((str(path.relative_to(root)), lines))
    return out


def test_no_module_is_over_500_lines() -> None:
    assert len(list(PACKAGE.rglob("*.py"))) > 100  # the package itself was scanned, not an empty folder
    assert oversized(PACKAGE) == []


def test_the_check_flags_a_501_line_module_and_passes_a_500_line_one(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * 501)
    (tmp_path / "pkg" / "at_limit.py").write_text("x = 1\n" * 500)
    (tmp_path / "pkg" / "no_final_newline.py").write_text("x = 1\n" * 500 + "y = 2")
    assert oversized(tmp_path) == [("pkg/long.py", 501), ("pkg/no_final_newline.py", 501)]
