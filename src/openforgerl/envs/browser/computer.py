"""`PlaywrightComputer`: the action API on one headless Chromium page (Playwright's sync API).

Chromium is the SDK's (`env.computer.chromium`: Debian's binary by path, the flags every GUI kind uses).

Pixel actions go through `page.mouse` / `page.keyboard`, exactly what a pixel agent does; after each
action one round trip to the page and, if the action started a navigation, its `load` event (bounded
by `LOAD_TIMEOUT_MS`), so the next screenshot shows the result without a fixed sleep. The screenshot is the
viewport (1280x720, DPR 1), PNG.
"""

from __future__ import annotations

import contextlib
from typing import Any

from openforgerl.env.computer.actions import KEYS, Screen
from openforgerl.env.computer.chromium import CHROMIUM, CHROMIUM_ARGS, box_of, chromium_path
from openforgerl.env.computer.origin import OriginGuard, origin_of

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "PlaywrightComputer", "chromium_path"]

SETTLE_S = 0.01
LOAD_TIMEOUT_MS = 5000
SCREENSHOT_TIMEOUT_MS = 10000
"""Playwright's default is 30 s, as long as a harness's whole request to the computer service: a hung
screenshot (seen once in CI, 30 s and more under load) then timed out in the client, where nothing counts
it as the environment's fault, and the rollout ended as the agent's failure. With 10 s per try, the
service's two tries and its settle wait (`LOAD_TIMEOUT_MS`) end well inside the harnesses' 60 s timeouts,
so the service answers 503 and counts the fault itself (infra), as it does for a dead screen."""


class PlaywrightComputer:
    """One browser, one page. `start_url` is opened before the first screenshot; the page never leaves
    its origin (`origin.OriginGuard`: anything else is refused, the input answered as the agent's error)."""

    def __init__(
        self,
        start_url: str,
        screen: Screen = Screen(),
        *,
        headless: bool = True,
        playwright: Any = None,
        browser: Any = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.screen = screen
        self._own_pw = playwright is None
        if playwright is None:
            from playwright.sync_api import sync_playwright

            playwright = sync_playwright().start()
        self._pw = playwright
        self._own_browser = browser is None
        self.browser = browser or playwright.chromium.launch(
            executable_path=chromium_path(), headless=headless, args=[*CHROMIUM_ARGS, *(extra_args or [])]
        )
        viewport = {"width": screen.width, "height": screen.height}
        self.context = self.browser.new_context(viewport=viewport, device_scale_factor=1)
        self.guard = OriginGuard(origin_of(start_url), start_url)
        self.guard.install(self.context)
        self.page = self.context.new_page()
        self._navs = self._loads = 0
        self.page.on("request", self._on_request)
        self.page.on("load", self._on_load)
        self.page.goto(start_url, wait_until="load")

    def _on_request(self, request: Any) -> None:
        if request.is_navigation_request() and request.frame == self.page.main_frame:
            self._navs += 1

    def _on_load(self, _: Any) -> None:
        self._loads += 1

    def _mark(self) -> tuple[int, int]:
        return self._navs, self._loads

    def _settle(self, mark: tuple[int, int]) -> None:
        """After an input: one round trip to the page (the input's handlers, e.g. a form submit, have
        run and any navigation request has reached us), then, if a navigation started, its `load`."""
        with contextlib.suppress(Exception):  # the context may be torn down by the navigation itself
            self.page.evaluate("0")
        deadline = LOAD_TIMEOUT_MS / 1000 / SETTLE_S
        while self._navs != mark[0] and self._loads == mark[1] and not self.guard.refused and deadline > 0:
            self.page.wait_for_timeout(SETTLE_S * 1000)
            deadline -= 1
        self.guard.check(self.context)

    def click(self, x: int, y: int, button: str = "left", count: int = 1) -> None:
        mark = self._mark()
        self.page.mouse.click(x, y, button=button, click_count=count)
        self._settle(mark)

    def drag(self, x: int, y: int, to_x: int, to_y: int) -> None:
        m, mark = self.page.mouse, self._mark()
        m.move(x, y)
        m.down()
        m.move(to_x, to_y, steps=8)
        m.up()
        self._settle(mark)

    def type(self, text: str) -> None:
        mark = self._mark()
        self.page.keyboard.type(text)
        self._settle(mark)

    def key(self, keys: list[str]) -> None:
        mark = self._mark()
        names = [KEYS[k][0] if k in KEYS else k for k in keys]
        self.page.keyboard.press("+".join(names))
        self._settle(mark)

    def scroll(self, x: int, y: int, dx: int, dy: int) -> None:
        self.page.mouse.move(x, y)
        self.page.mouse.wheel(dx * 100, dy * 100)
        self.page.wait_for_timeout(150)  # smooth scrolling

    def screenshot(self) -> bytes:
        self.guard.restore(self.context)
        data: bytes = self.page.screenshot(type="png", timeout=SCREENSHOT_TIMEOUT_MS)
        return data

    def locate(self, selector: str) -> dict[str, int]:
        """Oracle only: the element's box in screen pixels (viewport = screen here)."""
        return box_of(self.page, selector, (0, 0))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.context.close()
        if self._own_browser:
            with contextlib.suppress(Exception):
                self.browser.close()
        if self._own_pw:
            with contextlib.suppress(Exception):
                self._pw.stop()
