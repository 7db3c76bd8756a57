"""Fixtures for the envs tests: a real Claw service on loopback, in a thread of this process."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from openforgerl.envs.claw.services.server import ClawApp, build_app, serve

collect_ignore = ["data"]  # sample task sets in foreign formats (they contain their own pytest files)

SUITE = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/claw/suite/tasks"
DATA = Path(__file__).parent / "data"


class Service:
    def __init__(self, app: ClawApp, url: str) -> None:
        self.app, self.url = app, url


@pytest.fixture
def claw_service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Service]]:
    """start(fixtures=None, config={}) -> Service, also exported as $OPENFORGERL_CLAW_URL."""
    servers: list[Any] = []

    def start(fixtures: Path | None = None, config: dict[str, Any] | None = None) -> Service:
        workspace = tmp_path / "ws"
        workspace.mkdir(exist_ok=True)
        app = build_app(fixtures, workspace, config or {})
        server = serve(app, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        url = f"http://127.0.0.1:{server.server_address[1]}"
        monkeypatch.setenv("OPENFORGERL_CLAW_URL", url)
        return Service(app, url)

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()
