"""`BrowserScreen`: the browser environment's open screen (a `PlaywrightComputer` on the start URL)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openforgerl.env.computer.actions import Screen
from openforgerl.env.computer.origin import app_url
from openforgerl.envs.browser.computer import PlaywrightComputer

__all__ = ["BrowserScreen"]


class BrowserScreen:
    def __init__(self, computer: PlaywrightComputer) -> None:
        self.computer = computer

    @classmethod
    def open(cls, config: Mapping[str, Any], apps_url: str) -> BrowserScreen:
        w, h = config.get("screen", (1280, 720))
        return cls(
            PlaywrightComputer(app_url(apps_url, str(config.get("start_url", "/"))), Screen(int(w), int(h)))
        )

    def locate(self, selector: str) -> dict[str, int]:
        return self.computer.locate(selector)

    def close(self) -> None:
        self.computer.close()
