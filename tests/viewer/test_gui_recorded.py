"""The viewer on a GUI rollout recorded by the real gateway (not inline test images).

One zero-gui rollout of a browser task (real orchestrator, local sandbox, the task's real browser
and computer service, the in-process gateway storing every screenshot in the call log's blob store;
the scripted policy only decides the clicks) is opened in the live app and in the exported bundle:
each screen must be a `data:` image whose decoded bytes are the blob the gateway stored (sha256),
at the size the gateway recorded, with a marker where each click landed (the pixel zero-gui's own
`to_pixels` sent to the computer service). Headless Chromium then shows the rollout page and the
screen area must not be blank. Controls: the same page without the blob store shows a "not in the
blob store" note and no image (so the byte check can fail), and a blank screen measures as blank.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import itertools
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from openforgerl.harness.zero_gui.tool import to_pixels
from openforgerl.records import CallRecord
from openforgerl.store.sqlite import SQLiteCallStore
from openforgerl.viewer.app import make_app
from openforgerl.viewer.export import export_site
from openforgerl.viewer.site import Site
from viewer._gui_run import gui_missing, record_gui_run

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
pytestmark = [
    pytest.mark.gui,
    pytest.mark.timeout(300),
    pytest.mark.skipif(bool(gui_missing()), reason=f"GUI stack missing: {gui_missing()}"),
]

_IMAGE = re.compile(r'<image href="([^"]*)" x="0" y="0" width="(\d+)" height="(\d+)"/>')
_CIRCLE = re.compile(r'<circle class="click" cx="([\d.]+)" cy="([\d.]+)"')
_FRAME = re.compile(
    r'<div class="frame" id="frame-(\d+)">(.*?)</div>\s*(?=<div class="frame"|</section>)', re.S
)


@dataclass(frozen=True)
class Recorded:
    run: Path
    rollout_id: str
    gave_up: str
    """A second rollout of the same task whose policy ended it at once: status ok, reward 0."""
    calls: list[CallRecord]
    blobs: dict[str, bytes]
    """sha256 -> the bytes the gateway stored, read back through the store's own reader."""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    run = tmp_path_factory.mktemp("gui") / "run"
    # the failure first: the run's first two rollouts are then (fail, pass), so the side by side's
    # pass-then-fail default is told apart from "the first two"
    gave_up = asyncio.run(record_gui_run(run, give_up=True))
    rid = asyncio.run(record_gui_run(run))
    store = SQLiteCallStore(run / "calls.db")
    try:
        calls = asyncio.run(store.list_calls(rid))
        blobs = {ref.sha256: store.read_blob(ref.sha256) for c in calls for ref in c.images}
    finally:
        asyncio.run(store.aclose())
    assert calls and all(blobs.values()), "the gateway stored no screenshot"
    return Recorded(run, rid, gave_up, calls, {k: v for k, v in blobs.items() if v is not None})


def _expected_clicks(calls: list[CallRecord]) -> dict[int, list[tuple[int, int]]]:
    """call index -> the pixels zero-gui clicked for that call's `computer_use` calls (its own `to_pixels`),
    read from the next request's history as the harness sent it."""
    out: dict[int, list[tuple[int, int]]] = {}
    ordered = sorted(calls, key=lambda c: c.index)
    for call, nxt in itertools.pairwise(ordered):
        ref = call.images[-1]
        for msg in nxt.request["messages"][len(call.request["messages"]) :]:
            for tc in msg.get("tool_calls") or []:
                args = json.loads(tc["function"]["arguments"])
                if "coordinate" in args:
                    out.setdefault(call.index, []).append(
                        to_pixels(args["coordinate"], ref.width, ref.height)
                    )
    return out


def _check_screens(html: str, rec: Recorded) -> None:
    frames = dict(_FRAME.findall(html))
    image_calls = sorted(c.index for c in rec.calls if c.images)
    assert sorted(int(k) for k in frames) == image_calls and len(image_calls) >= 3, frames.keys()
    clicks = _expected_clicks(rec.calls)
    assert sum(map(len, clicks.values())) >= 2, (
        clicks
    )  # the task needs clicks: markers are tested, not skipped
    for call in rec.calls:
        if not call.images:
            continue
        body = frames[str(call.index)]
        [(href, width, height)] = _IMAGE.findall(body)
        assert href.startswith("data:image/png;base64,"), href[:40]
        raw = base64.b64decode(href.split(",", 1)[1], validate=True)
        ref = call.images[-1]  # what the model saw when it answered
        assert hashlib.sha256(raw).hexdigest() == ref.sha256 and raw == rec.blobs[ref.sha256]
        assert (int(width), int(height)) == (ref.width, ref.height) == (1280, 720)
        marks = [(round(float(x)), round(float(y))) for x, y in _CIRCLE.findall(body)]
        assert marks == clicks.get(call.index, []), (call.index, marks)


