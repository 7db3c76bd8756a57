"""The viewer in headless Chromium (Debian's `chromium` driven by Playwright); saves docs/viewer/*.png.

Marked `gui`: needs /usr/bin/chromium. The server runs in a thread on 127.0.0.1 with a free port.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from openforgerl.viewer.app import make_app
from openforgerl.viewer.export import export_site
from openforgerl.viewer.site import Site
from viewer._fixture import MAIL_TASK

pytestmark = [
    pytest.mark.gui,
    pytest.mark.skipif(
        shutil.which("chromium") is None and not Path("/usr/bin/chromium").exists(),
        reason="needs Debian's chromium",
    ),
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
DOCS = Path(__file__).resolve().parents[2] / "docs" / "viewer"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def site(runs: tuple[Path, Path]) -> Site:
    return Site.open(list(runs), tokenizer="tiny")


@pytest.fixture(scope="module")
def base_url(site: Site) -> Iterator[str]:
    port = _free_port()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(make_app(site))
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(30)
    yield f"http://127.0.0.1:{port}"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(30)


@pytest.fixture(scope="module")
def page(base_url: str) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    DOCS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1280, "height": 860})
        yield pg
        browser.close()


def test_table_filters(page: Any, base_url: str) -> None:
    page.goto(f"{base_url}/run/0")
    assert page.locator("tr.row").count() == 4
    page.select_option("#f-harness", "codex")
    page.click("#apply")
    page.wait_for_url("**harness=codex**")
    rows = page.locator("tr.row")
    assert rows.count() == 1 and "infra_error:engine" in rows.first.inner_text()
    page.select_option("#f-harness", "")
    page.select_option("#f-infra", "no")
    page.select_option("#f-task", MAIL_TASK)
    page.click("#apply")
    page.wait_for_url("**infra=no**")
    assert page.locator("tr.row").count() == 2
    page.goto(f"{base_url}/run/0")
    page.screenshot(path=str(DOCS / "table.png"))


def test_static_bundle_filters_in_the_browser(page: Any, site: Site, tmp_path: Path) -> None:
    export_site(site, tmp_path / "bundle")
    page.goto((tmp_path / "bundle" / "run0-p1.html").as_uri())
    page.select_option("#f-harness", "cua")
    page.click("#apply")
    visible = [r for r in page.locator("tr.row").all() if r.is_visible()]
    assert len(visible) == 1 and "gui/click-submit-01" in visible[0].inner_text()
    page.click("text=r-gui")
    assert page.locator("svg.screen").count() == 3


def test_rollout_page_shows_calls_and_token_view(page: Any, base_url: str) -> None:
    page.goto(f"{base_url}/run/0/rollout/r-mail-ok")
    assert page.locator("#timeline .call").count() == 4
    assert page.locator("tr.event").count() == 4
    assert "long line " * 80 in page.locator("#events").inner_text()  # full tool output, untruncated
    assert page.locator("#tokens span.m1").count() > 10 and page.locator("#tokens span.c").count() > 0
    assert "fault: error" in page.locator("#events").inner_text()
    assert page.locator("#audit tr").count() == 5
    page.screenshot(path=str(DOCS / "rollout.png"))
    page.goto(f"{base_url}/run/0/rollout/r-mail-bad")
    assert "chain break: prefix_mismatch:sampled" in page.locator("#tokens").inner_text()
    page.locator("#tokens").screenshot(path=str(DOCS / "tokens.png"))


def test_side_by_side_renders(page: Any, base_url: str) -> None:
    page.goto(f"{base_url}/")
    page.click(f"text={MAIL_TASK}")
    assert page.locator("tr.aligned").count() == 6
    assert page.locator("tr.same").count() == 3
    header = page.locator("#compare th").all_inner_texts()
    assert "run-a" in header[0] and "run-b" in header[1]
    page.screenshot(path=str(DOCS / "compare.png"))


def test_gui_rollout_shows_screenshots_and_clicks(page: Any, base_url: str) -> None:
    page.goto(f"{base_url}/run/0/rollout/r-gui")
    assert page.locator("svg.screen").count() == 3
    circles = page.locator("circle.click")
    assert circles.count() == 2
    assert (circles.nth(0).get_attribute("cx"), circles.nth(0).get_attribute("cy")) == ("160.0", "82.0")
    assert page.evaluate("document.querySelector('svg.screen image').getBBox().width") == 320
    page.locator("#gui").screenshot(path=str(DOCS / "gui.png"))


def test_traversal_in_the_browser_is_404(page: Any, base_url: str) -> None:
    for path in ("/run/0/file/r-mail-ok/%2e%2e/%2e%2e/calls.db", "/run/0/file/r-mail-ok/..%2f..%2fcalls.db"):
        assert page.goto(base_url + path).status == 404
