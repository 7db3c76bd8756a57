"""One rollout cannot spend another's share of the gateway: calls in flight and call log bytes.

Attacks (each with its control):
* a sandbox floods its model URL with calls that do not end: past `max_in_flight_per_rollout` it gets
  429s in its protocol's shape, and another rollout's call still gets through. Control: with no
  per-rollout share, the same flood fills `max_in_flight` and the other rollout's call is refused.
* a sandbox sends big request bodies: past `max_log_bytes_per_rollout` it gets a 413, recorded once
  without its body, the rollout untainted, and another rollout's call of the same size goes through.
  Control: under the default quota the same requests are all stored, growing the log by their size.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from openforgerl.engines.chat_format import ChatFormat
from openforgerl.engines.scripted import Faults, ScriptedEngine
from openforgerl.gateway.server import start_gateway
from openforgerl.orchestrator.classify import call_log_taint
from openforgerl.records import CallErrorKind
from openforgerl.store.sqlite import SQLiteCallStore

GLOBAL_CAP = 16
SHARE = 4
FLOOD = 24


@pytest.fixture(scope="module")
def fmt() -> ChatFormat:
    return ChatFormat.load()


def _chat(text: str = "hi") -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}]}


async def _post(http: aiohttp.ClientSession, ro: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {ro['api_key']}"}
    async with http.post(ro["openai_base_url"] + "/chat/completions", json=body, headers=headers) as r:
        return r.status, await r.json(content_type=None)


async def _flood_then_call(
    tmp_path: Path, fmt: ChatFormat, share: int | None
) -> tuple[list[int], tuple[int, Any], Any, str]:
    """Rollout A floods with calls the engine never answers; then rollout B makes one call.
    `share`: the per-rollout setting (None: the default); 0: no share at all (the control)."""
    faults = Faults()
    engine = ScriptedEngine(lambda t: "ok", fmt=fmt, faults=faults)
    store = SQLiteCallStore(tmp_path / f"calls-{share}.db")
    kw = {} if not share else {"max_in_flight_per_rollout": share}
    gw = await start_gateway(engine, store, max_in_flight=GLOBAL_CAP, pause_wait_s=0.1, **kw)
    if share == 0:
        gw.gateway.max_in_flight_per_rollout = FLOOD + 1  # the gateway as it was: one global limit
    faults.hang_before_headers = min(
        FLOOD, gw.gateway.max_in_flight_per_rollout, GLOBAL_CAP
    )  # all admitted hang
    try:
        a, b = await gw.open_rollout(task_id="flooder"), await gw.open_rollout(task_id="victim")
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
            flood = [asyncio.create_task(_post(http, a, _chat())) for _ in range(FLOOD)]
            refused: list[int] = []
            for _ in range(200):  # until every flood call is either hanging in the engine or refused
                await asyncio.sleep(0.02)
                refused = [t.result()[0] for t in flood if t.done()]
                if gw.gateway.gate.in_flight + len(refused) == FLOOD:
                    break
            victim = await _post(http, b, _chat())
            async with http.get(gw.admin_url + "/metrics", headers=gw.admin_headers()) as r:
                metrics = await r.text()
            refusal = next((t.result()[1] for t in flood if t.done()), None)
            for task in flood:  # the flooder goes away: its hanging calls are cancelled with it
                task.cancel()
            await asyncio.wait_for(asyncio.gather(*flood, return_exceptions=True), 10)
        info = await store.get_rollout(a["rollout_id"])
        assert info is not None and not info.infra_tainted
        return refused, victim, refusal, metrics
    finally:
        await gw.aclose()
        await store.aclose()


@pytest.mark.parametrize(
    ("share", "admitted"), [(SHARE, SHARE), (None, GLOBAL_CAP // 2)], ids=["set", "default"]
)
async def test_a_flooding_rollout_gets_429s_and_another_rollout_is_served(
    tmp_path: Path, fmt: ChatFormat, share: int | None, admitted: int
) -> None:
    refused, (status, body), refusal, metrics = await _flood_then_call(tmp_path, fmt, share)
    assert refused == [429] * (FLOOD - admitted)  # only its own share was admitted
    err = refusal["error"]
    assert err["code"] == "rollout_calls_in_flight" and err["type"] and err["message"]
    assert status == 200, body
    assert body["choices"][0]["message"]["content"] == "ok"
    assert (
        f'openforgerl_gateway_share_refusals_total{{reason="rollout_calls_in_flight"}} {FLOOD - admitted}'
        in metrics
    )


async def test_control_without_a_share_the_flood_takes_the_gateway(tmp_path: Path, fmt: ChatFormat) -> None:
    refused, (status, body), _, metrics = await _flood_then_call(tmp_path, fmt, share=0)
    assert refused == [503] * (FLOOD - GLOBAL_CAP)
    assert status == 503 and body["error"]["code"] == "overloaded"  # the victim pays for the flood
    assert "share_refusals_total{" not in metrics


def _log_bytes(db: Path, rollout_id: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(
            conn.execute(
                "SELECT coalesce(sum(length(body)), 0) FROM calls WHERE rollout_id = ?", (rollout_id,)
            ).fetchone()[0]
        )


BIG_BODY = 300_000  # bytes of text per request


async def _send_big(quota: int | None, tmp_path: Path, fmt: ChatFormat) -> dict[str, Any]:
    engine = ScriptedEngine(lambda t: "ok", fmt=fmt)
    db = tmp_path / f"calls-{quota}.db"
    store = SQLiteCallStore(db)
    kw = {} if quota is None else {"max_log_bytes_per_rollout": quota}
    gw = await start_gateway(engine, store, **kw)
    try:
        a, b = await gw.open_rollout(task_id="filler"), await gw.open_rollout(task_id="other")
        async with aiohttp.ClientSession() as http:
            statuses = []
            for i in range(4):
                status, body = await _post(http, a, _chat(f"{i}" + "x" * BIG_BODY))
                statuses.append((status, body))
            other = await _post(http, b, _chat("y" * BIG_BODY))
        calls = await store.list_calls(a["rollout_id"])
        info = await store.get_rollout(a["rollout_id"])
        return {
            "statuses": statuses,
            "other": other,
            "calls": calls,
            "info": info,
            "bytes": _log_bytes(db, a["rollout_id"]),
            "taint": call_log_taint(calls, info.model_dump()),
        }
    finally:
        await gw.aclose()
        await store.aclose()


async def test_a_rollout_past_its_log_quota_gets_a_compact_413(tmp_path: Path, fmt: ChatFormat) -> None:
    quota = 2 * BIG_BODY + 50_000  # a call's record is its body plus its prompt ids: one fits, not four
    got = await _send_big(quota, tmp_path, fmt)
    statuses = [s for s, _ in got["statuses"]]
    first = statuses.index(413)
    assert first >= 1 and statuses == [200] * first + [413] * (4 - first), statuses
    err = got["statuses"][first][1]["error"]
    assert err["code"] == "rollout_log_quota" and err["type"] == "invalid_request_error"
    assert got["other"][0] == 200  # another rollout's quota is its own
    # recorded once, without the body
    refused = [c for c in got["calls"] if c.error is not None]
    assert len(got["calls"]) == first + 1 and len(refused) == 1
    assert refused[0].error.kind is CallErrorKind.CLIENT_BAD_REQUEST and refused[0].error.status == 413
    assert refused[0].request == {} and refused[0].completion_token_ids == []
    # a call is admitted while its body fits: the log ends within the quota plus the last one's prompt ids
    last_ids = len(str(got["calls"][first - 1].prompt_token_ids))
    assert got["bytes"] <= quota + last_ids + 2_000, (got["bytes"], quota)
    assert got["taint"] is None and not got["info"].infra_tainted  # the agent's doing, never infra


async def test_control_under_the_default_quota_every_big_body_is_stored(
    tmp_path: Path, fmt: ChatFormat
) -> None:
    got = await _send_big(None, tmp_path, fmt)
    assert [s for s, _ in got["statuses"]] == [200] * 4
    assert got["bytes"] > 4 * BIG_BODY  # what the attack costs the host without a quota
