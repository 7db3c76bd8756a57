"""The SQLite call log: durable appends, ordering, and survival of a killed writer process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap

import orjson
import pytest

from openforgerl.engines.base import PromptIds
from openforgerl.records import (
    CallError,
    CallErrorKind,
    CallRecord,
    RolloutRecord,
    RolloutStatus,
    WireProtocol,
)
from openforgerl.store import SQLiteCallStore
from openforgerl.testing.calls import stored


def _call(rollout: str, index: int) -> CallRecord:
    return CallRecord(
        rollout_id=rollout,
        index=index,
        protocol=WireProtocol.CHAT,
        prompt_token_ids=[1, 2, 3 + index],
        completion_token_ids=[7, 8],
        completion_logprobs=[-0.5, -0.25],
    )


async def test_append_and_read_back_in_order(tmp_path):
    store = SQLiteCallStore(tmp_path / "log.db")
    for i in (2, 0, 1):
        await store.append_call(*stored(_call("r1", i)))
    store.append_call(*stored(_call("r2", 0)))
    await store.put_rollout(RolloutRecord(rollout_id="r1", status=RolloutStatus.OK, reward=1.0))
    calls = await store.list_calls("r1")
    assert [c.index for c in calls] == [0, 1, 2]
    assert calls[1].prompt_token_ids == [1, 2, 4]
    assert (await store.get_rollout("r1")).reward == 1.0
    assert await store.get_rollout("missing") is None
    await store.aclose()
    reopened = SQLiteCallStore(tmp_path / "log.db")
    assert [c.rollout_id for c in reopened.read_calls("r2")] == ["r2"]
    assert reopened.read_rollout_ids_with_calls() == ["r1", "r2"]
    reopened.close()


async def test_error_kinds_round_trip(tmp_path):
    store = SQLiteCallStore(tmp_path / "log.db")
    rec = _call("r", 0).model_copy(
        update={"error": CallError(kind=CallErrorKind.ENGINE_HTTP, message="x", status=500)}
    )
    await store.append_call(*stored(rec))
    (back,) = await store.list_calls("r")
    assert back.is_infra_error and not back.trainable
    await store.aclose()


def test_appended_call_survives_sigkill(tmp_path):
    """Once append_call returned, a SIGKILL of the process loses nothing."""
    db = tmp_path / "log.db"
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal
        from openforgerl.records import CallRecord, WireProtocol
        from openforgerl.store import SQLiteCallStore
        from openforgerl.testing.calls import stored
        async def main():
            store = SQLiteCallStore({str(db)!r})
            for i in range(50):
                call = CallRecord(
                    rollout_id="k", index=i, protocol=WireProtocol.CHAT, completion_token_ids=[i]
                )
                await store.append_call(*stored(call))
            os.kill(os.getpid(), signal.SIGKILL)
        asyncio.run(main())
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == -9
    store = SQLiteCallStore(db)
    assert [c.completion_token_ids for c in store.read_calls("k")] == [[i] for i in range(50)]
    store.close()


async def test_concurrent_appends_group_commit_and_round_trip_exactly(tmp_path):
    """Appends made in one loop iteration share a transaction; every record reads back identical
    to what was appended (the hot-path JSON writer must match pydantic's own serialization)."""
    import asyncio

    store = SQLiteCallStore(tmp_path / "log.db")
    records = [
        _call("r", i).model_copy(
            update={
                "completion_logprobs": [-0.5, -9999.0, -1.25e-07],
                "request": {"a": [1, {"b": None}]},
                "error": CallError(kind=CallErrorKind.CLIENT_DISCONNECTED, message="m"),
            }
        )
        for i in range(300)
    ]
    await asyncio.gather(*(store.append_call(*stored(r)) for r in records))
    back = await store.list_calls("r")
    expected = [CallRecord.model_validate_json(r.model_dump_json()) for r in records]
    assert back == expected
    await store.aclose()


def test_durable_mode_and_appends_from_two_event_loops(tmp_path):
    """durable=True commits on a writer thread; two loops in two threads share one store."""
    import asyncio
    import threading

    store = SQLiteCallStore(tmp_path / "log.db", durable=True)

    def writer(rollout: str) -> None:
        async def go() -> None:
            await asyncio.gather(*(store.append_call(*stored(_call(rollout, i))) for i in range(50)))
            await store.append_call(*stored(_call(rollout, 50)))

        asyncio.run(go())

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [len(store.read_calls(name)) for name in ("a", "b")] == [51, 51]
    store.close()


@pytest.mark.parametrize("durable", [False, True])
async def test_a_cancelled_task_appends_without_awaiting(tmp_path, durable):
    """The gateway's cancelled call records its last call and re-raises, never awaiting: the call is
    durable when `append_call` returns (journaled, or in durable mode committed right there)."""
    store = SQLiteCallStore(tmp_path / "log.db", durable=durable)

    async def cancelled() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            store.append_call(*stored(_call("c", 0)))
            raise

    task = asyncio.create_task(cancelled())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    if durable:  # committed by the calling thread: already on disk, before any writer batch
        import sqlite3

        with sqlite3.connect(tmp_path / "log.db") as conn:
            assert conn.execute("SELECT count(*) FROM calls").fetchone() == (1,)
    assert [c.index for c in store.read_calls("c")] == [0]
    await store.aclose()


def test_journal_replay_stops_at_torn_stale_or_zero_frames(tmp_path):
    """The journal reads back exactly the live epoch: a frame torn by a kill, frames left from an
    earlier epoch past the live end, and the zero-filled tail all end it."""
    from openforgerl.store.journal import CallJournal, read_journal

    journal = CallJournal(tmp_path / "log.db", size=4096)  # small: appends must grow it
    bodies = [b'{"n":%d,"pad":"%s"}' % (i, b"x" * (1500 * i)) for i in range(4)]
    for i, body in enumerate(bodies):
        journal.append("r", i, body)
    assert journal.path.stat().st_size > 4096
    assert list(read_journal(journal.path)) == [("r", i, b) for i, b in enumerate(bodies)]
    assert not journal.start_over_if(3) and journal.start_over_if(4)  # all 4 committed: epoch 2 from 0
    journal.append("r2", 9, b'{"short":1}')
    assert list(read_journal(journal.path)) == [("r2", 9, b'{"short":1}')]  # not the stale epoch-1 frames
    data = bytearray(journal.path.read_bytes())
    journal.close(remove=False)
    data[25] ^= 0xFF  # a torn / corrupt live frame (header 18 bytes, id 2, body 11): not trusted
    journal.path.write_bytes(bytes(data))
    assert list(read_journal(journal.path)) == []


def test_orphaned_journal_of_a_killed_process_is_replayed_and_a_live_one_is_not(tmp_path):
    """Calls journaled by a process killed before its writer committed them reach SQLite when the
    database is next opened; the journal of a store still open elsewhere is left alone."""
    db = tmp_path / "log.db"
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from openforgerl.store.journal import CallJournal
        j = CallJournal(Path({str(db)!r}))
        for i in range(5):
            j.append("k", i, b'{{"rollout_id":"k","index":%d,"protocol":"chat_completions"}}' % i)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    assert subprocess.run([sys.executable, "-c", script], timeout=60).returncode == -9
    live = SQLiteCallStore(db)
    live.append_call(*stored(_call("live", 0)))  # its own journal, flock held
    assert [c.index for c in live.read_calls("k")] == list(range(5))  # the orphan was replayed
    journals = list(tmp_path.glob("log.db.journal.*"))
    assert journals == [live._journal.path]
    other = SQLiteCallStore(db)  # must not replay or delete the live store's journal
    assert list(tmp_path.glob("log.db.journal.*")) == journals
    assert [c.rollout_id for c in other.read_calls("live")] == ["live"]  # committed by live's writer
    other.close()
    live.close()
    assert list(tmp_path.glob("log.db.journal.*")) == []  # everything committed: removed on close


async def test_append_call_round_trips_the_gateway_record(tmp_path):
    """The gateway's hot path stores `record_json` (request and prompt ids spliced in as the bytes
    that came over the wire); it reads back equal to `build_record` of the same call."""
    from openforgerl.gateway.recording import CallMeta, CallTape, build_record, record_json

    raw_request = b'{"model": "m",  "messages": [{"role": "user", "content": "h\\u00e9"}], "n": 1}'
    meta = CallMeta(
        "r",
        3,
        WireProtocol.CHAT,
        orjson.loads(raw_request),
        None,
        {"thread-id": "t1", "x-codex-parent-thread-id": "t0"},
        2,
        100.0,
        False,
        raw_request,
    )
    tape = CallTape(
        prompt=PromptIds(json=b"[5,6,70000]"),
        token_ids=[1, 2],
        logprobs=[-0.5, -1e-9],
        text=["hé"],
        finish_reason="stop",
        engine_id="e",
        first_token_at=101.0,
    )
    error = CallError(kind=CallErrorKind.CLIENT_DISCONNECTED, message="gone")
    store = SQLiteCallStore(tmp_path / "log.db")
    await store.append_call("r", 3, record_json(meta, tape, error, finished_at=102.0))
    (back,) = await store.list_calls("r")
    assert back == build_record(meta, tape, error, finished_at=102.0)
    assert back.prompt_token_ids == [5, 6, 70000] and back.agent_id == "t1" and back.parent_agent_id == "t0"
    await store.aclose()


# ---------------------------------------------------------------------------- integrity


def _orphan_journal(db, rows) -> None:
    """A journal left by a process that died before its writer committed `rows`."""
    script = textwrap.dedent(
        f"""
        import os, signal
        from pathlib import Path
        from openforgerl.store.journal import CallJournal
        j = CallJournal(Path({str(db)!r}))
        for rid, i, body in {rows!r}:
            j.append(rid, i, body)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    assert subprocess.run([sys.executable, "-c", script], timeout=60).returncode == -9


def _conflicts(db) -> list[tuple[str, int, bytes]]:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return [
            (r, i, bytes(b)) for r, i, b in conn.execute("SELECT rollout_id, idx, body FROM call_conflicts")
        ]


async def test_a_finished_call_is_never_overwritten(tmp_path):
    """A second write of an index (a bug upstream) is kept aside; the first call stays, and the
    other calls of the same commit batch are not held back by it."""
    store = SQLiteCallStore(tmp_path / "log.db")
    first = _call("r", 0)
    await store.append_call(*stored(first))
    await store.list_calls("r")  # committed
    twin = first.model_copy(update={"completion_token_ids": [666]})
    await store.append_call(*stored(twin))
    await store.append_call(*stored(_call("r", 1)))
    calls = await store.list_calls("r")
    assert [c.completion_token_ids for c in calls] == [[7, 8], [7, 8]]
    await store.aclose()
    ((rid, idx, body),) = _conflicts(tmp_path / "log.db")
    assert (rid, idx) == ("r", 0) and CallRecord.model_validate_json(body).completion_token_ids == [666]


async def test_replay_skips_identical_rows_and_never_overwrites_different_ones(tmp_path):
    """Replay is `INSERT OR IGNORE` + a byte comparison: a row the dead process had already
    committed is skipped; a journaled row whose index holds other bytes goes to `call_conflicts`."""
    db = tmp_path / "log.db"
    store = SQLiteCallStore(db)
    first = _call("k", 0)
    await store.append_call(*stored(first))
    await store.aclose()
    same = first.stored_json()  # the bytes the store wrote
    other = b'{"rollout_id":"k","index":0,"protocol":"chat_completions","completion_token_ids":[5]}'
    fresh = b'{"rollout_id":"k","index":1,"protocol":"chat_completions"}'
    _orphan_journal(db, [("k", 0, same), ("k", 0, other), ("k", 1, fresh)])
    reopened = SQLiteCallStore(db)
    calls = reopened.read_calls("k")
    assert [c.index for c in calls] == [0, 1] and calls[0].completion_token_ids == [7, 8]
    reopened.close()
    assert _conflicts(db) == [("k", 0, other)]
    again = SQLiteCallStore(db)  # nothing left to replay: idempotent
    assert [c.index for c in again.read_calls("k")] == [0, 1]
    again.close()
    assert _conflicts(db) == [("k", 0, other)]


async def test_index_leases_start_past_stored_calls_and_other_processes_leases(tmp_path):
    """The next index comes from the store's maximum (a gap left by a lost call is never reused)
    and from every block leased before, by any store on the same file (another process)."""
    db = tmp_path / "log.db"
    a, b = SQLiteCallStore(db), SQLiteCallStore(db)
    await a.append_call(*stored(_call("r", 0)))
    await a.append_call(*stored(_call("r", 5)))  # a gap at 1..4
    await a.list_calls("r")
    assert await a.lease_indices("r", 4) == (6, 10)
    assert await b.lease_indices("r", 4) == (10, 14)  # the other store sees a's lease
    assert await b.lease_indices("fresh", 2) == (0, 2)
    results = await asyncio.gather(*(s.lease_indices("race", 3) for s in (a, b) for _ in range(5)))
    starts = sorted(start for start, _ in results)
    assert starts == list(range(0, 30, 3))  # disjoint blocks, none handed out twice
    await a.aclose()
    await b.aclose()


# -- blobs -------------------------------------------------------------------------------------------
async def test_blobs_are_stored_once_and_read_back(tmp_path):
    import hashlib

    store = SQLiteCallStore(tmp_path / "log.db")
    data = b"\x89PNG" + bytes(range(256)) * 10
    sha = hashlib.sha256(data).hexdigest()
    assert await store.get_blob(sha) is None and store.read_blob(sha) is None
    await asyncio.gather(*(store.put_blob(sha, data, "image/png") for _ in range(5)))
    entry = b"OFB1" + bytes.fromhex(sha) + len(data).to_bytes(8, "big") + data
    (pack,) = (tmp_path / "log.db.blobs" / "packs").iterdir()
    assert pack.read_bytes() == entry  # one entry in a pack beside the database
    store._known_blobs.clear()  # a put of a blob another replica wrote: a second copy, still one blob
    await store.put_blob(sha, data, "image/png")
    assert await store.get_blob(sha) == data and store.read_blob(sha) == data
    assert store.read_blob_usage() == (1, len(data)) and pack.read_bytes() == entry * 2
    assert store._reader().execute("SELECT count(*) FROM blobs").fetchone() == (0,)
    assert store.read_blob("../" * 8 + "etc/passwd") is None and store.read_blob("a" * 63) is None
    with pytest.raises(ValueError):
        await store.put_blob("../x", data, "image/png")
    await store.aclose()
    reopened = SQLiteCallStore(tmp_path / "log.db")
    assert reopened.read_blob(sha) == data
    reopened.close()


def test_a_blob_put_before_its_record_survives_sigkill_with_it(tmp_path):
    """The gateway awaits put_blob before the call's record: a kill -9 right after the record was
    journaled leaves both, and never a record naming a missing blob."""
    db = tmp_path / "log.db"
    script = textwrap.dedent(
        f"""
        import asyncio, hashlib, os, signal
        from openforgerl.records import CallRecord, ImageRef, WireProtocol
        from openforgerl.store import SQLiteCallStore
        from openforgerl.testing.calls import stored
        async def main():
            store = SQLiteCallStore({str(db)!r})
            for i in range(20):
                data = bytes([i]) * 1000
                sha = hashlib.sha256(data).hexdigest()
                await store.put_blob(sha, data, "image/png")
                image = ImageRef(sha256=sha, media_type="image/png", width=1, height=1)
                call = CallRecord(rollout_id="k", index=i, protocol=WireProtocol.CHAT, images=[image])
                await store.append_call(*stored(call))
            os.kill(os.getpid(), signal.SIGKILL)
        asyncio.run(main())
        """
    )
    assert subprocess.run([sys.executable, "-c", script], timeout=60).returncode == -9
    store = SQLiteCallStore(db)
    calls = store.read_calls("k")
    assert len(calls) == 20
    for i, call in enumerate(calls):
        assert store.read_blob(call.images[0].sha256) == bytes([i]) * 1000
    store.close()


async def test_durable_blobs_and_logs_with_blobs_in_the_table_are_read(tmp_path):
    """`durable=True` writes (and fsyncs) the file too; a log written before blob files kept its blobs in
    the `blobs` table, and they are still read."""
    import hashlib

    store = SQLiteCallStore(tmp_path / "log.db", durable=True)
    data = b"\x89PNG durable" * 40
    sha = hashlib.sha256(data).hexdigest()
    await store.put_blob(sha, data, "image/png")
    old = b"GIF89a from an old log" * 10
    old_sha = hashlib.sha256(old).hexdigest()
    with store._write_lock:
        store._conn.execute("INSERT INTO blobs VALUES (?,?,?,?)", (old_sha, "image/gif", len(old), old))
    assert store.read_blob(sha) == data and store.read_blob(old_sha) == old
    assert store.read_blob_usage() == (2, len(data) + len(old))
    await store.aclose()


def test_journal_replay_restores_blobs_with_the_records_naming_them(tmp_path):
    """A journal left by an older version (blobs journaled as frames, before blob files): it holds the
    blob frame, then the record; the next store replays both in one transaction."""
    import hashlib

    from openforgerl.records import ImageRef
    from openforgerl.store.journal import CallJournal
    from openforgerl.store.sqlite import _BLOB_FRAME

    db = tmp_path / "log.db"
    SQLiteCallStore(db).close()  # the schema exists, as a live store would have made it
    data = b"\x89PNG fake bytes" * 50
    sha = hashlib.sha256(data).hexdigest()
    rec = CallRecord(
        rollout_id="k",
        index=0,
        protocol=WireProtocol.CHAT,
        images=[ImageRef(sha256=sha, media_type="image/png", width=2, height=3)],
    )
    journal = CallJournal(db)
    journal.append(f"{_BLOB_FRAME}{sha}\x00image/png", 0, data)
    journal.append(*stored(rec))
    journal._map.close()
    os.close(journal._fd)  # the owner "dies": its lock goes, the file stays
    store = SQLiteCallStore(db)
    assert store.read_blob(sha) == data
    (call,) = store.read_calls("k")
    assert call.images[0].sha256 == sha
    assert store._reader().execute("SELECT media_type, size FROM blobs").fetchall() == [
        ("image/png", len(data))
    ]
    store.close()