def _live_page(site: Site, path: str) -> str:
    async def main() -> str:
        async with TestClient(TestServer(make_app(site))) as client:
            resp = await client.get(path)
            assert resp.status == 200
            return await resp.text()

    return asyncio.run(main())


def test_live_app_shows_the_stored_screenshots_with_their_clicks(recorded: Recorded) -> None:
    html = _live_page(Site.open([recorded.run]), f"/run/0/rollout/{recorded.rollout_id}")
    _check_screens(html, recorded)
    # the call timeline shows the same stored bytes, never an unresolved reference
    assert "openforgerl-blob:" not in html


def test_exported_bundle_shows_the_stored_screenshots_with_their_clicks(
    recorded: Recorded, tmp_path: Path
) -> None:
    export_site(Site.open([recorded.run]), tmp_path / "bundle")
    html = (tmp_path / "bundle" / f"run0-r-{recorded.rollout_id}.html").read_text()
    _check_screens(html, recorded)
    assert "default-src 'none'; img-src data:" in html  # the screenshots need no relaxed policy


def test_control_without_the_blob_store_there_is_no_image_and_a_note(
    recorded: Recorded, tmp_path: Path
) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    for part in recorded.run.glob("calls.db*"):  # the log and its WAL, not its blob store
        if part.is_file():
            shutil.copy(part, bare / part.name)
    html = _live_page(Site.open([bare]), f"/run/0/rollout/{recorded.rollout_id}")
    with pytest.raises(ValueError):  # the screen check fails here: a frame with no image to unpack
        _check_screens(html, recorded)
    assert not _IMAGE.findall(html) and html.count("is not in the call log's blob store") == len(
        [c for c in recorded.calls if c.images]
    )


def test_a_reward_0_ok_is_red_and_side_by_side_opens_on_the_pass_and_the_fail(recorded: Recorded) -> None:
    site = Site.open([recorded.run])
    failed = site.indexes[0].get(recorded.gave_up)
    assert failed is not None and (failed.status, failed.reward) == ("ok", 0.0)  # what the user saw in green
    page = _live_page(site, f"/run/0/rollout/{recorded.gave_up}")
    assert re.search(r'<td class="st" id="status">ok</td><td><span class="res fail" id="reward"', page)
    table = _live_page(site, "/run/0")
    assert re.findall(r'<td class="st">ok</td><td><span class="res (\w+)"', table) == ["fail", "pass"]
    compare = _live_page(site, "/compare?task=gui/board-add-01")
    sides = re.findall(r'/run/0/rollout/(\w+)"', compare)[:2]
    assert sides == [recorded.rollout_id, recorded.gave_up], sides
    assert re.findall(r'class="res (\w+) side-result"', compare) == ["pass", "fail"]


def _variance(png: bytes) -> float:
    from PIL import Image, ImageStat

    image = Image.open(io.BytesIO(png)).convert("L")
    inner = image.crop((3, 3, image.width - 3, image.height - 3))  # the element's 1 px border is not content
    stat = ImageStat.Stat(inner)
    return float(stat.var[0])


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def test_chromium_shows_the_screens_from_the_bundle(recorded: Recorded, browser: Any, tmp_path: Path) -> None:
    export_site(Site.open([recorded.run]), tmp_path / "bundle")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    blocked: list[str] = []
    page.on("requestfailed", lambda r: blocked.append(r.url))
    page.goto((tmp_path / "bundle" / f"run0-r-{recorded.rollout_id}.html").as_uri())
    sizes = page.evaluate("""() => [...document.querySelectorAll('svg.screen image')].map(i => {
        const b = i.getBBox(); return [b.width, b.height]; })""")
    assert sizes and all(s == [1280, 720] for s in sizes), sizes
    DOCS.mkdir(parents=True, exist_ok=True)
    page.locator("#gui").screenshot(path=str(DOCS / "gui-recorded.png"))
    assert page.locator("#gui g.click-marker").count() >= 2
    page.evaluate("document.querySelectorAll('svg.screen g.click-marker').forEach(g => g.remove())")
    first = page.locator("svg.screen").first
    shown = _variance(first.screenshot())
    assert shown > 100, shown  # the board app's page as the gateway stored it, not an empty box
    # control: the same element with its image removed measures blank, so the check above can fail
    page.evaluate("document.querySelectorAll('svg.screen image').forEach(i => i.remove())")
    assert _variance(first.screenshot()) < 5
    assert not [u for u in blocked if not u.startswith("data:")], blocked
    page.close()
