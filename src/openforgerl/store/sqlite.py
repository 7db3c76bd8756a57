"""SQLite (WAL) call log: the embedded default store.

All SQLite writes happen on one writer thread, never on an event loop: a commit of a typical
record is seven WAL frames plus locks (about 0.1 ms inside a busy gateway), and every ~1,000 pages
the automatic checkpoint fsyncs, which on this machine stalled the whole loop, every call in
flight, for up to 0.2 s. The thread releases the GIL inside SQLite, so the loop runs meanwhile.
* Default: `append_call` makes a call durable by copying it into this store's journal
  (journal.py: a shared memory map, survives a kill of the process) and returns; the writer thread
  commits journaled calls to SQLite in batches gathered over 20 ms (synchronous=NORMAL). Reads
  through this store first wait until every call appended before them is committed, so a reader
  here never misses one; other processes see a call once it is committed, tens of milliseconds
  later. A journal left by a process that died is replayed by the next store opened on the database.
* `durable=True`: synchronous=FULL and no journal: `append_call` returns once the writer thread's
  fsync'd commit holding the call is done, which also survives an OS crash.
Rollout records always go through the writer thread and are awaited. Records are stored as their
JSON text; nothing parsed is kept in memory.
Blobs are appended to pack files beside the database, found by their hash (`<db>.blobs/packs/`,
`blobfiles.py`: about a tenth of the CPU of a row, measured), written before `put_blob` returns, so
before the gateway journals the record naming them: a kill -9 never leaves a record naming a missing
blob. In `durable=True` mode the pack is fdatasync'd. The hashes this store has put are remembered
(bounded), so a rollout resending its last screenshots costs no write for the ones already there.
Call logs written before kept blobs in a file each (`<db>.blobs/<sha[:2]>/<sha>`), or in the `blobs`
table (sha256 hex primary key, media_type, size, data), and so do their journals (a frame whose
rollout id is `_BLOB_FRAME` + sha256 + NUL + media type, which no rollout id can be); all are still
read, the packs first.

Integrity: a finished call is never overwritten. `calls` has PRIMARY KEY (rollout_id, idx) and
is written with a plain INSERT; a duplicate (a bug, never a normal path) is diverted whole into
`call_conflicts` instead of replacing the first call or rolling back its batch. Journal replay is
the one `INSERT OR IGNORE`: a row already committed by the process that died is skipped when its
bytes are identical, and diverted to `call_conflicts` when they differ. Call indices come from
`lease_indices`: blocks leased in a `BEGIN IMMEDIATE` transaction, starting past both the
largest stored index and every block leased before, by any process. A reservation (not a
per-process epoch in the index) keeps indices small, ordered within a process and meaningful to
`trajectory/`, and makes several gateway processes on one store safe without any shared memory:
SQLite's write lock serialises the leases, and a journaled call not yet committed by a live
process is covered by its lease. A process that dies leaves a gap (its unused block), never a reuse.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson

from openforgerl.records import CallRecord, RolloutRecord
from openforgerl.store.base import APPENDED, can_wait, drain
from openforgerl.store.blobfiles import BlobFiles
from openforgerl.store.journal import CallJournal, replay_orphans

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
CREATE TABLE IF NOT EXISTS index_leases (
  rollout_id TEXT NOT NULL,
  start INTEGER NOT NULL,
  stop INTEGER NOT NULL,
  PRIMARY KEY (rollout_id, start)
);
CREATE TABLE IF NOT EXISTS blobs (
  sha256 TEXT PRIMARY KEY,
  media_type TEXT NOT NULL,
  size INTEGER NOT NULL,
  data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS call_conflicts (
  rollout_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  body BLOB NOT NULL,
  seen_at REAL NOT NULL DEFAULT (julianday('now'))
);
"""
_INSERT_CALL = "INSERT INTO calls VALUES (?,?,?)"
_REPLAY_CALL = "INSERT OR IGNORE INTO calls VALUES (?,?,?)"
_CONFLICT = "INSERT INTO call_conflicts (rollout_id, idx, body) VALUES (?,?,?)"
_NEXT_FREE = """SELECT max(
  coalesce((SELECT max(idx) + 1 FROM calls WHERE rollout_id = ?1), 0),
  coalesce((SELECT max(stop) FROM index_leases WHERE rollout_id = ?1), 0))"""
