"""The exported bundle is inert: no file an agent wrote runs as script in it, opened from disk (file://) or
served by a plain static server (`python -m http.server` from the bundle's folder), in real headless Chromium.

The payloads beacon to a local server (an image request and a `fetch`) and raise an `alert`. The control
opens the same bytes under the agent's own names, from disk and over HTTP: they run there, so a bundle that
kept those names (or let Chromium sniff them) would fail this test. An image URL a rollout sent is shown on
its page but not fetched (the pages' CSP); control: the same page without the policy fetches it.
"""

from __future__ import annotations

import gzip
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from analytics._rundir import ChainWriter, png, record, write_run

from openforgerl.records import RolloutStatus
from openforgerl.viewer.export import export_site
from openforgerl.viewer.site import Site

pytestmark = [
    pytest.mark.gui,
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="needs Debian's chromium"),
]
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
RID = "r-evil"
BUNDLE_NAME = re.compile(r"^[0-9]+\.(txt|bin|png|jpg|gif)$")
SETTLE_MS = 400


class Beacon:
    """A local HTTP server that counts every request (the payloads' only way to say they ran)."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        hits = self.hits

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                self.send_response(204)
                self.send_header("Access-Control-Allow-Origin", "*")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _js(beacon: str, tag: str) -> str:
    return (
        f"new Image().src='{beacon}/{tag}-img';fetch('{beacon}/{tag}-fetch',{{mode:'no-cors'}});"
        f"alert('{tag}')"
    )


def _html(beacon: str, tag: str) -> bytes:
    return f"<!doctype html><html><body><p>hi</p><script>{_js(beacon, tag)}</script></body></html>".encode()


def _xhtml(beacon: str, tag: str) -> bytes:
    return (
        f'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body>'
        f"<script>{_js(beacon, tag)}</script></body></html>"
    ).encode()


def _svg(body: str, attrs: str = "") -> bytes:
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100" {attrs}>{body}</svg>'.encode()


def payloads(beacon: str) -> dict[str, bytes]:
    """Agent-written files: name -> bytes. Tags are the names without dots (the beacon's paths)."""

    def tag(name: str) -> str:
        return re.sub(r"[^a-z0-9]", "", name.lower())

    mht = (
        "From: <saved>\r\nSubject: x\r\nMIME-Version: "
        '1.0\r\nContent-Type: multipart/related; type="text/html"; '
        'boundary="B"\r\n\r\n--B\r\nContent-Type: text/html\r\nContent-Location: http://x/\r\n\r\n'
        f"{_html(beacon, tag('page.mht')).decode()}\r\n--B--\r\n"
    ).encode()
    return {
        "page.html": _html(beacon, tag("page.html")),
        "page.htm": _html(beacon, tag("page.htm")),
        "page.shtml": _html(beacon, tag("page.shtml")),
        "page.xhtml": _xhtml(beacon, tag("page.xhtml")),
        "page.xml": _xhtml(beacon, tag("page.xml")),
        "page.mht": mht,
        "script.svg": _svg(f"<script>{_js(beacon, tag('script.svg'))}</script>"),
        "onload.svg": _svg("<rect width='10' height='10'/>", f'onload="{_js(beacon, tag("onload.svg"))}"'),
        "foreign.svg": _svg(
            "<foreignObject width='100' height='100'><body xmlns='http://www.w3.org/1999/xhtml'>"
            f"<img src='nope' onerror=\"{_js(beacon, tag('foreign.svg'))}\"/></body></foreignObject>"
        ),
        "packed.svgz": gzip.compress(_svg(f"<script>{_js(beacon, tag('packed.svgz'))}</script>")),
        "noext": _html(beacon, tag("noext")),
        "x.html.png": _html(beacon, tag("x.html.png")),
        "x.html.txt": _html(beacon, tag("x.html.txt")),
        "shot.png": png(4, 4) + _html(beacon, tag("shot.png")),
        "bytes.bin": b"\x00\x01" + _html(beacon, tag("bytes.bin")),
        "sub/x.html?.txt": _html(beacon, tag("sub/x.html?.txt")),
    }


# Chromium runs these under the agent's names, from disk and over HTTP (measured: every one beacons and
# alerts). The rest are in the bundle all the same: another browser, or another Chromium, may sniff or unpack
# them (Chromium 156 shows an extensionless file from disk as text/plain, and
# http.server sends it as a download).
ACTIVE = {
    "page.html",
    "page.htm",
    "page.shtml",
    "page.xhtml",
    "page.xml",
    "script.svg",
    "onload.svg",
    "foreign.svg",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StaticServer:
    """`python -m http.server` from a folder, on 127.0.0.1 (what anyone does to share a bundle)."""

    def __init__(self, folder: Path) -> None:
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "http.server",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--directory",
                str(folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError("http.server did not start")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def beacon() -> Iterator[Beacon]:
    b = Beacon()
    yield b
    b.server.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _visit(browser: Any, urls: list[str]) -> list[str]:
    """Open each URL in a fresh page; returns the dialogs raised."""
    dialogs: list[str] = []
    ctx = browser.new_context()
    try:
        for url in urls:
            page = ctx.new_page()
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            try:
                page.goto(url, wait_until="load", timeout=10_000)
            except Exception as exc:  # a download ("Download is starting") is inert by definition
                assert "Download is starting" in str(exc) or "net::ERR_ABORTED" in str(exc), (url, exc)
            page.wait_for_timeout(SETTLE_MS)
            page.close()
    finally:
        ctx.close()
    return dialogs


def _tags(names: set[str]) -> set[str]:
    return {re.sub(r"[^a-z0-9]", "", n.lower()) for n in names}


def _fired(beacon: Beacon) -> set[str]:
    return {h.lstrip("/").rsplit("-", 1)[0] for h in beacon.hits}


def test_control_the_payloads_run_under_the_agents_names(
    browser: Any, beacon: Beacon, tmp_path: Path
) -> None:
    raw = tmp_path / "raw"
    for name, data in payloads(beacon.url).items():
        (raw / name).parent.mkdir(parents=True, exist_ok=True)
        (raw / name).write_bytes(data)
    beacon.hits.clear()
    dialogs = _visit(browser, [(raw / n).as_uri() for n in sorted(ACTIVE)])
    assert _fired(beacon) >= _tags(ACTIVE), sorted(_fired(beacon))
    assert len(dialogs) >= len(ACTIVE) - 1  # an SVG's onload alert and its load event can race
    server = StaticServer(raw)
    try:
        beacon.hits.clear()
        _visit(browser, [f"{server.url}/{n}" for n in sorted(ACTIVE)])
        assert _fired(beacon) >= _tags(ACTIVE), sorted(_fired(beacon))
    finally:
        server.close()


@pytest.fixture(scope="module")
def bundle(beacon: Beacon, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("evil")
    run = write_run(
        root / "run",
        [(record(RID, "claw/evil-01", "zero", RolloutStatus.OK, 1.0), _image_calls(beacon.url))],
        files={RID: payloads(beacon.url)},
    )
    out = root / "bundle"
    export_site(Site.open([run], tokenizer="tiny"), out)
    return out


def _image_calls(beacon: str) -> list[Any]:
    """A request whose images are URLs on the beacon (the harness wrote them; the viewer shows images)."""
    w = ChainWriter(RID)
    msgs = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": f"{beacon}/imageurl-img"}},
            ],
        }
    ]
    w.call({"messages": msgs}, "done", finish="stop")
    return w.calls


def test_image_urls_a_rollout_sent_do_not_call_out(
    browser: Any, beacon: Beacon, bundle: Path, tmp_path: Path
) -> None:
    page_html = (bundle / f"run0-r-{RID}.html").read_text()
    assert f"{beacon.url}/imageurl-img" in page_html  # the page shows the image ...
    control = tmp_path / "control.html"  # ... which any page without the policy fetches
    control.write_text(page_html.replace('http-equiv="Content-Security-Policy"', 'name="x"'))
    beacon.hits.clear()
    _visit(browser, [control.as_uri()])
    assert "/imageurl-img" in beacon.hits
    beacon.hits.clear()
    _visit(browser, [(bundle / f"run0-r-{RID}.html").as_uri()])
    assert beacon.hits == []


def _kept_links(bundle: Path) -> dict[str, str]:
    html = (bundle / f"run0-r-{RID}.html").read_text()
    return {name: href for href, name in re.findall(r'<a href="(files/[^"]+)">([^<]+)</a>', html)}


def test_the_bundle_names_every_kept_file_itself(bundle: Path, beacon: Beacon) -> None:
    links = _kept_links(bundle)
    agent_names = {f"files/{n}" for n in payloads(beacon.url)}
    assert set(links) == agent_names
    kept = [p for p in (bundle / "files").rglob("*") if p.is_file()]
    assert len(kept) == len(agent_names)
    assert all(BUNDLE_NAME.match(p.name) for p in kept), sorted(p.name for p in kept)
    pages = {p.name for p in bundle.iterdir() if p.is_file()}
    assert pages == {
        "index.html",
        "run0-p1.html",
        f"run0-r-{RID}.html",
        "compare-claw_evil-01.html",
    }  # ours only
    suffix = {name.removeprefix("files/"): href.rsplit(".", 1)[1] for name, href in links.items()}
    assert suffix["shot.png"] == "png" and suffix["bytes.bin"] == "bin" and suffix["page.html"] == "txt"
    assert suffix["packed.svgz"] == "bin" and suffix["x.html.png"] == "txt"
    assert (bundle / links["files/page.html"]).read_bytes() == payloads(beacon.url)[
        "page.html"
    ]  # the bytes, as is


def test_the_bundle_runs_nothing_from_disk(browser: Any, beacon: Beacon, bundle: Path) -> None:
    beacon.hits.clear()
    urls = [
        (bundle / f"run0-r-{RID}.html").as_uri(),
        *[(bundle / h).as_uri() for h in _kept_links(bundle).values()],
    ]
    dialogs = _visit(browser, urls)
    assert beacon.hits == [] and dialogs == []


def test_the_bundle_runs_nothing_over_http(browser: Any, beacon: Beacon, bundle: Path) -> None:
    server = StaticServer(bundle)
    try:
        beacon.hits.clear()
        urls = [
            f"{server.url}/run0-r-{RID}.html",
            *[f"{server.url}/{h}" for h in _kept_links(bundle).values()],
        ]
        dialogs = _visit(browser, urls)
    finally:
        server.close()
    assert beacon.hits == [] and dialogs == []


def test_the_rollout_page_shows_the_agents_markup_as_text(browser: Any, beacon: Beacon, bundle: Path) -> None:
    ctx = browser.new_context()
    try:
        page = ctx.new_page()
        page.goto((bundle / f"run0-r-{RID}.html").as_uri())
        shown = page.locator("#files").text_content() or ""  # the previews sit in closed <details>
        assert "<script>" in shown and "files/noext" in shown and "files/foreign.svg" in shown
        assert page.locator("#files script, #files svg, #files img, #files iframe").count() == 0
    finally:
        ctx.close()
