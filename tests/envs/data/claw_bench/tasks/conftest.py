"""claw-bench's shared verifier conftest: registers --workspace (same option name and meaning)."""

import pytest


def pytest_addoption(parser):
    parser.addoption("--workspace", action="store", default=None)


@pytest.fixture
def workspace(request):
    from pathlib import Path

    return Path(request.config.getoption("--workspace"))
