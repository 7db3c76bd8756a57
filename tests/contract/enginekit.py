"""Shared by the contract suite's conftest and tests (imported by name)."""

from __future__ import annotations

import pytest

# URLs of scripted engines: tests of what only a model with weights does skip them.
SCRIPTED_URLS: set[str] = set()


def skip_scripted(url: str, why: str) -> None:
    if url in SCRIPTED_URLS:
        pytest.skip(f"the scripted engine has no weights: {why}")
