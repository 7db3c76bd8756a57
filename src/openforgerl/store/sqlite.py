"""SQLite (WAL) call log: the embedded default store.

Group commit on the caller's event loop: appends made during one loop iteration are committed
together in one transaction by a callback scheduled for the next iteration, and each `append_call`
resolves once its transaction has committed. With synchronous=NORMAL a WAL commit is a write()
into the page cache (no fsync), so it survives a kill of this process and costs tens of
microseconds: cheaper on the loop than a hand-off to a writer thread and back (measured in
benchmarks/gateway_overhead.py). `durable=True` (synchronous=FULL, an fsync per commit, which also
survives an OS crash) keeps the loop free by committing in a writer thread instead.
Records are stored as their JSON text; nothing parsed is kept in memory.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from pathlib import Path

import orjson
from pydantic import BaseModel

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

_Job = tuple[str, tuple[object, ...], asyncio.Future[None] | None]


class SQLiteCallStore:
    """Append-only call log in one SQLite file (WAL mode)."""

    def __init__(self, path: str | Path, *, durable: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._sync = "FULL" if durable else "NORMAL"
        self._conn = self._connect()  # the one write connection, used under `_write_lock`
        self._conn.executescript(_SCHEMA)
        self._write_lock = threading.Lock()
        self._batches: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
        self._queue: queue.SimpleQueue[list[_Job] | None] | None = None
        self._writer: threading.Thread | None = None
        if durable:
            self._queue = queue.SimpleQueue()
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
    def _commit(self, jobs: list[_Job]) -> BaseException | None:
        """One transaction for `jobs`; the error (if any) instead of raising."""
        try:
            with self._write_lock:
                self._conn.execute("BEGIN")
                try:
                    for sql, params, _ in jobs:
                        self._conn.execute(sql, params)
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
        except Exception as exc:  # disk full, locked past the timeout: the awaiting callers see it
            return exc
        return None

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        """Commit this loop's batch (runs on the loop, one iteration after the first append)."""
        jobs = self._batches.pop(loop, None)
        if not jobs:
            return
        if self._queue is not None:
            self._queue.put(jobs)
            return
        _settle(jobs, self._commit(jobs))

    def _write_loop(self) -> None:
        """Durable mode: fsync'ing commits happen here, never on an event loop."""
        assert self._queue is not None
        while True:
            first = self._queue.get()
            if first is None:
                return
            jobs = list(first)
            stop = False
            while len(jobs) < 1024:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                jobs += more
            error = self._commit(jobs)
            for loop, group in _by_loop(jobs).items():
                loop.call_soon_threadsafe(_settle, group, error)
            if stop:
                return

    def _submit(self, sql: str, params: tuple[object, ...]) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        batch = self._batches.get(loop)
        if batch is None:
            batch = self._batches[loop] = []
            loop.call_soon(self._flush, loop)
        batch.append((sql, params, fut))
        return fut

    async def append_call(self, record: CallRecord) -> None:
        await self._submit(_INSERT_CALL, _call_row(record))

    def append_call_nowait(self, record: CallRecord) -> None:
        """Commit right here, on whatever thread: used where no await is possible (a cancelled
        call's last record), so it must not depend on the loop running another iteration."""
        error = self._commit([(_INSERT_CALL, _call_row(record), None)])
        if error is not None:
            raise error

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
        self._flush(asyncio.get_running_loop())  # this loop's pending batch, if any
        self._closed = True
        if self._writer is not None:
            assert self._queue is not None
            self._queue.put(None)
            await asyncio.to_thread(self._writer.join)
        with self._write_lock:
            self._conn.close()

    def close(self) -> None:
        """Synchronous close for offline tools."""
        if self._closed:
            return
        self._closed = True
        if self._writer is not None:
            assert self._queue is not None
            self._queue.put(None)
            self._writer.join()
        with self._write_lock:
            self._conn.close()


_INSERT_CALL = "INSERT OR REPLACE INTO calls VALUES (?,?,?)"


def _call_row(record: CallRecord) -> tuple[object, ...]:
    # orjson over the model's own attributes: 4x cheaper than model_dump(mode="json") on the hot
    # path, same JSON (enums by value, nested models as objects, inf/nan as null).
    return (record.rollout_id, record.index, orjson.dumps(record.__dict__, default=_model_fields))


def _model_fields(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.__dict__
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def _by_loop(jobs: list[_Job]) -> dict[asyncio.AbstractEventLoop, list[_Job]]:
    groups: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
    for job in jobs:
        fut = job[2]
        if fut is not None:
            groups.setdefault(fut.get_loop(), []).append(job)
    return groups


def _settle(jobs: list[_Job], error: BaseException | None) -> None:
    for _, _, fut in jobs:
        if fut is None or fut.done():
            continue
        if error is None:
            fut.set_result(None)
        else:
            fut.set_exception(error)
