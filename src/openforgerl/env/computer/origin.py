"""The screen's browser shows the task's apps and nothing else.

The browser runs in the service process and sees the sandbox as the service does: `file://` reads any
file there (`/proc/<service pid>/cmdline` held the verifier's secret), shows directory listings, and any
other origin is a server the agent started itself. The desktop Chromium has a URL bar the agent types
into; every page is reachable from a link. So every Chromium the service starts gets an `OriginGuard`:

- a Playwright route on its context aborts every request whose origin is not the apps' (`file://` and
  `view-source:file://` included: Chromium routes them too, measured), before anything loads;
- after each input, any page of the context that is elsewhere (a `chrome://` page, which no route sees, or
  an error page of a refused navigation) is sent back to the start page (a second tab is closed), and the
  action is answered as the agent's error (`ActionError`, HTTP 400), naming the refused URL.

Only the apps' origin passes: scheme, host and port of the apps' base URL.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any
from urllib.parse import urlsplit

from openforgerl.env.computer.actions import ActionError, Computer, Screen

__all__ = ["GuardedComputer", "OriginGuard", "app_url", "origin_of"]

PUMP_MS = 250
"""After an xdotool input: how long Playwright's loop runs before the pages are checked. An Enter in the URL
bar reached the route within 100 ms once and later once (two tries, on 2 cores at load 17+); one that arrives
later is still held at the route (nothing loads until the loop runs again, and then it is refused) and is
reported by the next input."""
LOAD_TIMEOUT_S = 5.0
HOME_TRIES = 3


def origin_of(url: str) -> str:
    """`scheme://host:port` of an http(s) URL, "" for anything else (file:, data:, chrome:, about:)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return ""
    return f"{parts.scheme}://{parts.hostname}:{port}"


def app_url(apps_url: str, path: str) -> str:
    """A page of the task's apps: `path` ("/mail") on `apps_url`. ValueError when the result is elsewhere
    (a task's `start_url` / `url` is a path, never a URL of its own)."""
    origin = origin_of(apps_url)
    url = apps_url.rstrip("/") + "/" + str(path).lstrip("/")
    if not origin or origin_of(url) != origin:
        raise ValueError(
            f"the screen opens only the task's apps: {path!r} is not a path on {apps_url or '(no apps)'}"
        )
    return url


class OriginGuard:
    """Keeps one Playwright browser context on `origin`; `home` is where an escaped page is sent back."""

    def __init__(self, origin: str, home: str) -> None:
        if not origin or origin_of(home) != origin:
            raise ValueError(f"the guard's home {home!r} is not on {origin!r}")
        self.origin, self.home = origin, home
        self.refused: list[str] = []
        self.navigations = 0

    def allows(self, url: str) -> bool:
        return origin_of(url) == self.origin

    def install(self, context: Any) -> None:
        context.route("**/*", self._route)

    def _route(self, route: Any) -> None:
        request = route.request
        if request.is_navigation_request():
            self.navigations += 1
        if self.allows(request.url):
            route.continue_()
            return
        if request.is_navigation_request():
            self.refused.append(request.url)
        route.abort("blockedbyclient")

    def check(self, context: Any) -> None:
        """After an input: every page back on the apps; ActionError when something was refused."""
        refused, self.refused = self.refused, []
        # a refused navigation may still commit its error page after this check (then a screenshot taken
        # during that commit fails: measured), so the first page is reloaded home whatever its URL says
        away = self.restore(context, force=bool(refused))
        self.refused.clear()
        if refused or away:
            what = (refused or away)[0]
            raise ActionError(
                f"refused to open {what[:200]!r}: this screen shows only the task's apps at "
                f"{self.origin} (sent back to {self.home})"
            )

    def restore(self, context: Any, force: bool = False) -> list[str]:
        """Send every page that is not on the apps back home (the first, or the first anyway with `force`)
        or close it (others); returns the URLs they were on. Never raises: a screenshot calls it too, and
        its failure would be the environment's fault."""
        away: list[str] = []
        for n, page in enumerate(list(context.pages)):
            url = page.url
            if self.allows(url) and not (force and n == 0):
                continue
            if not self.allows(url):
                away.append(url)
            with contextlib.suppress(Exception):
                if n == 0:
                    self._home(page)
                else:
                    page.close()
        return away

    def _home(self, page: Any) -> None:
        # a refused navigation's error page can interrupt the first goto (measured): then once more
        for _ in range(HOME_TRIES):
            with contextlib.suppress(Exception):
                page.goto(self.home, wait_until="load")
            if self.allows(page.url):
                return
            page.wait_for_timeout(50)


class GuardedComputer:
    """The desktop's `Computer` when a Chromium runs on it: input goes to X (xdotool), and after each input
    Playwright's loop runs (the route sees the requests only while it does) until a navigation the input
    started has loaded, then `OriginGuard.check`. A screenshot first sends any stray page home."""

    def __init__(self, inner: Computer, context: Any, guard: OriginGuard) -> None:
        self.inner, self.context, self.guard = inner, context, guard
        self.screen: Screen = inner.screen
        self.loads = 0
        for page in context.pages:
            page.on("load", self._loaded)
        context.on("page", lambda page: page.on("load", self._loaded))

    def _loaded(self, _: Any) -> None:
        self.loads += 1

    def _pump(self, ms: float) -> None:
        pages = self.context.pages
        if pages:
            with contextlib.suppress(Exception):
                pages[0].wait_for_timeout(ms)

    def _after(self, navs: int, loads: int) -> None:
        self._pump(PUMP_MS)
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        while (
            self.guard.navigations != navs
            and self.loads == loads
            and not self.guard.refused
            and time.monotonic() < deadline
        ):
            self._pump(10)
        self.guard.check(self.context)

    def _mark(self) -> tuple[int, int]:
        return self.guard.navigations, self.loads

    def click(self, x: int, y: int, button: str = "left", count: int = 1) -> None:
        mark = self._mark()
        self.inner.click(x, y, button=button, count=count)
        self._after(*mark)

    def drag(self, x: int, y: int, to_x: int, to_y: int) -> None:
        mark = self._mark()
        self.inner.drag(x, y, to_x, to_y)
        self._after(*mark)

    def type(self, text: str) -> None:
        mark = self._mark()
        self.inner.type(text)
        self._after(*mark)

    def key(self, keys: list[str]) -> None:
        mark = self._mark()
        self.inner.key(keys)
        self._after(*mark)

    def scroll(self, x: int, y: int, dx: int, dy: int) -> None:
        mark = self._mark()
        self.inner.scroll(x, y, dx, dy)
        self._after(*mark)

    def screenshot(self) -> bytes:
        self._pump(1)
        self.guard.restore(self.context)
        return self.inner.screenshot()

    def close(self) -> None:
        self.inner.close()
