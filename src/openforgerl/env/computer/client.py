"""`HttpComputer`: the `Computer` API over the computer service's HTTP routes (stdlib only).

What a GUI harness or an oracle inside the sandbox uses; it takes the same input path as the agent.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from openforgerl.env.computer.actions import ActionError, Screen
from openforgerl.env.computer.service import COMPUTER_PORT, TOKEN_HEADER

__all__ = ["ComputerUnavailable", "HttpComputer"]


class ComputerUnavailable(ConnectionError):
    """The computer service did not answer (not started yet, or gone)."""


class HttpComputer:
    def __init__(
        self, url: str = f"http://127.0.0.1:{COMPUTER_PORT}", *, token: str = "", timeout_s: float = 60.0
    ) -> None:  # > the service's worst case (zero_gui.loop.ACT_TIMEOUT_S)
        self.url, self.token, self.timeout_s = url.rstrip("/"), token, timeout_s
        self.screen = Screen()
        self.kind = ""  # the environment's kind, from /info ("browser" or "desktop"; "" before `wait_ready`)

    def _request(self, method: str, path: str, body: Any = None) -> tuple[str, bytes]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header(TOKEN_HEADER, self.token)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return resp.headers.get("Content-Type", ""), resp.read()
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            if exc.code == 400:
                raise ActionError(
                    json.loads(raw or b"{}").get("error", raw.decode(errors="replace"))
                ) from exc
            raise ComputerUnavailable(f"{method} {path}: HTTP {exc.code}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise ComputerUnavailable(f"{method} {path}: {exc}") from exc

    def wait_ready(self, timeout_s: float = 60.0) -> Screen:
        """Poll `/healthz` until the screen is up, then read its size from `/info`."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._request("GET", "/healthz")
                info = json.loads(self._request("GET", "/info")[1])
                self.screen = Screen(int(info["width"]), int(info["height"]))
                self.kind = str(info.get("kind") or "")
                return self.screen
            except ComputerUnavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def act(self, action: dict[str, Any], screenshot: bool = False) -> Any:
        """POST one action; with `screenshot` the reply is the next screenshot's PNG bytes."""
        _, raw = self._request("POST", "/act", {**action, "screenshot": screenshot})
        return raw if screenshot else json.loads(raw)

    def locate(self, selector: str) -> dict[str, int]:
        """Oracle only (needs the token): the box of a CSS selector in screen pixels."""
        return dict(json.loads(self._request("POST", "/locate", {"selector": selector})[1]))

    # ---- the Computer protocol ----
    def click(self, x: int, y: int, button: str = "left", count: int = 1) -> None:
        name = "double_click" if count == 2 else "right_click" if button == "right" else "click"
        self.act({"action": name, "x": x, "y": y} | ({"button": button} if name == "click" else {}))

    def drag(self, x: int, y: int, to_x: int, to_y: int) -> None:
        self.act({"action": "drag", "x": x, "y": y, "to_x": to_x, "to_y": to_y})

    def type(self, text: str) -> None:
        self.act({"action": "type", "text": text})

    def key(self, keys: list[str]) -> None:
        self.act({"action": "key", "keys": "+".join(keys)})

    def scroll(self, x: int, y: int, dx: int, dy: int) -> None:
        self.act({"action": "scroll", "x": x, "y": y, "dx": dx, "dy": dy})

    def screenshot(self) -> bytes:
        return self._request("GET", "/screenshot")[1]

    def close(self) -> None:
        return None
