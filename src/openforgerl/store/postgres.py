"""PostgreSQL call log: one log for several gateway replicas (`--store postgresql://user@host/db`).

Same contract and guarantees as the embedded SQLite store (base.py, sqlite.py); what differs is
where durability comes from and who serialises writers:
* Durable before the answer: `append_call`, `put_rollout` and `put_blob` return (or their
  awaitable completes) once PostgreSQL has committed the transaction holding them (the default
  `synchronous_commit=on`: the commit record is flushed to the server's WAL). There is no local
  journal: a kill -9 of a replica loses nothing it had answered, and nothing lives on its disk.
  A cancelled call (which cannot await) is committed before `append_call` returns, the calling
  thread waiting for it.
* Group commit: every write goes through one writer thread per store, which commits whatever has
  queued while the previous commit was in flight as one transaction (no batch window: the server's
  WAL flush is the window). The event loop never waits on the network.
* No overwrite: `calls` has PRIMARY KEY (rollout_id, idx) and is written with
  `INSERT .. ON CONFLICT DO NOTHING`; a row whose key is taken by other bytes goes whole to
  `call_conflicts`, and one with the same bytes is skipped. Skipping the identical row makes a
  batch safe to send again when the connection dropped with its COMMIT unanswered (the writer
  reconnects and retries for up to `_RETRY_S`): the retry can only find its own rows.
* Unique indices across replicas: `index_leases` keeps one row per rollout, the stop of the last
  block leased; a lease is one `INSERT .. ON CONFLICT DO UPDATE` that starts past that stop and
  past every stored index. The row lock it takes serialises replicas leasing for one rollout; a
  replica that dies leaves a gap (its unused block), never a reuse.
* Reads go through a connection per reading thread (autocommit), so they see every committed
  write, this replica's and the others'.
* Closing and tainting a rollout are sticky: a put that would reopen a closed record or clear its
  infra taint is not applied. The gateway updates a record by read-modify-write under a lock of
  its own process, so a replica that read the record just before another replica closed it would
  otherwise write it back open (seen as a lost close); the stale write's other fields are lost
  instead, which a closed rollout no longer needs.
* Ended rollouts are announced: a put of a closed or infra-tainted rollout record also sends
  `NOTIFY openforgerl_rollouts` with its id, in the same transaction (delivered only if it commits).
  `watch_rollouts` hands those ids to a callback from a listener thread, so a replica that did not
  close the rollout itself can cut its calls still in flight (gateway/rollouts.py `follow_store`)
  within milliseconds instead of serving it until the calls end. A listener that lost its
  connection reconnects and reports None: anything may have changed meanwhile.
* Pause/resume and the policy version are one row, `gateway_flow`: `set_flow` updates it (its `seq`
  orders the changes, the version never goes back) and sends `NOTIFY openforgerl_flow` in the same
  transaction; `watch_flow` hands the new state to a callback (gateway/flow.py `follow_store`).
* A rollout's call log bytes are one row of `rollout_log_bytes`, counted by every replica:
  `reserve_log_bytes` adds only what fits the quota (one atomic INSERT .. ON CONFLICT DO UPDATE ..
  WHERE, serialised by the row lock), `charge_log_bytes` adds unchecked, and `note_log_refusal` lets
  one replica record the rollout's first refusal. The gateway reserves in chunks
  (gateway/rollouts.py `reserve_log`), as one statement costs a call 180-250 us of gateway CPU.

Blobs are `bytea` rows of the `blobs` table, not pack files (`blobfiles.py`) on a path the
replicas share. Measured (`benchmarks/gateway_replicas.py --blobs`, a loaded 2-core box, 400 new
41 KB blobs, CPU of the writing process, two runs): a bytea row cost 175 us per blob with 16 puts
in flight (1.7-2.0 ms wall each, group-committed and fsync'd by the server; 0.9-1.0 ms CPU and
11-12 ms wall one at a time), a local pack append 36-48 us (0.1-0.2 ms wall, not fsync'd) and
355-390 us with fdatasync (6-7 ms wall). So packs are cheaper only without their
fsync, and only on a local disk: shared by replicas they need a network filesystem every replica
mounts, whose append and flush semantics would decide whether a record committed by one replica
names a blob another cannot read yet. A row in the same database makes "the blob is committed
before the record naming it" one order of commits on one server (the writer also puts a batch's
blobs before its calls), with one thing to run and back up. The cost falls only on calls with a
new image (seen hashes are remembered). The column is stored EXTERNAL (out of line, uncompressed):
image bytes are already compressed, so pglz would only spend CPU.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import re
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from openforgerl.errors import UserError
from openforgerl.records import CallRecord, RolloutRecord
from openforgerl.store import postgres_sql as sql
from openforgerl.store.base import APPENDED, FlowState, can_wait, drain

try:
    import psycopg
except ImportError:  # the optional `postgres` extra
    psycopg = None  # type: ignore[assignment]

_RETRY_S = 30.0  # how long the writer keeps reconnecting before failing a batch
_CONNECT_TIMEOUT_S = 5
_KNOWN_BLOBS = 65536
_SYNC_WAIT_S = 60.0  # a cancelled call's synchronous commit
_LISTEN_POLL_S = 0.5  # how often the listener thread looks at `_closed`


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def redacted(url: str) -> str:
    """`url` without its password (error messages and logs)."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


