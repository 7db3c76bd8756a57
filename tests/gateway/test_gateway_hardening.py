"""Whatever a client or a sandbox sends, the gateway answers 4xx in the plane's own shape.

Admin bodies are validated (strict pydantic: wrong types are 400, never 500); bodies nested deeper
than the record writer and reader can handle are refused before anything is recorded; unknown
`Content-Encoding` is 415 and a body that does not decode 400; slow headers and slow bodies are cut;
`pause` with a bad timeout is 400 and leaves the gateway running.
"""

from __future__ import annotations

import asyncio
import gzip
import time

import aiohttp
import orjson
import pytest

from openforgerl.gateway.calls import MAX_BODY_DEPTH


def _chat(content: object = "hi") -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": content}]}


def _nested(depth: int) -> object:
    value: object = "x"
    for _ in range(depth - 1):
        value = [value]
    return value


def _is_openai_error(body: dict) -> bool:
    return isinstance(body.get("error"), dict) and bool(body["error"].get("message"))


ADMIN_BAD = [
    ("/rollouts", {"task_id": 5}),
    ("/rollouts", {"metadata": []}),
    ("/rollouts", {"sample_index": "1"}),
    ("/rollouts", {"sample_index": -1}),
    ("/rollouts", {"budget_s": "nan"}),
    ("/rollouts", {"deadline_at": True}),
    ("/rollouts", {"rollout_id": "../x"}),
    ("/rollouts", {"reward": 1.0}),  # not a field of opening: nobody opens a rollout with a reward
    ("/rollouts", [1, 2]),
    ("/rollouts", b'{"metadata": {"a": ' + b"[" * 300 + b"]" * 300 + b"}}"),
    ("/rollouts", b'{"metadata": {"a": ' + b"[" * 150 + b"]" * 150 + b"}}"),  # stored, it would not read back
    ("/rollouts", b"{not json"),
]


@pytest.mark.parametrize(("path", "body"), ADMIN_BAD, ids=[f"{i}" for i in range(len(ADMIN_BAD))])
async def test_admin_bodies_with_wrong_types_are_400(make_gateway, path, body):
    setup = await make_gateway(lambda t: "ok")
    gw = setup.gateway
    async with aiohttp.ClientSession(headers=gw.admin_headers()) as http:
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        async with http.post(gw.admin_url + path, data=data) as r:
            assert r.status == 400, await r.text()
            assert _is_openai_error(await r.json())
    assert await setup.store.list_rollouts() == []


async def test_admin_reward_and_outcome_are_validated(make_gateway):
    setup = await make_gateway(lambda t: "ok")
    gw = setup.gateway
    ro = await setup.rollout()
    base = f"{gw.admin_url}/rollouts/{ro['rollout_id']}"
    bad = [
        ("reward", {"reward": "high"}),
        ("reward", {"components": {"a": "b"}}),
        ("reward", {"reward": True}),
        ("outcome", {"status": "won"}),
        ("outcome", {"status": "ok", "reward": "1"}),
        ("outcome", {"status": "ok", "in_batch": "yes"}),
        ("outcome", {}),
        ("outcome", b"{nope"),
    ]
    async with aiohttp.ClientSession(headers=gw.admin_headers()) as http:
        for route, body in bad:
            data = body if isinstance(body, bytes) else orjson.dumps(body)
            async with http.post(f"{base}/{route}", data=data) as r:
                assert r.status == 400, (route, body, await r.text())
                assert _is_openai_error(await r.json())
    record = await setup.store.get_rollout(ro["rollout_id"])
    assert record is not None and record.reward is None and record.status is None and not record.closed


async def test_outcome_is_written_under_the_lock_and_closes_the_rollout(make_gateway):
    setup = await make_gateway(lambda t: "ok")
    gw = setup.gateway
    ro = await setup.rollout()
    outcome = {
        "status": "ok",
        "reward": 0.5,
        "reward_components": {"tests": 0.5},
        "verifier_log": "2/4",
        "in_batch": True,
        "drop_reason": None,
        "finished_at": 1234.5,
    }
    async with aiohttp.ClientSession(headers=gw.admin_headers()) as http:
        async with http.post(f"{gw.admin_url}/rollouts/{ro['rollout_id']}/outcome", json=outcome) as r:
            assert r.status == 200, await r.text()
            answer = await r.json()
    assert answer["status"] == "ok" and answer["reward"] == 0.5 and answer["closed"] is True
    record = await setup.store.get_rollout(ro["rollout_id"])
    assert record is not None and record.reward_components == {"tests": 0.5} and record.finished_at == 1234.5
    in_batch = getattr(record, "in_batch", record.metadata.get("in_batch"))
    assert in_batch is True and record.verifier_log == "2/4"


async def test_outcome_cannot_clear_an_infra_taint(make_gateway):
    setup = await make_gateway(lambda t: "ok")
    gw = setup.gateway
    setup.engine.faults.http_errors = 1
    ro = await setup.rollout()
    headers = {"Authorization": f"Bearer {ro['api_key']}"}
    async with aiohttp.ClientSession() as http:
        async with http.post(ro["openai_base_url"] + "/chat/completions", json=_chat(), headers=headers) as r:
            assert r.status == 502
    async with aiohttp.ClientSession(headers=gw.admin_headers()) as http:
        async with http.post(
            f"{gw.admin_url}/rollouts/{ro['rollout_id']}/outcome",
            json={"status": "ok", "reward": 1.0, "in_batch": True},
        ) as r:
            answer = await r.json()
    assert answer["status"] == "infra_error:engine" and answer["infra_tainted"] is True
    assert answer.get("in_batch", answer["metadata"].get("in_batch")) is False


