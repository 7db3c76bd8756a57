"""The screen shows the task's apps and nothing else, and each rollout's service has its own token.

- Desktop (the real service process, a headful Chromium under Xvfb, input by xdotool through `POST /act`):
  the agent types `file://` URLs (a host file, `/etc/passwd`) or its own server's URL into the URL bar ->
  400 naming the URL, and the page is back on the apps. Controls: an unguarded Chromium shows the host
  file's text; typing another apps page into the same URL bar opens it.
- Browser (headless `PlaywrightComputer`): a link on the page to another origin -> the click is a 400,
  the page stays; control: a link to another apps page opens it.
- Tokens: two sandboxes of one task runtime; rollout A's token is refused by B's service (`/__health`,
  `/__state`: 404), B's own token works, and each verify reaches its own service.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import GUI_SUITE, needs_gui

from openforgerl.env.computer.actions import ActionError
from openforgerl.env.computer.origin import app_url, origin_of
from openforgerl.env.computer.service import TOKEN_HEADER
from openforgerl.sandbox.base import SandboxSpec
from openforgerl.tasks.loader import load_runtime

pytestmark = [pytest.mark.gui, needs_gui]
DESKTOP_TASK = GUI_SUITE / "desktop-calendar-01"
BROWSER_TASK = GUI_SUITE / "board-move-01"
MARKER = "HOST-SECRET-7f3a91"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AgentServer:
    """A page the agent serves itself on another loopback port."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = b"<html><body><h1 id='agent'>AGENT PAGE</h1></body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def agent_server() -> Iterator[AgentServer]:
    s = AgentServer()
    yield s
    s.server.shutdown()


def test_app_url_stays_on_the_apps() -> None:
    assert app_url("http://127.0.0.1:8080", "/mail") == "http://127.0.0.1:8080/mail"
    assert origin_of(app_url("http://127.0.0.1:8080", "file:///etc/passwd")) == "http://127.0.0.1:8080"
    assert origin_of(app_url("http://127.0.0.1:8080", "//evil.example/x")) == "http://127.0.0.1:8080"
    with pytest.raises(ValueError, match="only the task's apps"):
        app_url("", "/mail")  # a browser screen without apps has nothing to show
    assert origin_of("file:///etc/passwd") == origin_of("chrome://version") == ""


# -- desktop: the real service process ----------------------------------------------------------------


class Service:
    def __init__(self, config: Path, token: str, tmp: Path) -> None:
        self.apps_port, self.port, self.token = _free_port(), _free_port(), token
        self.url = f"http://127.0.0.1:{self.port}"
        self.apps = f"http://127.0.0.1:{self.apps_port}"
        self.log = (tmp / "service.log").open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-m",
                "openforgerl.envs.gui.service",
                "--config",
                str(config),
                "--token",
                token,
                "--apps-port",
                str(self.apps_port),
                "--computer-port",
                str(self.port),
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, (tmp / "service.log").read_text()[-2000:]
            try:
                urllib.request.urlopen(self.url + "/healthz", timeout=5).read()
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("the GUI service did not come up")

    def post(self, path: str, body: dict[str, Any], token: bool = False) -> tuple[int, Any]:
        req = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", **({TOKEN_HEADER: self.token} if token else {})},
        )
        try:
            with urllib.request.urlopen(req, timeout=90) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def goto_by_keyboard(self, url: str) -> tuple[int, Any]:
        """What an agent does: focus the URL bar, type, press Enter. The answer to Enter, or, when Chromium
        sent the navigation after the guard's wait (under load), to the next input, which reports it."""
        assert self.post("/act", {"action": "key", "keys": "ctrl+l"})[0] == 200
        assert self.post("/act", {"action": "type", "text": url})[0] == 200
        answer = self.post("/act", {"action": "key", "keys": "enter"})
        return answer if answer[0] != 200 else self.post("/act", {"action": "key", "keys": "shift"})

    def on_page(self, selector: str) -> bool:
        return self.post("/locate", {"selector": selector}, token=True)[0] == 200

    def close(self) -> None:
        os.killpg(self.proc.pid, 9)
        self.proc.wait(30)
        self.log.close()


@pytest.fixture(scope="module")
def desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    tmp = tmp_path_factory.mktemp("desktop")
    config = tmp / "config.json"
    config.write_bytes(load_runtime(DESKTOP_TASK).files()[".gui/config.json"])
    svc = Service(config, "desktop-t0ken", tmp)
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def host_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("host") / "secret.txt"
    path.write_text(f"{MARKER}\n")
    return path


def test_control_an_unguarded_chromium_shows_the_host_file(host_file: Path) -> None:
    from playwright.sync_api import sync_playwright

    from openforgerl.env.computer.chromium import CHROMIUM_ARGS, chromium_path

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(host_file.as_uri())
        assert MARKER in page.inner_text("body")
        browser.close()


@pytest.mark.parametrize("target", ["host", "passwd", "agent"])
def test_desktop_url_bar_refuses_everything_but_the_apps(
    desktop: Service, host_file: Path, agent_server: AgentServer, target: str
) -> None:
    url = {"host": host_file.as_uri(), "passwd": "file:///etc/passwd", "agent": agent_server.url}[target]
    status, body = desktop.goto_by_keyboard(url)
    assert status == 400 and f"refused to open {url!r}" in body["error"], body
    assert desktop.apps in body["error"]
    assert desktop.on_page("#delete-e1")  # back on the calendar's week page


