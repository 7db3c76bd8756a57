"""SQLite (WAL) call log: the embedded default store.

One writer thread owns the write connection and commits in small batches (group commit), so the
event loop never blocks on disk. `append_call` resolves once the batch holding the record has been
committed: WAL commits survive a kill of this process (synchronous=NORMAL; an OS crash may lose the
last transactions, which `durable=True` closes with synchronous=FULL).
Records are stored as their JSON text; nothing parsed is kept in memory.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import orjson

from openforgerl.records import CallRecord, RolloutRecord

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
  rollout_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  body BLOB NOT NULL,
  PRIMARY KEY (rollout_id, idx)
);
CREATE TABLE IF NOT EXISTS rollouts (
  rollout_id TEXT PRIMARY KEY,
  body BLOB NOT NULL
);
"""

_Job = tuple[str, tuple[object, ...], Callable[[], None] | None]


class SQLiteCallStore:
    """Append-only call log in one SQLite file (WAL mode)."""

    def __init__(self, path: str | Path, *, durable: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._sync = "FULL" if durable else "NORMAL"
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        init = self._connect()
        init.executescript(_SCHEMA)
        init.close()
        self._writer = threading.Thread(target=self._write_loop, name="callstore-writer", daemon=True)
        self._writer.start()
        self._read_local = threading.local()
        self._closed = False

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._sync}")
        return conn

    # -- writing -------------------------------------------------------------------------------
    def _write_loop(self) -> None:
        conn = self._connect()
        stop = False
        while not stop:
            batch = [self._queue.get()]
            while len(batch) < 256:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(job is None for job in batch)
            jobs = [job for job in batch if job is not None]
            if not jobs:
                continue
            conn.execute("BEGIN")
            for sql, params, _ in jobs:
                conn.execute(sql, params)
            conn.execute("COMMIT")
            for _, _, done in jobs:
                if done is not None:
                    done()
        conn.close()

    def _submit(self, sql: str, params: tuple[object, ...]) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def done() -> None:
            loop.call_soon_threadsafe(_resolve, fut)

        self._queue.put((sql, params, done))
        return fut

    @staticmethod
    def _call_row(record: CallRecord) -> tuple[object, ...]:
        return (record.rollout_id, record.index, orjson.dumps(record.model_dump(mode="json")))

    async def append_call(self, record: CallRecord) -> None:
        await self._submit("INSERT OR REPLACE INTO calls VALUES (?,?,?)", self._call_row(record))

    def append_call_nowait(self, record: CallRecord) -> None:
        self._queue.put(("INSERT OR REPLACE INTO calls VALUES (?,?,?)", self._call_row(record), None))

    async def put_rollout(self, rollout: RolloutRecord) -> None:
        body = orjson.dumps(rollout.model_dump(mode="json"))
        await self._submit("INSERT OR REPLACE INTO rollouts VALUES (?,?)", (rollout.rollout_id, body))

    # -- reading -------------------------------------------------------------------------------
    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._read_local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._read_local.conn = conn
        return conn

    def _fetch(self, sql: str, params: tuple[object, ...]) -> list[bytes]:
        return [row[0] for row in self._reader().execute(sql, params).fetchall()]

    async def get_rollout(self, rollout_id: str) -> RolloutRecord | None:
        rows = await asyncio.to_thread(
            self._fetch, "SELECT body FROM rollouts WHERE rollout_id=?", (rollout_id,)
        )
        return RolloutRecord.model_validate_json(rows[0]) if rows else None

    async def list_rollouts(self) -> list[RolloutRecord]:
        rows = await asyncio.to_thread(self._fetch, "SELECT body FROM rollouts ORDER BY rowid", ())
        return [RolloutRecord.model_validate_json(r) for r in rows]

    async def list_calls(self, rollout_id: str) -> list[CallRecord]:
        rows = await asyncio.to_thread(
            self._fetch, "SELECT body FROM calls WHERE rollout_id=? ORDER BY idx", (rollout_id,)
        )
        return [CallRecord.model_validate_json(r) for r in rows]

    # Synchronous readers for offline tools (export, CLI), no event loop needed.
    def read_rollouts(self) -> list[RolloutRecord]:
        return [RolloutRecord.model_validate_json(r) for r in self._fetch("SELECT body FROM rollouts", ())]

    def read_calls(self, rollout_id: str) -> list[CallRecord]:
        rows = self._fetch("SELECT body FROM calls WHERE rollout_id=? ORDER BY idx", (rollout_id,))
        return [CallRecord.model_validate_json(r) for r in rows]

    def read_rollout_ids_with_calls(self) -> list[str]:
        rows = self._reader().execute("SELECT DISTINCT rollout_id FROM calls ORDER BY rowid").fetchall()
        return [r[0] for r in rows]

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        await asyncio.to_thread(self._writer.join)

    def close(self) -> None:
        """Synchronous close for offline tools."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._writer.join()


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
