"""Durable call log (append-only). SQLite in WAL mode is the embedded default; a `postgresql://` URL
opens the PostgreSQL store (postgres.py), one log for several gateway replicas."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from openforgerl.store.base import CallStore
from openforgerl.store.sqlite import SQLiteCallStore

if TYPE_CHECKING:
    from openforgerl.store.postgres import PostgresCallStore

__all__ = ["CallStore", "SQLiteCallStore", "is_postgres_url", "open_store"]


def is_postgres_url(location: str | Path) -> bool:
    return str(location).startswith(("postgresql://", "postgres://"))


def open_store(location: str | Path) -> SQLiteCallStore | PostgresCallStore:
    """The call log at `location`: a `postgresql://user@host/db` URL, else a SQLite file path.
    An unreachable server or refused credentials raise `UserError` (one line, no traceback)."""
    if isinstance(location, str) and is_postgres_url(location):
        from openforgerl.store.postgres import PostgresCallStore

        return PostgresCallStore(location)
    return SQLiteCallStore(Path(location))