def test_control_the_url_bar_opens_another_apps_page(desktop: Service) -> None:
    status, body = desktop.goto_by_keyboard(f"{desktop.apps}/calendar/new")
    assert status == 200, body
    assert desktop.on_page("#title")  # the new-event form: the typed URL was opened
    assert desktop.goto_by_keyboard(f"{desktop.apps}/calendar")[0] == 200 and desktop.on_page("#delete-e1")


# -- browser: headless PlaywrightComputer on the apps ----------------------------------------------


@pytest.fixture
def browser_computer(apps_server: Any) -> Iterator[tuple[Any, str]]:
    from openforgerl.envs.browser.computer import PlaywrightComputer
    from openforgerl.envs.gui.suite.app_data import CARDS

    _, base = apps_server({"board": {"cards": CARDS}})
    computer = PlaywrightComputer(app_url(base, "/board"))
    yield computer, base
    computer.close()


def _link(computer: Any, href: str) -> tuple[int, int]:
    """Put a link on the page (as an app page that shows what someone wrote would), return its centre."""
    computer.page.evaluate(
        """href => {const a = document.createElement('a'); a.href = href; a.id = 'x';
        a.textContent = 'LINK'; a.style = 'position:fixed;left:300px;top:300px;font-size:40px;z-index:9';
        document.body.appendChild(a);}""",
        href,
    )
    box = computer.locate("#x")
    return box["cx"], box["cy"]


def test_browser_link_to_another_origin_is_refused(
    browser_computer: tuple[Any, str], agent_server: AgentServer
) -> None:
    computer, base = browser_computer
    with pytest.raises(ActionError, match=f"refused to open {agent_server.url!r}"):
        computer.click(*_link(computer, agent_server.url))
    assert origin_of(computer.page.url) == origin_of(base) and computer.page.url.endswith("/board")
    assert computer.screenshot().startswith(b"\x89PNG")


def test_browser_link_to_a_file_stays_on_the_apps(browser_computer: tuple[Any, str]) -> None:
    computer, base = browser_computer
    try:
        computer.click(*_link(computer, "file:///etc/passwd"))
    except ActionError as exc:  # refused by the guard, or by Chromium itself (no file:// from a web page)
        assert "file:///etc/passwd" in str(exc)
    assert computer.page.url.startswith(base) and "root:" not in computer.page.content()


def test_control_browser_link_to_another_apps_page_opens(browser_computer: tuple[Any, str]) -> None:
    computer, base = browser_computer
    computer.click(*_link(computer, f"{base}/board?view=x"))
    assert computer.page.url == f"{base}/board?view=x"


# -- tokens: one per rollout ---------------------------------------------------------------------------

PROBE = """
import sys, urllib.request, urllib.error
token = sys.stdin.read().strip()
out = []
for url in ("http://127.0.0.1:8765/__health", "http://127.0.0.1:8080/__state"):
    try:
        req = urllib.request.Request(url, headers={"X-Openforgerl-Token": token})
        with urllib.request.urlopen(req, timeout=30) as r:
            out.append(r.status)
    except urllib.error.HTTPError as e:
        out.append(e.code)
print(out)
"""


async def _two_rollouts() -> dict[str, Any]:
    from openforgerl.sandbox.local import LocalBackend

    rt = load_runtime(BROWSER_TASK)
    backend = LocalBackend()
    boxes = [
        await backend.open_sandbox(SandboxSpec(rollout_id=f"gui-token-{n}", files=rt.files(), lifetime_s=600))
        for n in "ab"
    ]
    try:
        for box in boxes:
            await box.spawn(list(rt.service_argv()))
        for box in reversed(boxes):  # bound by what each service holds, not by the order they were started
            await rt.service_started(box)
        a, b = boxes
        ta, tb = rt.token_for(a), rt.token_for(b)

        async def probe(box: Any, token: str) -> str:
            res = await box.exec([sys.executable, "-I", "-c", PROBE], stdin=token.encode(), timeout_s=60)
            return res.stdout.decode().strip()

        return {
            "distinct": ta != tb and ta and tb,
            "a_on_b": await probe(b, ta),
            "b_on_b": await probe(b, tb),
            "b_on_a": await probe(a, tb),
            "a_on_a": await probe(a, ta),
            "verdicts": [(await rt.verify(box)).reward for box in boxes],
        }
    finally:
        for box in boxes:
            await box.aclose()
        await backend.aclose()


@pytest.fixture(scope="module")
def rollouts() -> dict[str, Any]:
    return asyncio.run(_two_rollouts())


def test_a_rollouts_token_is_refused_by_another_rollouts_service(rollouts: dict[str, Any]) -> None:
    assert rollouts["distinct"]
    assert rollouts["a_on_b"] == "[404, 404]" and rollouts["b_on_a"] == "[404, 404]"


def test_control_each_rollouts_own_token_works(rollouts: dict[str, Any]) -> None:
    assert rollouts["b_on_b"] == "[200, 200]" and rollouts["a_on_a"] == "[200, 200]"
    assert rollouts["verdicts"] == [0.0, 0.0]  # each verifier reached its own service (none did the task)
