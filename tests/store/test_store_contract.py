"""The call-log contract (store/base.py), run against every store: embedded SQLite and a real PostgreSQL.

The guarantees the gateway relies on: a call reads back byte-exact and in index order; a finished call
is never overwritten (a second write of its key is kept aside as a conflict); call indices leased by
several store instances (several gateway processes) never overlap; a call is durable once
`append_call` is done, across a SIGKILL of the writing process; blobs are stored once.
"""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

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
from openforgerl.store import open_store
from openforgerl.testing.calls import stored

Opener = Callable[[], Any]


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """Where a store lives: a SQLite file, or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "log.db")
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def opener(location: str) -> Opener:
    return lambda: open_store(location)


def _call(rollout: str, index: int) -> CallRecord:
    return CallRecord(
        rollout_id=rollout,
        index=index,
        protocol=WireProtocol.CHAT,
        prompt_token_ids=[1, 2, 3 + index],
        completion_token_ids=[7, 8],
        completion_logprobs=[-0.5, -0.25],
    )


def _conflicts(location: str) -> list[tuple[str, int, bytes]]:
    """What the store kept aside: writes that found their key taken by other bytes."""
    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location) as conn:
            rows = conn.execute("SELECT rollout_id, idx, body FROM call_conflicts").fetchall()
    else:
        import sqlite3

        with sqlite3.connect(location) as db:
            rows = db.execute("SELECT rollout_id, idx, body FROM call_conflicts").fetchall()
    return [(r, i, bytes(b)) for r, i, b in rows]


async def test_append_and_read_back_in_order(opener: Opener) -> None:
    store = opener()
    for i in (2, 0, 1):
        await store.append_call(*stored(_call("r1", i)))
    await store.append_call(*stored(_call("r2", 0)))
    await store.put_rollout(RolloutRecord(rollout_id="r1", status=RolloutStatus.OK, reward=1.0))
    await store.put_rollout(RolloutRecord(rollout_id="r0"))
    await store.put_rollout(RolloutRecord(rollout_id="r1", status=RolloutStatus.OK, reward=0.5))  # replaced
    calls = await store.list_calls("r1")
    assert [c.index for c in calls] == [0, 1, 2] and calls[1].prompt_token_ids == [1, 2, 4]
    assert (await store.get_rollout("r1")).reward == 0.5
    assert await store.get_rollout("missing") is None
    assert sorted(r.rollout_id for r in await store.list_rollouts()) == ["r0", "r1"]
    await store.aclose()
    reopened = opener()
    assert [c.rollout_id for c in reopened.read_calls("r2")] == ["r2"]
    assert reopened.read_rollout_ids_with_calls() == ["r1", "r2"]
    assert sorted(r.rollout_id for r in reopened.read_rollouts()) == ["r0", "r1"]
    reopened.close()


async def test_concurrent_appends_round_trip_exactly(opener: Opener) -> None:
    """Many appends at once (one commit batch) read back identical to what was appended."""
    store = opener()
    records = [
        _call("r", i).model_copy(
            update={
                "completion_logprobs": [-0.5, -9999.0, -1.25e-07],
                "request": {"a": [1, {"b": None}], "t": "h\u00e9 \u2603"},
                "error": CallError(kind=CallErrorKind.ENGINE_HTTP, message="m", status=500),
            }
        )
        for i in range(300)
    ]
    await asyncio.gather(*(store.append_call(*stored(r)) for r in records))
    back = await store.list_calls("r")
    assert back == [CallRecord.model_validate_json(r.model_dump_json()) for r in records]
    assert back[0].is_infra_error and not back[0].trainable
    await store.aclose()


async def test_append_call_round_trips_the_gateway_record(opener: Opener) -> None:
    from openforgerl.gateway.recording import CallMeta, CallTape, build_record, record_json

    raw_request = b'{"model": "m",  "messages": [{"role": "user", "content": "h\\u00e9"}], "n": 1}'
    meta = CallMeta(
        "r",
        3,
        WireProtocol.CHAT,
        orjson.loads(raw_request),
        None,
        {"thread-id": "t1"},
        2,
        100.0,
        False,
        raw_request,
    )
    tape = CallTape(
        prompt=PromptIds(json=b"[5,6,70000]"),
        token_ids=[1, 2],
        logprobs=[-0.5, -1e-9],
        text=["h\u00e9"],
        finish_reason="stop",
        engine_id="e",
        first_token_at=101.0,
    )
    store = opener()
    await store.append_call("r", 3, record_json(meta, tape, None, finished_at=102.0))
    (back,) = await store.list_calls("r")
    assert back == build_record(meta, tape, None, finished_at=102.0)
    await store.aclose()


async def test_a_finished_call_is_never_overwritten(opener: Opener, location: str) -> None:
    """A second write of a call's key (a bug upstream, or another replica) is kept aside as a
    conflict; the first call stays, and the other calls of the same commit are not held back."""
    store = opener()
    first = _call("r", 0)
    await store.append_call(*stored(first))
    await store.list_calls("r")
    twin = first.model_copy(update={"completion_token_ids": [666]})
    await asyncio.gather(store.append_call(*stored(twin)), store.append_call(*stored(_call("r", 1))))
    calls = await store.list_calls("r")
    assert [c.completion_token_ids for c in calls] == [[7, 8], [7, 8]]
    await store.aclose()
    ((rid, idx, body),) = _conflicts(location)
    assert (rid, idx) == ("r", 0) and CallRecord.model_validate_json(body).completion_token_ids == [666]


async def test_a_second_store_cannot_overwrite_either(opener: Opener, location: str) -> None:
    """Two store instances (two gateway processes) writing the same key: one wins, the other is a conflict."""
    a, b = opener(), opener()
    one, two = _call("r", 0), _call("r", 0).model_copy(update={"completion_token_ids": [9]})
    await asyncio.gather(a.append_call(*stored(one)), b.append_call(*stored(two)))
    await b.list_calls("r")  # b's write is committed too
    (kept,) = await a.list_calls("r")
    await a.aclose()
    await b.aclose()
    ((_, _, diverted),) = _conflicts(location)
    assert {
        tuple(kept.completion_token_ids),
        tuple(CallRecord.model_validate_json(diverted).completion_token_ids),
    } == {(7, 8), (9,)}


async def test_index_leases_start_past_stored_calls_and_other_stores_leases(opener: Opener) -> None:
    a, b = opener(), opener()
    await a.append_call(*stored(_call("r", 0)))
    await a.append_call(*stored(_call("r", 5)))  # a gap at 1..4
    await a.list_calls("r")
    assert await a.lease_indices("r", 4) == (6, 10)
    assert await b.lease_indices("r", 4) == (10, 14)  # the other store sees a's lease
    assert await b.lease_indices("fresh", 2) == (0, 2)
    results = await asyncio.gather(*(s.lease_indices("race", 3) for s in (a, b) for _ in range(5)))
    assert sorted(start for start, _ in results) == list(range(0, 30, 3))  # disjoint, none twice
    await a.aclose()
    await b.aclose()


async def test_a_cancelled_task_appends_without_awaiting(opener: Opener) -> None:
    """The gateway's cancelled call records its last call and re-raises, never awaiting: the call is
    durable (readable by another store instance) when `append_call` returns."""
    store, other = opener(), opener()

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
    if hasattr(store, "url"):  # PostgreSQL: committed on the server already; any reader sees it
        assert [c.index for c in other.read_calls("c")] == [0]
    assert [c.index for c in store.read_calls("c")] == [0]
    await store.aclose()
    await other.aclose()


def test_appended_calls_survive_sigkill_of_the_writer(location: str, opener: Opener) -> None:
    """Once append_call is done, a SIGKILL of the writing process loses nothing."""
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal
        from openforgerl.records import CallRecord, WireProtocol
        from openforgerl.store import open_store
        from openforgerl.testing.calls import stored
        async def main():
            store = open_store({location!r})
            for i in range(50):
                call = CallRecord(
                    rollout_id="k", index=i, protocol=WireProtocol.CHAT, completion_token_ids=[i]
                )
                await store.append_call(*stored(call))
            os.kill(os.getpid(), signal.SIGKILL)
        asyncio.run(main())
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    store = opener()
    assert [c.completion_token_ids for c in store.read_calls("k")] == [[i] for i in range(50)]
    store.close()


async def test_blobs_are_stored_once_and_read_back(opener: Opener) -> None:
    store, other = opener(), opener()
    data = b"\x89PNG" + bytes(range(256)) * 10
    sha = hashlib.sha256(data).hexdigest()
    assert await store.get_blob(sha) is None and store.read_blob(sha) is None
    await asyncio.gather(*(s.put_blob(sha, data, "image/png") for s in (store, other) for _ in range(3)))
    assert await store.get_blob(sha) == data and other.read_blob(sha) == data
    assert store.read_blob_usage() == (1, len(data))
    assert store.read_blob("../" * 8 + "etc/passwd") is None and store.read_blob("a" * 63) is None
    with pytest.raises(ValueError):
        await store.put_blob("../x", data, "image/png")
    await store.aclose()
    await other.aclose()


async def test_a_stale_put_never_reopens_a_closed_rollout_on_postgres(opener: Opener, location: str) -> None:
    """Two replicas' read-modify-writes of one record: B read it open, A closed it, then B writes
    its stale copy back. PostgreSQL keeps the close (and a taint); the control, the embedded store,
    applies the stale put (its replicas are one process's, which serialises them itself)."""
    a, b = opener(), opener()
    await a.put_rollout(RolloutRecord(rollout_id="r"))
    stale = await b.get_rollout("r")
    await a.put_rollout(
        RolloutRecord(rollout_id="r", closed=True, infra_tainted=True, status=RolloutStatus.OK)
    )
    await b.put_rollout(stale.model_copy(update={"policy_versions": [3]}))
    kept = await a.get_rollout("r")
    if location.startswith("postgresql://"):
        assert kept.closed and kept.infra_tainted and kept.status == RolloutStatus.OK
        await b.put_rollout(kept.model_copy(update={"reward": 2.0}))  # a put that keeps it closed applies
        assert (await a.get_rollout("r")).reward == 2.0
    else:
        assert not kept.closed
    await a.aclose()
    await b.aclose()


async def test_a_rollout_id_with_a_nul_names_nothing_and_is_refused_alone(
    opener: Opener, location: str
) -> None:
    """An agent picks the rollout id of its model URL (`/r/<id>/v1`): one with a NUL must find no rollout
    (a 404), never crash the read. A write of one is refused alone, not failing its commit batch.
    Control: the PostgreSQL driver itself raises on such a key (so the store's check is what answers)."""
    store = opener()
    bad = "r\x00'; DROP TABLE calls; --"
    assert await store.get_rollout(bad) is None and await store.list_calls(bad) == []
    assert store.read_calls(bad) == []
    await store.append_call(*stored(_call("ok", 0)))
    if location.startswith("postgresql://"):
        import psycopg

        with pytest.raises(ValueError):
            await store.put_rollout(RolloutRecord(rollout_id=bad))
        with psycopg.connect(location) as conn, pytest.raises(psycopg.DataError):
            conn.execute("SELECT body FROM rollouts WHERE rollout_id=%s", (bad,))
    assert [c.index for c in await store.list_calls("ok")] == [0]
    await store.aclose()


async def test_postgres_writer_reconnects_when_the_server_drops_it(postgres_url: str) -> None:
    """The server ends every connection of the store (a restart, a failover, an idle-timeout proxy):
    the next appends and reads reconnect and succeed, each call stored once. Control: the connections
    were really terminated (the store's writer connection is a new one)."""
    import psycopg

    store = open_store(postgres_url)
    await store.append_call(*stored(_call("r", 0)))
    assert store.read_calls("r")
    before = store._conn.info.backend_pid
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()[0]
    assert killed >= 2  # the writer's connection and this thread's reader
    await asyncio.gather(*(store.append_call(*stored(_call("r", i))) for i in range(1, 20)))
    assert [c.index for c in await store.list_calls("r")] == list(range(20))
    assert [c.index for c in store.read_calls("r")] == list(range(20))
    assert store._conn.info.backend_pid != before
    await store.aclose()


async def test_log_byte_reservations_from_three_stores_never_pass_the_quota(postgres_url: str) -> None:
    """Three stores (three replicas) reserve 1000 bytes of one rollout's quota 90 times at once: exactly
    25 fit a 25,000-byte quota, each seeing its own total; charges are added unchecked, and only the first
    refusal is the one to record. (The control, replicas counting per process, is in
    tests/gateway/test_replica_state.py.)"""
    stores = [open_store(postgres_url) for _ in range(3)]
    try:
        got = await asyncio.gather(*(stores[i % 3].reserve_log_bytes("r", 1000, 25_000) for i in range(90)))
        totals = sorted(t for t in got if t is not None)
        assert totals == list(range(1000, 25_001, 1000))
        assert await stores[0].reserve_log_bytes("r", 1, 25_000) is None
        assert await stores[0].reserve_log_bytes("fresh", 25_001, 25_000) is None  # alone past it: nothing
        stores[1].charge_log_bytes("r", 500)
        await stores[1].append_call(*stored(_call("r", 0)))  # the charge commits in the writer's batch
        assert await stores[2].reserve_log_bytes("r", 0, 30_000) == 25_500
        firsts = await asyncio.gather(*(s.note_log_refusal("r") for s in stores))
        assert sorted(firsts, key=lambda t: t is not None) == [None, None, 25_500]
    finally:
        for s in stores:
            await s.aclose()


async def test_a_pause_on_one_store_reaches_the_watchers_of_another(postgres_url: str) -> None:
    """`set_flow` on one store is announced to every store's `watch_flow`, in order; the policy version
    never goes back; a notification that is not a state (anyone with the database may NOTIFY) asks for a
    re-read (None). Control: before the change the other store read the initial state."""
    import psycopg

    from openforgerl.store.base import FlowState

    a, b = open_store(postgres_url), open_store(postgres_url)
    heard: asyncio.Queue[FlowState | None] = asyncio.Queue()
    loop = asyncio.get_running_loop()
    try:
        assert await b.read_flow() == FlowState(0, False, 0)
        b.watch_flow(lambda state: loop.call_soon_threadsafe(heard.put_nowait, state))
        assert await asyncio.wait_for(heard.get(), 5) is None  # listening now: read again
        assert await a.set_flow(True, 3) == FlowState(1, True, 3)
        assert await a.set_flow(False, 1) == FlowState(2, False, 3)
        assert [await asyncio.wait_for(heard.get(), 5) for _ in range(2)] == [
            FlowState(1, True, 3),
            FlowState(2, False, 3),
        ]
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("SELECT pg_notify('openforgerl_flow', 'not:a state')")
        assert await asyncio.wait_for(heard.get(), 5) is None
        assert await b.read_flow() == FlowState(2, False, 3)
    finally:
        await a.aclose()
        await b.aclose()
