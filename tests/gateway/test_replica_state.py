"""What gateway replicas on one PostgreSQL call log hold in common besides close and taint: the pause
(weight sync), the policy version, and each rollout's call log quota.

Each test runs the same scenario on two shared stores: PostgreSQL, which keeps that state for every
replica, and the control, replicas on one SQLite file, which keep it per process (so the attack or the
missed pause would go through there).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from typing import Any

import aiohttp
import orjson
import psycopg
import pytest

from openforgerl.engines.scripted import ScriptedEngine
from openforgerl.gateway.server import RunningGateway, start_gateway
from openforgerl.store import open_store

SECRET = "replica-state-test-secret"


def _location(shared: str, request: pytest.FixtureRequest, tmp_path: Any) -> str:
    return (
        str(request.getfixturevalue("postgres_url")) if shared == "postgres" else str(tmp_path / "calls.db")
    )


async def _admin(gw: RunningGateway, path: str) -> dict[str, Any]:
    async with aiohttp.ClientSession(headers=gw.admin_headers()) as http, http.post(gw.admin_url + path) as r:
        assert r.status == 200, await r.text()
        body: dict[str, Any] = await r.json()
        return body


async def _chat(gw: RunningGateway, ro: dict[str, str], content: str) -> tuple[int, dict[str, Any]]:
    url = f"{gw.model_url}/r/{ro['rollout_id']}/v1/chat/completions"
    body = {"model": "m", "messages": [{"role": "user", "content": content}]}
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, json=body, headers={"Authorization": f"Bearer {ro['api_key']}"}) as r,
    ):
        answer: dict[str, Any] = await r.json()
        return r.status, answer


def _stored(location: str, rollout_id: str) -> tuple[int, int, int]:
    """(bytes of the rollout's call records, the largest record's, how many are 413 refusals), read from
    the database."""
    sql = "SELECT body FROM calls WHERE rollout_id = %s"
    if location.startswith("postgresql://"):
        with psycopg.connect(location) as conn:
            rows = [bytes(b) for (b,) in conn.execute(sql, (rollout_id,)).fetchall()]
    else:
        with sqlite3.connect(location) as lite:
            rows = [bytes(b) for (b,) in lite.execute(sql.replace("%s", "?"), (rollout_id,)).fetchall()]
    errors = [orjson.loads(b).get("error") or {} for b in rows]
    return sum(map(len, rows)), max(map(len, rows)), sum(e.get("status") == 413 for e in errors)


@pytest.mark.parametrize("shared", ["postgres", "sqlite"])
async def test_a_pause_sent_to_one_replica_holds_calls_on_another(shared, request, tmp_path, fmt):
    """The orchestrator pauses replica A for a weight sync; a harness's call reaches replica B. On
    PostgreSQL B holds it until the resume, which A's answer stamps on B too (policy version 1), and a
    replica started meanwhile starts paused. Control: replicas on one SQLite file: B serves the call at
    once under the old policy (what a weight sync must never let through)."""
    location = _location(shared, request, tmp_path)
    engine = ScriptedEngine(lambda turn: "ok", fmt=fmt)
    stores = [open_store(location) for _ in range(3)]
    a, b = [await start_gateway(engine, store, secret=SECRET, pause_wait_s=10.0) for store in stores[:2]]
    late: RunningGateway | None = None
    try:
        ro = await a.open_rollout(task_id="t")
        paused = await _admin(a, "/admin/pause?timeout=0")
        answered = time.monotonic()
        assert paused["paused"] is True and paused["shared"] is (shared == "postgres")
        # How long B takes to hear of it is printed, not asserted: on a loaded box it passed 1 s. The
        # control (SQLite) gets 1 s to show B never hears; PostgreSQL up to 30 s to show B does.
        until = answered + (30.0 if shared == "postgres" else 1.0)
        while not b.gateway.gate.paused:
            if time.monotonic() >= until:
                break
            await asyncio.sleep(0.002)
        heard = b.gateway.gate.paused
        print(f"{shared}: B paused {heard}, {(time.monotonic() - answered) * 1e3:.1f} ms after A answered")
        if shared == "postgres":
            late = await start_gateway(engine, stores[2], secret=SECRET)
            assert late.gateway.gate.paused  # a replica joining mid-sync does not admit either
        started = time.monotonic()
        call = asyncio.create_task(_chat(b, ro, "during the sync"))
        await asyncio.sleep(0.6)
        held = not call.done()
        resumed = await _admin(a, "/admin/resume")
        status, _ = await call
        waited = time.monotonic() - started
        assert status == 200 and resumed["policy_version"] == 1
        (record,) = await stores[1].list_calls(ro["rollout_id"])
        if shared == "postgres":
            assert heard and held and waited >= 0.6
            assert record.policy_version == 1 == b.gateway.gate.policy_version  # served after the sync
            assert late is not None and not late.gateway.gate.paused and late.gateway.gate.policy_version == 1
        else:
            assert not heard and not held
            assert record.policy_version == 0 and b.gateway.gate.policy_version == 0  # the old weights
    finally:
        for gw in (a, b, late):
            if gw is not None:
                await gw.aclose()
        for store in stores:
            await store.aclose()


@pytest.mark.parametrize(("quota", "body"), [(80_000, 8000), (256_000, 2000)])  # chunk < body, chunk > body
@pytest.mark.parametrize("shared", ["postgres", "sqlite"])
async def test_a_rollout_spread_over_replicas_gets_its_log_quota_once(
    shared, quota, body, request, tmp_path, fmt
):
    """A rollout sends calls round-robin over three replicas until each has refused it. On
    PostgreSQL the replicas count its log bytes together: what it stored stays within its quota plus
    one record (a call is admitted on its body's size and charged its whole record once it ends, as
    in one process), every replica refuses it past that, and one 413 is recorded. Control: replicas
    on one SQLite file count per process, so the rollout stores about three quotas' worth."""
    location = _location(shared, request, tmp_path)
    engine = ScriptedEngine(lambda turn: "fine", fmt=fmt)
    stores = [open_store(location) for _ in range(3)]
    gws = [
        await start_gateway(engine, store, secret=SECRET, max_log_bytes_per_rollout=quota) for store in stores
    ]
    try:
        ro = await gws[0].open_rollout(task_id="t")
        served, refused = 0, set()
        for n in range(300):
            gw = gws[n % 3]
            status, answer = await _chat(gw, ro, f"{n:04d} " + "x" * body)
            if status == 413:
                assert answer["error"]["code"] == "rollout_log_quota"
                refused.add(n % 3)
                if len(refused) == 3:
                    break
            else:
                assert status == 200, answer
                served += 1
    finally:
        for gw in gws:
            await gw.aclose()
        for store in stores:
            await store.aclose()  # the embedded store's last batch reaches its file
    assert refused == {0, 1, 2}
    stored, largest, refusals = _stored(location, ro["rollout_id"])
    if shared == "postgres":
        assert stored - largest <= quota
        assert refusals == 1  # recorded once, by whichever replica refused first
    else:
        assert stored > 2 * quota + largest
        assert refusals == 3
    print(f"{shared}: {served} calls served, {stored} bytes stored for a quota of {quota}")


