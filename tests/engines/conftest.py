"""Fixtures for the local engine tests: one engine on the committed tiny model, one HTTP server on it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from openforgerl.engines.chat_format import TINY_ASSETS
from openforgerl.engines.local.background import BackgroundServer


@pytest.fixture(scope="session")
def tiny_dir() -> Path:
    path = Path(os.environ.get("OPENFORGERL_TEST_MODEL", TINY_ASSETS))  # e.g. a model being built
    if not (path / "config.json").exists():
        pytest.skip("tiny model weights not built (scripts/build_tiny_model.py)")
    return path


@pytest.fixture(scope="session")
def local_server(tiny_dir) -> Iterator[BackgroundServer]:
    server = BackgroundServer.start(str(tiny_dir))
    yield server
    server.close()


@pytest.fixture(scope="session")
def chat():
    from openforgerl.engines.local.model import load_chat_format

    return load_chat_format(TINY_ASSETS)