@dataclass
class _Job:
    kind: str  # call | rollout | blob | lease | flow | charge
    params: tuple[Any, ...]
    done: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)


class PostgresCallStore:
    """Append-only call log in a PostgreSQL database, shared by any number of gateway processes."""

    def __init__(self, url: str) -> None:
        if psycopg is None:
            raise UserError(
                "a postgresql:// call log needs the PostgreSQL driver: pip install 'openforgerl[postgres]'"
            )
        self.url = url
        self.path = redacted(url)  # what messages name (the SQLite store's `path`)
        self._conn = self._connect(autocommit=True)  # the writer thread's
        try:
            with self._conn.transaction():
                self._conn.execute(sql.SCHEMA)
        except psycopg.Error as exc:  # e.g. a role that may not create tables
            self._conn.close()
            raise UserError(f"cannot set up the PostgreSQL call log {self.path}: {_one_line(exc)}") from None
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self._readers: list[Any] = []
        self._readers_lock = threading.Lock()
        self._read_local = threading.local()
        self._known_blobs: dict[str, None] = {}
        self._watchers: list[Callable[[str | None], None]] = []
        self._flow_watchers: list[Callable[[FlowState | None], None]] = []
        self._listener: threading.Thread | None = None
        self._writer = threading.Thread(target=self._write_loop, name="pgstore-writer", daemon=True)
        self._writer.start()

    def _connect(self, *, autocommit: bool) -> Any:
        """A connection, or one line naming what to fix (unreachable server, wrong credentials)."""
        try:
            return psycopg.connect(self.url, autocommit=autocommit, connect_timeout=_CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            raise UserError(f"cannot open the PostgreSQL call log {self.path}: {_one_line(exc)}") from None

    # -- writing -------------------------------------------------------------------------------
    def _submit(self, kind: str, *params: Any) -> concurrent.futures.Future[Any]:
        if self._closed:
            raise RuntimeError(f"call store {self.path} is closed")
        if any(isinstance(p, str) and "\x00" in p for p in params):  # refused here, not by the whole batch
            raise ValueError("a rollout id or media type with a NUL character cannot be stored")
        job = _Job(kind, params)
        self._queue.put(job)
        return job.done

    def _write_loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            jobs, stop = drain(self._queue, first)
            results, error = self._commit_retrying(jobs)
            for job, result in zip(jobs, results or [None] * len(jobs), strict=True):
                if error is None:
                    job.done.set_result(result)
                else:
                    job.done.set_exception(error)
            if stop:
                return

    def _commit_retrying(self, jobs: list[_Job]) -> tuple[list[Any] | None, BaseException | None]:
        """Commit `jobs` as one transaction, reconnecting while the server is away (bounded)."""
        give_up = time.monotonic() + _RETRY_S
        delay = 0.05
        while True:
            try:
                if self._conn.closed:
                    self._conn = psycopg.connect(
                        self.url, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S
                    )
                return self._commit(jobs), None
            except psycopg.OperationalError as exc:  # connection lost: the batch is safe to resend
                if time.monotonic() + delay > give_up:
                    return None, exc
                if not self._conn.closed:
                    self._conn.close()
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
            except Exception as exc:
                return None, exc

    def _commit(self, jobs: list[_Job]) -> list[Any]:
        results: list[Any] = [None] * len(jobs)
        calls = [job.params for job in jobs if job.kind == "call"]
        with self._conn.transaction(), self._conn.cursor() as cur:
            blobs = [job.params for job in jobs if job.kind == "blob"]
            if blobs:  # before the calls: a record never commits without the blobs it names
                cur.executemany(sql.PUT_BLOB, blobs)
            if calls:
                columns = [list(col) for col in zip(*calls, strict=True)]
                cur.execute(sql.INSERT_CALLS, columns)
                if cur.rowcount < len(calls):
                    cur.execute(sql.DIVERT_CONFLICTS, columns)
            rollouts = [job.params for job in jobs if job.kind == "rollout"]
            if rollouts:
                cur.executemany(sql.PUT_ROLLOUT, rollouts)
                for rid in dict.fromkeys(rid for rid, _, closed, tainted in rollouts if closed or tainted):
                    cur.execute(sql.NOTIFY, (rid,))
            charges = [job.params for job in jobs if job.kind == "charge"]
            if charges:
                cur.executemany(sql.CHARGE_LOG, charges)
            for i, job in enumerate(jobs):
                if job.kind == "lease":
                    rollout_id, count = job.params
                    (stop,) = cur.execute(sql.LEASE, {"r": rollout_id, "n": count}).fetchone()
                    results[i] = (int(stop) - count, int(stop))
                elif job.kind == "flow":
                    seq, paused, version = cur.execute(sql.SET_FLOW, job.params).fetchone()
                    results[i] = FlowState(int(seq), bool(paused), int(version))
                    cur.execute(sql.NOTIFY_FLOW, (results[i].payload(),))
        return results

    def append_call(self, rollout_id: str, index: int, body: bytes) -> Awaitable[None]:
        """Committed once the awaitable completes; a caller that cannot await (no loop, or a task
        being cancelled) has it committed before this returns."""
        done = self._submit("call", rollout_id, index, body)
        if can_wait():
            return asyncio.wrap_future(done)
        done.result(_SYNC_WAIT_S)
        return APPENDED

    async def lease_indices(self, rollout_id: str, count: int) -> tuple[int, int]:
        result: tuple[int, int] = await asyncio.wrap_future(self._submit("lease", rollout_id, count))
        return result

    async def put_rollout(self, rollout: RolloutRecord) -> None:
        body = orjson.dumps(rollout.model_dump(mode="json"))
        # closed or tainted: sticky (`sql.PUT_ROLLOUT`), and announced to every replica (`watch_rollouts`)
        await asyncio.wrap_future(
            self._submit("rollout", rollout.rollout_id, body, rollout.closed, rollout.infra_tainted)
        )

    def watch_rollouts(self, callback: Callable[[str | None], None]) -> None:
        """Call `callback(rollout_id)` (from a listener thread) each time any store on this database
        commits a closed or infra-tainted record of that rollout; `callback(None)` once the listener
        listens and after it reconnected (a notification may have been missed: read again)."""
        with self._readers_lock:
            self._watchers.append(callback)
            self._start_listener()

    def watch_flow(self, callback: Callable[[FlowState | None], None]) -> None:
        """Call `callback(state)` (from the listener thread) each time any store on this database
        commits a pause or resume (`set_flow`); `callback(None)` once listening and after a reconnect."""
        with self._readers_lock:
            self._flow_watchers.append(callback)
            self._start_listener()

    def _start_listener(self) -> None:
        if self._listener is None:
            self._listener = threading.Thread(target=self._listen_loop, name="pgstore-listener", daemon=True)
            self._listener.start()

    def set_flow(self, paused: bool | None, policy_version: int) -> Awaitable[FlowState]:
        """Pause or resume (None: neither) every replica on this database; the policy version becomes at
        least `policy_version`. Queued at once (changes commit in the order they were asked for);
        committed, and announced to every `watch_flow`, when the awaitable completes."""
        return asyncio.wrap_future(self._submit("flow", paused, policy_version))

    async def read_flow(self) -> FlowState:
        ((seq, paused, version),) = await asyncio.to_thread(self._fetch, sql.READ_FLOW)
        return FlowState(int(seq), bool(paused), int(version))

    async def reserve_log_bytes(self, rollout_id: str, nbytes: int, quota: int) -> int | None:
        """Add `nbytes` to the rollout's call log count, shared by every replica, if the total stays
        within `quota`: the new total, or None (nothing added). One statement on this thread's reading
        connection, which does not wait for the server's WAL flush (`synchronous_commit=off`): a count
        lost with the server only lets a rollout past its quota by what it lost, and the call waits
        on it (0.2 ms here, 2.8-4 ms with the flush: benchmarks/log_quota_cost.py)."""
        rows = await asyncio.to_thread(
            self._fetch, sql.RESERVE_LOG, {"r": rollout_id, "n": nbytes, "q": quota}
        )
        return int(rows[0][0]) if rows else None

    def charge_log_bytes(self, rollout_id: str, nbytes: int) -> None:
        """Add `nbytes` (negative: give back) to the rollout's shared count, unchecked and unawaited:
        committed with the writer's next batch (the call's own record, typically)."""
        if nbytes and not self._closed and "\x00" not in rollout_id:
            self._queue.put(_Job("charge", (rollout_id, nbytes)))

    async def note_log_refusal(self, rollout_id: str) -> int | None:
        """The rollout's shared count if this is its first refusal over its quota on any replica
        (the one to record), else None."""
        rows = await asyncio.to_thread(self._fetch, sql.NOTE_REFUSAL, (rollout_id,))
        return int(rows[0][0]) if rows else None

    def _listen_loop(self) -> None:
        conn, missed = None, True  # at first too: a NOTIFY before this LISTEN reached no watcher
        while not self._closed:
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.url, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S)
                    conn.execute(sql.LISTEN)
                    if missed:
                        self._announce(None)
                        self._announce_flow(None)
                for note in conn.notifies(timeout=_LISTEN_POLL_S):
                    if note.channel == "openforgerl_flow":
                        self._announce_flow(FlowState.parse(note.payload))
                    else:
                        self._announce(note.payload)
            except psycopg.OperationalError:
                missed = True
                time.sleep(_LISTEN_POLL_S)
        if conn is not None:
            conn.close()

    def _announce(self, rollout_id: str | None) -> None:
        for callback in list(self._watchers):
            callback(rollout_id)

    def _announce_flow(self, state: FlowState | None) -> None:
        for callback in list(self._flow_watchers):
            callback(state)

    async def put_blob(self, sha256: str, data: bytes, media_type: str) -> None:
        """Stored once (idempotent across replicas); committed when this returns."""
        if sha256 in self._known_blobs:
            return
        if not re.fullmatch(r"[0-9a-f]{64}", sha256):
            raise ValueError(f"not a sha256 hex digest: {sha256[:80]!r}")
        await asyncio.wrap_future(self._submit("blob", sha256, media_type, len(data), data))
        known = self._known_blobs
        known[sha256] = None
        if len(known) > _KNOWN_BLOBS:
            del known[next(iter(known))]

    # -- reading -------------------------------------------------------------------------------
    def _reader(self) -> Any:
        conn = getattr(self._read_local, "conn", None)
        if conn is None or conn.closed:
            if self._closed:
                raise RuntimeError(f"call store {self.path} is closed")
            conn = self._connect(autocommit=True)
            conn.execute(
                "SET synchronous_commit = off"
            )  # its only writes are quota counts (reserve_log_bytes)
            self._read_local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def _fetch(self, query: str, params: tuple[Any, ...] | dict[str, Any] = ()) -> list[Any]:
        """Rows of `query`; reconnects once when the server dropped this thread's connection. A key
        with a NUL names nothing (PostgreSQL text cannot hold one, so none was stored): no rows,
        where the driver would raise, and an agent's `/r/<id with %00>/v1` would be a 500, not a 404."""
        values = params.values() if isinstance(params, dict) else params
        if any(isinstance(p, str) and "\x00" in p for p in values):
            return []
        try:
            return list(self._reader().execute(query, params).fetchall())
        except psycopg.OperationalError:
            self._read_local.conn = None
            return list(self._reader().execute(query, params).fetchall())

    def _bodies(self, query: str, params: tuple[Any, ...] = ()) -> list[bytes]:
        return [bytes(row[0]) for row in self._fetch(query, params)]

    async def get_rollout(self, rollout_id: str) -> RolloutRecord | None:
        rows = await asyncio.to_thread(
            self._bodies, "SELECT body FROM rollouts WHERE rollout_id=%s", (rollout_id,)
        )
        return RolloutRecord.model_validate_json(rows[0]) if rows else None

    async def list_rollouts(self) -> list[RolloutRecord]:
        return await asyncio.to_thread(self.read_rollouts)

    async def list_calls(self, rollout_id: str) -> list[CallRecord]:
        return await asyncio.to_thread(self.read_calls, rollout_id)

    def read_rollouts(self) -> list[RolloutRecord]:
        return [
            RolloutRecord.model_validate_json(r)
            for r in self._bodies("SELECT body FROM rollouts ORDER BY seq")
        ]

    def read_calls(self, rollout_id: str) -> list[CallRecord]:
        rows = self._bodies("SELECT body FROM calls WHERE rollout_id=%s ORDER BY idx", (rollout_id,))
        return [CallRecord.model_validate_json(r) for r in rows]

    def read_rollout_ids_with_calls(self) -> list[str]:
        rows = self._fetch("SELECT rollout_id FROM calls GROUP BY rollout_id ORDER BY min(seq)")
        return [str(row[0]) for row in rows]

    def read_conflicts(self) -> list[tuple[str, int, bytes]]:
        """The writes that found their key taken by other bytes (kept aside, never applied)."""
        rows = self._fetch("SELECT rollout_id, idx, body FROM call_conflicts ORDER BY seen_at")
        return [(str(r), int(i), bytes(b)) for r, i, b in rows]

    async def get_blob(self, sha256: str) -> bytes | None:
        return await asyncio.to_thread(self.read_blob, sha256)

    def read_blob(self, sha256: str) -> bytes | None:
        rows = self._fetch("SELECT data FROM blobs WHERE sha256=%s", (sha256,))
        return bytes(rows[0][0]) if rows else None

    def read_blob_usage(self) -> tuple[int, int]:
        ((count, size),) = self._fetch("SELECT count(*), coalesce(sum(size), 0) FROM blobs")
        return int(count), int(size)

    # -- closing -------------------------------------------------------------------------------
    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        await asyncio.to_thread(self._writer.join)
        await asyncio.to_thread(self._finish)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._writer.join()
        self._finish()

    def _finish(self) -> None:
        if self._listener is not None:  # it sees `_closed` within one poll
            self._listener.join(2 * _LISTEN_POLL_S)
        self._conn.close()
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
