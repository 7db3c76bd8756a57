"""Suite-wide settings: hypothesis without wall-clock health checks (the CI box is 2 shared cores)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "openforgerl",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("openforgerl")


def _missing(reason: str) -> None:
    """A missing test dependency fails in CI (it is an install step that broke) and skips elsewhere."""
    import os

    if os.environ.get("CI") or os.environ.get("OPENFORGERL_REQUIRE_HARNESSES"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A real PostgreSQL server for the session (openforgerl.testing.postgres), stopped at its end."""
    from openforgerl.testing.postgres import find_bindir, start

    bindir = find_bindir()
    if bindir is None:
        _missing("PostgreSQL server binaries (initdb, postgres) not found: apt-get install postgresql")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _missing("the PostgreSQL driver is missing: pip install 'openforgerl[postgres]'")
    server = start(bindir)
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: Any) -> str:
    """A fresh, empty database on the session's PostgreSQL server."""
    return str(postgres_server.create_database())
