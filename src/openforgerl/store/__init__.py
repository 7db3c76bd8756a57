"""Durable call log (append-only). SQLite in WAL mode is the embedded default."""

from openforgerl.store.base import CallStore
from openforgerl.store.sqlite import SQLiteCallStore

__all__ = ["CallStore", "SQLiteCallStore"]