_PUT_BLOB = "INSERT OR IGNORE INTO blobs VALUES (?,?,?,?)"
_BLOB_FRAME = "\x00blob\x00"  # journal frames of blobs: rollout ids never hold a NUL
_GET_BLOB = "SELECT data FROM blobs WHERE sha256=?"
_KNOWN_BLOBS = 65536  # committed hashes remembered per store (then forgotten; a put is idempotent)
_READ_WAIT_S = 60.0
# How long the writer gathers journaled calls before committing them: one SQLite transaction per
# batch instead of per call (the per-commit cost is mostly fixed: header, interior and index pages).
_BATCH_WINDOW_S = 0.02
_IDLE_POLLS = 50  # windows without a call before the writer sleeps until the next one

# sql, params, and the future of an awaited write (None: a journaled call nobody waits for)
_Job = tuple[str, tuple[object, ...], asyncio.Future[None] | None]


class SQLiteCallStore:
    """Append-only call log in one SQLite file (WAL mode)."""

    def __init__(self, path: str | Path, *, durable: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.durable = durable
        self._sync = "FULL" if durable else "NORMAL"
        self._conn = self._connect()  # the one write connection, used under `_write_lock`
        self._conn.executescript(_SCHEMA)
        self._write_lock = threading.Lock()
        replay_orphans(self.path, self._replay_rows)  # calls journaled by a process that died
        self._journal: CallJournal | None = None  # made at the first append (readers never make one)
        self._ingested = 0  # journaled calls committed to SQLite (counts up, like `journal.appended`)
        self._committed = threading.Condition()
        self._failure: BaseException | None = None
        self._flush_now = threading.Event()  # someone waits (a reader, an awaited write): commit now
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._write_loop, name="callstore-writer", daemon=True)
        self._writer.start()
        self._read_local = threading.local()
        self._closed = False
        self._known_blobs: dict[str, None] = {}  # insertion-ordered: the oldest is dropped first
        self.blob_files = BlobFiles(Path(f"{self.path}.blobs"), durable=durable)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._sync}")
        return conn

    # -- writing -------------------------------------------------------------------------------
    def _commit(self, jobs: list[_Job]) -> BaseException | None:
        """One transaction for `jobs`; the error (if any) instead of raising. A duplicate call
        index fails the batched statement; the batch is then redone row by row so that only the
        duplicate is diverted (`_commit_one_by_one`) and no other call of the batch is held back."""
        try:
            with self._write_lock:
                try:
                    self._transaction(lambda: self._execute_runs(jobs))
                except sqlite3.IntegrityError:
                    self._transaction(lambda: self._commit_one_by_one(jobs))
        except Exception as exc:  # disk full, locked past the timeout: awaiting callers and readers see it
            return exc
        return None

    def _transaction(self, body: Callable[[], None], begin: str = "BEGIN") -> None:
        self._conn.execute(begin)
        try:
            body()
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    def _execute_runs(self, jobs: list[_Job]) -> None:
        start = 0
        while start < len(jobs):  # runs of the same statement go in one executemany
            sql, end = jobs[start][0], start + 1
            while end < len(jobs) and jobs[end][0] == sql:
                end += 1
            self._conn.executemany(sql, [job[1] for job in jobs[start:end]])
            start = end

    def _commit_one_by_one(self, jobs: list[_Job]) -> None:
        for sql, params, _ in jobs:
            try:
                self._conn.execute(sql, params)
            except sqlite3.IntegrityError:
                if sql != _INSERT_CALL:
                    raise
                self._conn.execute(_CONFLICT, params)  # kept, never replacing the call already there

    def _commit_calls(self, rows: list[tuple[object, ...]]) -> None:
        """Commit call rows right here, on the calling thread (durable nowait)."""
        error = self._commit([(_INSERT_CALL, row, None) for row in rows])
        if error is not None:
            raise error

    def _replay_rows(self, rows: list[tuple[str, int, bytes]]) -> None:
        """Journal replay: idempotent. A row already stored with identical bytes is skipped; one
        stored with other bytes is never overwritten: the journaled version goes to `call_conflicts`."""

        def body() -> None:
            for row in rows:
                rid = str(row[0])
                if rid.startswith(_BLOB_FRAME):  # a blob, journaled before the records naming it
                    sha, _, media_type = rid[len(_BLOB_FRAME) :].partition("\x00")
                    data = row[2]
                    self._conn.execute(_PUT_BLOB, (sha, media_type, len(data), data))
                    continue
                if self._conn.execute(_REPLAY_CALL, row).rowcount:
                    continue
                (stored,) = self._conn.execute(
                    "SELECT body FROM calls WHERE rollout_id=? AND idx=?", row[:2]
                ).fetchone()
                if bytes(stored) != bytes(row[2]):
                    self._conn.execute(_CONFLICT, row)

        with self._write_lock:
            self._transaction(body, "BEGIN IMMEDIATE")

    def _lease(self, rollout_id: str, count: int) -> tuple[int, int]:
        """Reserve `count` call indices for `rollout_id` past everything stored or leased."""
        result: list[int] = []

        def body() -> None:
            (start,) = self._conn.execute(_NEXT_FREE, (rollout_id,)).fetchone()
            self._conn.execute("INSERT INTO index_leases VALUES (?,?,?)", (rollout_id, start, start + count))
            result.append(int(start))

        with self._write_lock:
            # IMMEDIATE takes SQLite's write lock before reading the maximum: two processes
            # leasing at once are serialised, the second sees the first's block.
            self._transaction(body, "BEGIN IMMEDIATE")
        return result[0], result[0] + count

    async def lease_indices(self, rollout_id: str, count: int) -> tuple[int, int]:
        """A block `[start, stop)` of call indices that no process has used or will use."""
        self._check_open()
        return await asyncio.to_thread(self._lease, rollout_id, count)

    def _write_loop(self) -> None:
        """The writer thread: commit what is queued, in batches of whatever has accumulated."""
        while True:
            first = self._next_job()
            if first is None:
                return
            jobs, stop = drain(self._queue, first)
            error = self._commit(jobs)
            journaled = sum(1 for job in jobs if job[2] is None)
            with self._committed:
                if error is None:
                    self._ingested += journaled
                    if self._journal is not None:
                        self._journal.start_over_if(self._ingested)
                elif journaled:
                    self._failure = error  # the calls stay in the journal: the next open replays them
                self._committed.notify_all()
            for loop, group in _by_loop(jobs).items():
                try:
                    loop.call_soon_threadsafe(_settle, group, error)
                except RuntimeError:  # that loop has closed: nobody is waiting any more
                    pass
            if stop:
                return

    def _next_job(self) -> _Job | None:
        """The next queued job. Durable mode waits for it (its callers await the commit). Otherwise
        the queue is polled once per batch window while calls keep coming, so that each window's
        calls commit together and an append never has to wake this thread (a futex call on the
        event loop per call); after a second without calls it waits instead. Readers and
        awaited writes cut a window short (`_flush_now`)."""
        if self.durable:
            return self._queue.get()
        for _ in range(_IDLE_POLLS):
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                if self._flush_now.wait(_BATCH_WINDOW_S):
                    self._flush_now.clear()
                continue
            return job
        return self._queue.get()

    def _journal_for_append(self) -> CallJournal:
        if self._journal is None:
            with self._committed:
                if self._journal is None:
                    self._journal = CallJournal(self.path)
        return self._journal

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"call store {self.path} is closed")

    def _append_journaled(self, rollout_id: str, index: int, body: bytes) -> None:
        self._check_open()
        self._journal_for_append().append(rollout_id, index, body)
        self._queue.put((_INSERT_CALL, (rollout_id, index, body), None))

    def _queued(self, sql: str, params: tuple[object, ...]) -> asyncio.Future[None]:
        """Queued for the writer now (not when awaited); the future is done once it is committed."""
        self._check_open()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put((sql, params, fut))
        self._flush_now.set()  # someone waits for this one: no batch window
        return fut

    async def _awaited(self, sql: str, params: tuple[object, ...]) -> None:
        await self._queued(sql, params)

    def append_call(self, rollout_id: str, index: int, body: bytes) -> Awaitable[None]:
        """Journaled: durable when this returns, nothing left to wait for. `durable=True`: the
        writer thread's fsync'd commit, to await; committed right here instead when there is no
        loop to wait in (an offline tool, another thread) or the calling task is being cancelled
        (it records its last call without awaiting)."""
        if not self.durable:
            self._append_journaled(rollout_id, index, body)
            return APPENDED
        if can_wait():
            return self._queued(_INSERT_CALL, (rollout_id, index, body))
        self._check_open()
        self._commit_calls([(rollout_id, index, body)])
        return APPENDED

    async def put_rollout(self, rollout: RolloutRecord) -> None:
        body = orjson.dumps(rollout.model_dump(mode="json"))
        await self._awaited("INSERT OR REPLACE INTO rollouts VALUES (?,?)", (rollout.rollout_id, body))

    async def put_blob(self, sha256: str, data: bytes, media_type: str) -> None:
        """Store one blob once (idempotent): it is in its pack when this returns. The media type is
        the records' to keep (`ImageRef`); the bytes say it too."""
        if sha256 in self._known_blobs:
            return
        self._check_open()
        if self.durable:  # an fdatasync: off the event loop
            await asyncio.to_thread(self.blob_files.put, sha256, data)
        else:  # one pwritev (~20 us for a screenshot): less than a hop to a thread costs
            self.blob_files.put(sha256, data)
        known = self._known_blobs
        known[sha256] = None
        if len(known) > _KNOWN_BLOBS:
            del known[next(iter(known))]

    async def get_blob(self, sha256: str) -> bytes | None:
        return await asyncio.to_thread(self.read_blob, sha256)

    def read_blob(self, sha256: str) -> bytes | None:
        data = self.blob_files.read(sha256)
        if data is not None:
            return data
        self._caught_up()  # a log written before blob files: its table, and its journal replayed
        row = self._reader().execute(_GET_BLOB, (sha256,)).fetchone()
        return bytes(row[0]) if row is not None else None

    def read_blob_usage(self) -> tuple[int, int]:
        """(blobs, bytes) this log holds: its packs, and the files and table of a log written before them."""
        count, size = self.blob_files.usage()
        rows, table_bytes = (
            self._reader().execute("SELECT count(*), coalesce(sum(size), 0) FROM blobs").fetchone()
        )
        return count + int(rows), size + int(table_bytes)

    # -- reading -------------------------------------------------------------------------------
    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._read_local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._read_local.conn = conn
        return conn

    def _caught_up(self) -> None:
        """Wait until every call journaled so far is committed (read-your-writes)."""
        journal = self._journal
        if journal is None:
            return
        target = journal.appended
        if self._ingested < target:
            self._flush_now.set()
        with self._committed:
            done = self._committed.wait_for(
                lambda: self._ingested >= target or self._failure is not None, _READ_WAIT_S
            )
            if self._ingested >= target:
                return
        if not done:
            raise TimeoutError(
                f"call log writer is {target - self._ingested} calls behind after {_READ_WAIT_S}s"
            )
        raise RuntimeError(f"call log writer failed (calls kept in {journal.path}): {self._failure!r}")

    def _fetch(self, sql: str, params: tuple[object, ...]) -> list[bytes]:
        self._caught_up()
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
        self._caught_up()
        rows = self._reader().execute("SELECT DISTINCT rollout_id FROM calls ORDER BY rowid").fetchall()
        return [r[0] for r in rows]

    # -- closing -------------------------------------------------------------------------------
    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        await asyncio.to_thread(self._writer.join)
        self._finish()

    def close(self) -> None:
        """Synchronous close for offline tools."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._writer.join()
        self._finish()

    def _finish(self) -> None:
        self.blob_files.close()
        if self._journal is not None:  # kept (for the next open to replay) unless all of it is committed
            self._journal.close(remove=self._ingested >= self._journal.appended)
        with self._write_lock:
            self._conn.close()


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
