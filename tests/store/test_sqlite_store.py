"""The SQLite call log: durable appends, ordering, and survival of a killed writer process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from openforgerl.records import (
    CallError,
    CallErrorKind,
    CallRecord,
    RolloutRecord,
    RolloutStatus,
    WireProtocol,
)
from openforgerl.store import SQLiteCallStore


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
        await store.append_call(_call("r1", i))
    store.append_call_nowait(_call("r2", 0))
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
    rec = _call("r", 0).model_copy(update={"error": CallError(kind=CallErrorKind.ENGINE_HTTP, message="x", status=500)})
    await store.append_call(rec)
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
        async def main():
            store = SQLiteCallStore({str(db)!r})
            for i in range(50):
                await store.append_call(CallRecord(rollout_id="k", index=i, protocol=WireProtocol.CHAT,
                                                   completion_token_ids=[i]))
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
        _call("r", i).model_copy(update={"completion_logprobs": [-0.5, -9999.0, -1.25e-07], "request": {"a": [1, {"b": None}]},
                                         "error": CallError(kind=CallErrorKind.CLIENT_DISCONNECTED, message="m")})
        for i in range(300)
    ]
    await asyncio.gather(*(store.append_call(r) for r in records))
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
            await asyncio.gather(*(store.append_call(_call(rollout, i)) for i in range(50)))
            store.append_call_nowait(_call(rollout, 50))

        asyncio.run(go())

    threads = [threading.Thread(target=writer, args=(name,)) for name in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [len(store.read_calls(name)) for name in ("a", "b")] == [51, 51]
    store.close()