@pytest.mark.parametrize("query", ["nan", "abc", "-1", "inf", "1e999"])
async def test_pause_with_a_bad_timeout_is_400_and_changes_nothing(make_gateway, query):
    setup = await make_gateway(lambda t: "ok")
    gw = setup.gateway
    async with aiohttp.ClientSession(headers=gw.admin_headers()) as http:
        async with http.post(f"{gw.admin_url}/admin/pause?timeout={query}") as r:
            assert r.status == 400 and (await r.json())["error"]["param"] == "timeout"
        async with http.get(f"{gw.admin_url}/healthz") as r:
            assert (await r.json())["paused"] is False
        async with http.post(f"{gw.admin_url}/admin/pause?timeout=0.5") as r:
            assert r.status == 200 and (await r.json())["paused"] is True
    assert gw.gateway.gate.paused
    gw.resume()


async def test_deep_bodies_are_400_before_anything_is_recorded(make_gateway):
    setup = await make_gateway(lambda t: "ok")
    ro = await setup.rollout()
    headers = {"Authorization": f"Bearer {ro['api_key']}"}
    cases = [
        (ro["openai_base_url"] + "/chat/completions", "error"),
        (ro["openai_base_url"] + "/responses", "error"),
        (ro["anthropic_base_url"] + "/v1/messages", "type"),
    ]
    async with aiohttp.ClientSession() as http:
        for url, shape in cases:
            for depth in (MAX_BODY_DEPTH + 1, 300, 1100):
                body = {**_chat(), "input": "x", "max_tokens": 5, "metadata": {"deep": _nested(depth)}}
                data = (
                    orjson.dumps(body)
                    if depth < 250
                    else (
                        b'{"model":"m","max_tokens":5,"input":"x","messages":[{"role":"user","content":"hi"}],"x":'
                        + b"[" * depth
                        + b"]" * depth
                        + b"}"
                    )
                )
                async with http.post(url, data=data, headers=headers) as r:
                    assert r.status == 400, (url, depth, await r.text())
                    answer = await r.json()
                    assert (answer["type"] == "error") if shape == "type" else _is_openai_error(answer)
        ok = {**_chat(), "metadata": {"deep": _nested(MAX_BODY_DEPTH - 3)}}
        async with http.post(ro["openai_base_url"] + "/chat/completions", json=ok, headers=headers) as r:
            assert r.status == 200, await r.text()
    (rec,) = await setup.records(ro["rollout_id"])  # only the accepted one, and it reads back
    assert rec.error is None
    rollout = await setup.store.get_rollout(ro["rollout_id"])
    assert rollout is not None and not rollout.infra_tainted


async def test_content_encodings(make_gateway):
    setup = await make_gateway(lambda t: "ok")
    ro = await setup.rollout()
    url = ro["openai_base_url"] + "/chat/completions"
    auth = {"Authorization": f"Bearer {ro['api_key']}", "Content-Type": "application/json"}
    body = orjson.dumps(_chat())
    async with aiohttp.ClientSession() as http:
        async with http.post(
            url, data=gzip.compress(body), headers={**auth, "Content-Encoding": "gzip"}
        ) as r:
            assert r.status == 200, await r.text()
        for enc, data, status in [
            ("zstd-but-not", body, 415),
            ("compress", body, 415),
            ("gzip, br", body, 415),
            ("gzip", b"\x1f\x8b\x08garbage", 400),
            ("deflate", b"not deflate", 400),
        ]:
            async with http.post(url, data=data, headers={**auth, "Content-Encoding": enc}) as r:
                assert r.status == status, (enc, await r.text())
                assert _is_openai_error(await r.json())
        admin = setup.gateway
        async with http.post(
            admin.admin_url + "/rollouts",
            data=b"{}",
            headers={**admin.admin_headers(), "Content-Encoding": "snappy"},
        ) as r:
            assert r.status == 415 and _is_openai_error(await r.json())


async def _raw_exchange(port: int, chunks: list[bytes], pause_s: float, read_s: float) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        got = b""
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
            try:  # wait between chunks, but notice at once when the server answers or hangs up
                got = await asyncio.wait_for(reader.read(65536), pause_s)
                break
            except TimeoutError:
                continue
        try:
            return got + await asyncio.wait_for(reader.read(), read_s)
        except (ConnectionError, OSError):
            return got or b"<reset>"
    except (ConnectionError, OSError):
        return b"<reset>"
    finally:
        writer.close()


async def test_slow_headers_and_slow_bodies_are_cut(make_gateway):
    setup = await make_gateway(lambda t: "ok", header_timeout_s=1.0, body_timeout_s=1.0)
    gw = setup.gateway
    ro = await setup.rollout()
    path = f"/r/{ro['rollout_id']}/v1/chat/completions"
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ro['api_key']}\r\n".encode()
    t0 = time.monotonic()
    slow_headers = [head[i : i + 4] for i in range(0, len(head), 4)]  # never finishes the header block
    answers = await asyncio.gather(
        *(_raw_exchange(port, slow_headers, 0.2, 10) for port in (gw.port, gw.admin_port))
    )
    assert all(a in (b"", b"<reset>") for a in answers)  # connection closed, nothing served
    assert time.monotonic() - t0 < 8
    body = orjson.dumps(_chat())
    slow_body = [
        head + f"Content-Length: {len(body)}\r\nContent-Type: application/json\r\n\r\n".encode(),
        body[:5],
    ]
    answer = await _raw_exchange(gw.port, slow_body, 2.5, 10)  # then silence: the body never completes
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b'"error"' in answer
    assert await setup.records(ro["rollout_id"]) == []
