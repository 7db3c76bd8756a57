"""The documentation: the site builds strictly, the README stays a front door, the admin API page lists
every admin route, and no tracked file speaks of the project's process instead of the software.

`mkdocs build --strict` fails on a link to a missing page or anchor (shown by the control below), so a
page that moves or a heading that is renamed breaks this test, not a reader's click.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web

from openforgerl.gateway.admin import add_admin_routes

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 200

# The README's first two commands, exactly: set up + the main job, then the tests.
FIRST_COMMANDS = [
    "bash scripts/setup.sh && .venv/bin/openforgerl train examples/quickstart.yaml",
    ".venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup",
]

# Process language: the product speaks of the software, never of how it was built. Each pattern is
# precise enough that hex colours (`#222`), URL anchors (`page.md#section`), f-strings (`{x}#0`) and
# fixture text ("Tech Weekly #112" in a .py or .json file) do not match.
EVERYWHERE = {
    "a design-notes citation": re.compile(r"DESIGN\.md|reference/notes/"),
    "a stop number": re.compile(r"\b[Ss]tops? \d+\b"),
    "a stop reference": re.compile(r"(?i)\b(?:this|last|next|previous|earlier) stop\b|\bstops ago\b"),
    "an issue number": re.compile(r"(?i)\bissues? #?\d+\b|\(#\d+\)|(?<![\w&#/{}])#\d+'s\b"),
}
# In Markdown prose a bare `#13` is an issue reference (headings need a space after `#`).
PROSE_ONLY = {"an issue reference": re.compile(r"(?<![\w&#/{}\[(])#\d{1,3}(?=[\s)'’,.:;–-]|$)", re.MULTILINE)}
# This file names the patterns it looks for.
NOT_SCANNED = {"tests/test_docs.py"}


def _mkdocs_build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    out = _mkdocs_build(ROOT, tmp_path / "site")
    assert out.returncode == 0, out.stderr[-4000:]
    assert (tmp_path / "site" / "gateway-api" / "index.html").is_file()


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """Control: the same build over a copy with one link to a missing anchor and one to a missing page."""
    copy = tmp_path / "copy"
    (copy / "docs").mkdir(parents=True)
    for path in (ROOT / "docs").rglob("*"):
        if path.is_file():
            target = copy / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    (copy / "mkdocs.yml").write_bytes((ROOT / "mkdocs.yml").read_bytes())
    index = copy / "docs" / "index.md"
    index.write_text(index.read_text() + "\n[gone](engines.md#no-such-heading) [lost](no-such-page.md)\n")
    out = _mkdocs_build(copy, tmp_path / "site")
    assert out.returncode != 0
    assert "no-such-heading" in out.stderr and "no-such-page.md" in out.stderr


def test_the_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"


def test_the_readme_shows_the_two_commands_first() -> None:
    text = (ROOT / "README.md").read_text()
    first_block = re.search(r"```(?:bash|sh)?\n(.*?)```", text, flags=re.DOTALL)
    assert first_block, "README.md has no code block"
    commands = [
        line.strip()
        for line in first_block.group(1).splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    assert commands == FIRST_COMMANDS


def missing_links(text: str, base: Path) -> list[str]:
    """Relative Markdown links in `text` whose file does not exist under `base` (URLs and anchors skipped)."""
    targets = re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", text)
    return [t for t in targets if "://" not in t and not (base / t).exists()]


def test_the_readme_links_resolve() -> None:
    """GitHub renders the README outside the site, so mkdocs does not check its links."""
    text = (ROOT / "README.md").read_text()
    assert "](docs/gateway-api.md)" in text
    assert not missing_links(text, ROOT)
    assert missing_links("[x](docs/no-such-page.md) [y](https://example.com/a.md)", ROOT) == [
        "docs/no-such-page.md"
    ]


def _admin_routes() -> set[str]:
    app = web.Application()
    add_admin_routes(app)
    return {
        f"`{route.method}` | `{route.resource.canonical}`"
        for route in app.router.routes()
        if route.resource is not None and route.method != "HEAD"
    }


def test_the_gateway_api_page_lists_every_admin_route() -> None:
    page = (ROOT / "docs" / "gateway-api.md").read_text()
    routes = _admin_routes()
    assert len(routes) >= 10, routes  # the app really was built (control for a vacuous pass)
    missing = sorted(r for r in routes if f"| {r} |" not in page)
    assert not missing, f"docs/gateway-api.md does not list: {missing}"


def _tracked_text_files() -> list[tuple[str, str]]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60)
    files = []
    for name in listed.stdout.decode().split("\0"):
        path = ROOT / name
        if not name or name in NOT_SCANNED or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        files.append((name, data.decode("utf-8", errors="replace")))
    return files


def process_language(name: str, text: str) -> list[str]:
    """`file:line: what` for each process-language match in one file."""
    patterns = {**EVERYWHERE, **(PROSE_ONLY if name.endswith(".md") else {})}
    found = []
    for what, pattern in patterns.items():
        for m in pattern.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{name}:{line}: {what}: {m.group(0)!r}")
    return found


def test_no_tracked_file_speaks_of_the_process() -> None:
    files = _tracked_text_files()
    assert any(name == "README.md" for name, _ in files)
    hits = [hit for name, text in files for hit in process_language(name, text)]
    assert not hits, "\n".join(hits[:40])


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("README.md", "Built at " + "stop" + " 29, measured then."),
        ("docs/x.md", "Status by issue (#13–#20): see #16's regression check."),
        ("src/a.py", '"""The admin plane (issue 14 item 1, ' + "DESIGN" + '.md principle 7)."""'),
        ("tests/b.py", "# in " + "stop" + " 30's CI run"),
        ("tests/c.py", '"""No import cycles (#16)."""'),
        ("src/d.py", "Measured (reference/notes/gui.md §5.2)."),
    ],
)
def test_the_patterns_catch_process_language(name: str, text: str) -> None:
    """Control: each kind of process language is caught."""
    assert process_language(name, text)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("src/web.py", "body{color:#222;background:#fff} .note{color:#555}"),
        ("src/t.html", '<svg style="border:1px solid #999">'),
        ("docs/a.md", "See [the token](threat-model.md#getting-the-admin-token) and `#!/usr/bin/env bash`."),
        ("src/world.py", '{"subject": "Tech Weekly #112"}'),
        ("src/site.py", 'labels = [f"{labels[0]}#0", f"{labels[1]}#1"]'),
        ("docs/b.md", "## Heading\n\nStop the gateway; the janitor runs each pass; a round trip for Codex."),
    ],
)
def test_the_patterns_leave_product_text_alone(name: str, text: str) -> None:
    assert not process_language(name, text)