async def test_a_pause_the_shared_log_cannot_take_is_a_503_naming_this_replica(request, monkeypatch, fmt):
    """The database goes away: a pause still stops this replica, and the answer is a 503 in the admin
    shape saying the others may not have paused (no 500, no traceback). Control: the same pause while the
    database is up is a 200 that reached every replica."""
    from openforgerl.store import postgres
    from openforgerl.testing.postgres import start

    monkeypatch.setattr(postgres, "_RETRY_S", 1.0)  # how long the writer retries before giving up
    server = start(request.getfixturevalue("postgres_server").bindir)
    store = open_store(server.create_database())
    gw = await start_gateway(ScriptedEngine(lambda turn: "ok", fmt=fmt), store, secret=SECRET)
    try:
        assert (await _admin(gw, "/admin/pause?timeout=0"))["shared"] is True
        await _admin(gw, "/admin/resume")
        assert not gw.gateway.gate.paused
        server.stop()
        async with (
            aiohttp.ClientSession(headers=gw.admin_headers()) as http,
            http.post(gw.admin_url + "/admin/pause?timeout=0") as r,
        ):
            assert r.status == 503
            error = (await r.json())["error"]
        assert error["code"] == "flow_not_shared" and "this replica only" in error["message"]
        assert gw.gateway.gate.paused
    finally:
        await gw.aclose()
        await store.aclose()
        server.stop()


@pytest.mark.parametrize("shared", ["postgres", "sqlite"])
async def test_replicas_stamp_one_policy_version(shared, request, tmp_path, fmt):
    """Replica A starts at policy version 5 (`--policy-version`), B at the default 0: on PostgreSQL B
    takes 5, and a resume sent to B makes 6 on both. Control: on one SQLite file B stays at its own."""
    location = _location(shared, request, tmp_path)
    engine = ScriptedEngine(lambda turn: "ok", fmt=fmt)
    stores = [open_store(location) for _ in range(2)]
    a = await start_gateway(engine, stores[0], secret=SECRET, policy_version=5)
    b = await start_gateway(engine, stores[1], secret=SECRET)
    try:
        resumed = (await _admin(b, "/admin/resume"))["policy_version"]
        for _ in range(250):  # until A hears of it
            if a.gateway.gate.policy_version != 5:
                break
            await asyncio.sleep(0.002)
        versions = (a.gateway.gate.policy_version, b.gateway.gate.policy_version)
        assert versions == ((6, 6) if shared == "postgres" else (5, 1))
        assert resumed == versions[1]
    finally:
        for gw in (a, b):
            await gw.aclose()
        for store in stores:
            await store.aclose()


async def test_a_watcher_reads_again_once_the_listener_listens(postgres_url: str) -> None:
    """A replica reads the shared state, then its listener connects and LISTENs on its own thread; a pause
    committed in between is announced to no one. So once it listens, every watcher is told to read
    again (`None`), the first time too: on a loaded box a replica that started just before a pause
    missed it for good."""
    store = open_store(postgres_url)
    heard: list[object] = []
    try:
        store.watch_flow(heard.append)  # type: ignore[attr-defined]
        store.watch_rollouts(heard.append)  # type: ignore[attr-defined]
        for _ in range(500):
            if len(heard) >= 2:
                break
            await asyncio.sleep(0.01)
        assert heard == [None, None]
    finally:
        await store.aclose()


def test_control_a_notify_sent_before_listen_never_arrives(postgres_url: str) -> None:
    """Why the watcher must read again: PostgreSQL delivers a NOTIFY only to sessions already
    listening, so what was committed before the LISTEN is never announced to it."""
    with (
        psycopg.connect(postgres_url, autocommit=True) as late,
        psycopg.connect(postgres_url, autocommit=True) as early,
    ):
        early.execute("LISTEN openforgerl_flow")
        with psycopg.connect(postgres_url, autocommit=True) as writer:
            writer.execute("NOTIFY openforgerl_flow, 'paused'")
        late.execute("LISTEN openforgerl_flow")
        assert [n.payload for n in early.notifies(timeout=2, stop_after=1)] == ["paused"]
        assert list(late.notifies(timeout=0.5)) == []
