"""Fixtures for real bubblewrap sandboxes (root machine kind: netns + cgroups available)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sbx_helpers import EchoServer

from openforgerl.sandbox.local import LocalBackend


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    b = LocalBackend(root=tmp_path / "sbx")
    yield b
    await b.aclose()


@pytest.fixture
async def echo() -> AsyncIterator[EchoServer]:
    s = await EchoServer(b"gateway").start()
    yield s
    await s.aclose()


@pytest.fixture
async def other_port() -> AsyncIterator[EchoServer]:
    s = await EchoServer(b"other").start()
    yield s
    await s.aclose()


@pytest.fixture
def marker(request: pytest.FixtureRequest) -> Iterator[str]:
    yield f"ofrl-marker-{os.getpid()}-{request.node.name}"[:60]
