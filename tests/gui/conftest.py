"""Fixtures for the GUI tests: a fake `Computer` and the apps server in a thread of this process."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from gui_helpers import FakeComputer

collect_ignore = ["data", "agents"]


@pytest.fixture
def fake_computer() -> FakeComputer:
    return FakeComputer()


@pytest.fixture
def apps_server() -> Iterator[Callable[..., tuple[Any, str]]]:
    """start({app: fixtures}, token) -> (store, base_url), served from a thread of this process."""
    from openforgerl.env.apps import build_apps

    servers: list[Any] = []

    def start(fixtures: dict[str, Any], token: str = "t0ken") -> tuple[Any, str]:
        store, server = build_apps(fixtures, token, 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return store, f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()
