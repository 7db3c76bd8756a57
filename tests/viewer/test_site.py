"""The viewer's pages, routes and path containment, in-process (no browser)."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from openforgerl.viewer.align import align_events
from openforgerl.viewer.app import make_app
from openforgerl.viewer.export import export_site
from openforgerl.viewer.safe import safe_file
from openforgerl.viewer.site import Site
from viewer._fixture import CLICKS, GUI_TASK, MAIL_TASK, SCREEN


@pytest.fixture(scope="module")
def site(runs: tuple[Path, Path]) -> Site:
    return Site.open(list(runs), tokenizer="tiny", page_size=2)


def _with_client(site: Site, body: Callable[[TestClient], Awaitable[None]]) -> None:
    async def main() -> None:
        async with TestClient(TestServer(make_app(site))) as client:
            await body(client)

    asyncio.run(main())


async def _raw_status(client: TestClient, path: str) -> int:
    """GET with the path sent byte for byte (no client-side normalisation of `..` or `%2e`)."""
    reader, writer = await asyncio.open_connection(client.host, client.port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    writer.close()
    return status


def test_table_pages_and_filters(site: Site) -> None:
    page = site.table_page(0, {}, 1)
    assert page is not None and page.context["total"] == 4 and page.context["pages"] == 2
    assert [r.rollout_id for r in page.context["rows"]] == ["r-mail-ok", "r-mail-bad"]
    only = site.table_page(0, {"harness": "codex"}, 1)
    assert only is not None and [r.status for r in only.context["rows"]] == ["infra_error:engine"]
    assert only.context["rows"][0].infra_reason == "infra_error:engine"
    infra = site.table_page(0, {"infra": "no", "task": MAIL_TASK}, 1)
    assert infra is not None and infra.context["total"] == 2
    assert site.table_page(5, {}, 1) is None


def test_rollout_page_has_calls_events_tokens_audit_files(site: Site) -> None:
    page = site.rollout_page(0, "r-mail-ok")
    assert page is not None
    ctx = page.context
    assert len(ctx["calls"]) == 4
    assert [e.tool for e in ctx["events"]] == ["mail_list", "mail_list", "mail_read", "mail_reply"]
    assert ctx["events"][0].fault == "error" and ctx["events"][1].output.startswith('{"messages"')
    assert "long line " * 80 in ctx["events"][2].output  # untruncated
    assert len(ctx["chains"]) == 1 and ctx["chains"][0].trained_tokens > 0
    assert ctx["audit"] is not None and len(ctx["audit"]) == 4
    assert {f["rel"] for f in ctx["files"]} >= {"audit.json", "files/reply.txt", "files/notes/todo.md"}
    assert ctx["behaviour"]["er"] == 1.0


def test_token_view_shows_the_chain_break_and_its_cause(site: Site) -> None:
    page = site.rollout_page(0, "r-mail-bad")
    assert page is not None
    chains = page.context["chains"]
    assert len(chains) == 2 and chains[1].started_by is not None
    # the harness rewrote its history after 20 tokens; the rewrite diverges inside sampled text
    assert chains[1].started_by == "prefix_mismatch:sampled"
    assert "at call 2" in chains[1].break_detail and "common prefix 20" in chains[1].break_detail
    trained = [t for t in chains[0].response if t.trained]
    assert trained and all(t.logprob is not None and 0.0 <= t.heat <= 1.0 for t in trained)
    assert any(not t.trained for t in chains[0].response)  # tool output between calls: mask 0


def test_gui_frames_and_clicks(site: Site) -> None:
    page = site.rollout_page(0, "r-gui")
    assert page is not None
    frames = page.context["frames"]
    assert [(f.width, f.height) for f in frames] == [SCREEN] * 3
    assert [(c.x, c.y) for f in frames for c in f.clicks] == [(float(x), float(y)) for x, y in CLICKS]


def test_compare_aligns_tool_calls(site: Site) -> None:
    page = site.compare_page(MAIL_TASK)
    assert page is not None
    rows = page.context["rows"]
    pairs = [(r.left.tool if r.left else None, r.right.tool if r.right else None) for r in rows]
    assert ("mail_read", "mail_read") in pairs and ("mail_reply", "mail_reply") in pairs
    assert (None, "mail_search") in pairs
    assert site.compare_page("no/such-task") is None
    assert site.compare_page(GUI_TASK) is not None


def test_align_is_an_lcs() -> None:
    from analytics._streams import ev, stream

    a = stream(ev("mail_list"), ev("mail_read", id="1"), ev("mail_reply", id="1", body="x"))
    b = stream(ev("mail_search", query="q"), ev("mail_read", id="1"), ev("mail_reply", id="1", body="y"))
    kinds = [r.kind for r in align_events(a, b)]
    assert kinds.count("gap") == 2 and kinds[-2:] == ["same", "tool"]


def test_routes_serve_pages_and_files(site: Site) -> None:
    async def body(client: TestClient) -> None:
        for path in (
            "/",
            "/run/0",
            "/run/0?harness=zero&page=1",
            "/run/0/rollout/r-mail-ok",
            "/run/1/rollout/s-gui",
            f"/compare?task={MAIL_TASK}",
        ):
            resp = await client.get(path)
            assert resp.status == 200, path
        resp = await client.get("/run/0/file/r-mail-ok/files/reply.txt")
        assert resp.status == 200 and await resp.text() == "Confirmed.\n"
        assert (await client.get("/run/0/rollout/nope")).status == 404
        assert (await client.get("/run/7")).status == 404

    _with_client(site, body)


TRAVERSALS = [
    "/run/0/file/r-mail-ok/../../calls.db",
    "/run/0/file/r-mail-ok/files/../../../calls.db",
    "/run/0/file/r-mail-ok/%2e%2e/%2e%2e/calls.db",
    "/run/0/file/r-mail-ok/files%2f..%2f..%2f..%2fcalls.db",
    "/run/0/file/r-mail-ok/%252e%252e/%252e%252e/calls.db",
    "/run/0/file/r-mail-ok//etc/passwd",
    "/run/0/file/r-mail-ok/%2fetc%2fpasswd",
    "/run/0/file/..%2f..%2f/etc/passwd",
    "/run/0/file/r-mail-ok/files/escape",
    "/run/0/file/r-mail-ok/files/inside-link",
    "/run/0/file/r-link/secret.txt",
    "/run/0/file/r-mail-ok/files/..\\..\\calls.db",
    "/run/0/rollout/..%2f..%2fcalls.db",
]


def test_traversal_attempts_get_404(site: Site, runs: tuple[Path, Path], tmp_path: Path) -> None:
    root = runs[0]
    (tmp_path / "secret.txt").write_text("secret")
    files = root / "rollouts" / "r-mail-ok" / "files"
    if not (files / "escape").is_symlink():
        os.symlink("/etc/passwd", files / "escape")
        os.symlink("reply.txt", files / "inside-link")  # even a link that stays inside is refused
        os.symlink(tmp_path, root / "rollouts" / "r-link")

    async def body(client: TestClient) -> None:
        for path in TRAVERSALS:
            assert await _raw_status(client, path) == 404, path
        assert await _raw_status(client, "/run/0/file/r-mail-ok/files/reply.txt") == 200

    _with_client(site, body)
    assert safe_file(root, "rollouts/r-mail-ok/files/reply.txt") is not None
    for rel in (
        "",
        "/etc/passwd",
        "../x",
        "rollouts/./r-mail-ok/files/reply.txt",
        "calls.db/../calls.db",
        "rollouts/r-mail-ok/files/escape",
        "rollouts/r-link/secret.txt",
    ):
        assert safe_file(root, rel) is None, rel


def test_export_is_a_static_bundle(site: Site, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    n = export_site(site, out)
    names = {p.name for p in out.iterdir()}
    assert {"index.html", "run0-p1.html", "run0-p2.html", "run1-p1.html", "run0-r-r-gui.html"} <= names
    assert n == len([p for p in out.iterdir() if p.suffix == ".html"])
    html = (out / "run0-r-r-mail-ok.html").read_text()
    kept = {name: href for href, name in re.findall(r'<a href="(files/[^"]+)">([^<]+)</a>', html)}
    assert set(kept) == {
        "audit.json",
        "files/notes/todo.md",
        "files/reply.txt",
    }  # the link and the escape are not kept
    assert (out / kept["files/reply.txt"]).read_text() == "Confirmed.\n"
    assert sorted(p.name for p in (out / "files" / "run0" / "r-mail-ok").iterdir()) == [
        "0.txt",
        "1.txt",
        "2.txt",
    ]
    assert 'href="run0-p1.html"' in html and "/run/0" not in html
