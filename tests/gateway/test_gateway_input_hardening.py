"""Nothing a rollout sends can make an admin read fail or a 5xx: integers past 64 bits, a seed no
engine takes, and malformed assistant turns once verbatim history is in play.

The call log keeps a request's bytes as the agent sent them, so a `{"x": 2**70}` in any field is
stored exactly; the admin plane then returns it exactly (orjson cannot write it: the control). A
failing admin read would turn into a gateway fault in the orchestrator's taint step, so an agent
could make its failing rollout dropped and retried instead of scored 0.
"""

from __future__ import annotations

import json

import aiohttp
import orjson
import pytest

from openforgerl.orchestrator.classify import call_log_taint
from openforgerl.orchestrator.gateway_client import GatewayClient

BIG = 2**70  # orjson reads it as a float and refuses to write it back as an int


def _raw(body: dict) -> bytes:
    """JSON with `BIG` as the exact integer literal (orjson itself cannot write it)."""
    return orjson.dumps(body).replace(b'"__BIG__"', str(BIG).encode())


def _chat(**extra: object) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra}


BIG_PLACES = [
    ("chat unknown field", "/v1/chat/completions", _chat(extra_knob="__BIG__")),
    (
        "chat inside a message",
        "/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "hi", "n": "__BIG__"}]},
    ),
    ("chat deep in metadata", "/v1/chat/completions", _chat(metadata={"a": [{"b": "__BIG__"}]})),
    ("responses seed", "/v1/responses", {"model": "m", "input": "hi", "seed": "__BIG__"}),
    (
        "anthropic tool input",
        "/v1/messages",
        {
            "model": "m",
            "max_tokens": 64,
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"n": "__BIG__"}}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}],
                },
            ],
        },
    ),
]


@pytest.mark.parametrize(("name", "route", "body"), BIG_PLACES, ids=[p[0] for p in BIG_PLACES])
async def test_an_integer_past_64_bits_is_stored_exactly_and_every_admin_read_works(
    make_gateway, name, route, body
):
    setup = await make_gateway(lambda t: "ok")
    gw = setup.gateway
    ro = await setup.rollout()
    headers = {
        "Authorization": f"Bearer {ro['api_key']}",
        "x-api-key": ro["api_key"],
        "Content-Type": "application/json",
    }
    async with aiohttp.ClientSession() as http:
        async with http.post(ro["anthropic_base_url"] + route, data=_raw(body), headers=headers) as r:
            assert r.status == 200, await r.text()
        rid = ro["rollout_id"]
        for path in (f"/rollouts/{rid}/calls", f"/rollouts/{rid}"):
            async with http.get(gw.admin_url + path, headers=gw.admin_headers()) as r:
                assert r.status == 200, (path, await r.text())
                text = await r.text()
        async with http.get(gw.admin_url + f"/rollouts/{rid}/calls", headers=gw.admin_headers()) as r:
            listed = await r.json()  # stdlib json: exact integers
    assert str(BIG) in json.dumps(listed[0]["request"])  # as the agent sent it, not a float
    assert orjson.loads(text)["num_calls"] == 1  # the rollout summary answered too
    # the record holds the agent's integer exactly, and orjson alone could not write it (the control)
    record = (await setup.records(rid))[0]
    assert str(BIG) in str(record.request)
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(record.model_dump(mode="json"))
    # the orchestrator's own taint step reads it and finds nothing to blame on infra
    async with GatewayClient(gw.access) as client:
        calls = await client.list_calls(rid)
        info = await client.get_rollout(rid)
    assert calls[0].request == record.request
    assert call_log_taint(calls, info) is None


@pytest.mark.parametrize("stream", [False, True])
async def test_a_seed_past_64_bits_is_the_clients_400_before_any_engine(make_gateway, stream):
    """The engine would get it as a float (orjson's reading) and may take it apart its own way; torch's
    generator refuses it. Refused up-front, it is the agent's 400 on every engine, never infra."""
    setup = await make_gateway(lambda t: "ok")
    ro = await setup.rollout()
    headers = {"Authorization": f"Bearer {ro['api_key']}", "Content-Type": "application/json"}
    good, bad = _chat(seed=2**63 - 1, stream=stream), _chat(seed="__BIG__", stream=stream)
    async with aiohttp.ClientSession() as http:
        url = ro["openai_base_url"] + "/chat/completions"
        async with http.post(url, data=_raw(bad), headers=headers) as r:
            assert r.status == 400, await r.text()
            err = (await r.json())["error"]
            assert err["param"] == "seed" and "64-bit" in err["message"]
        async with http.post(url, data=_raw(good), headers=headers) as r:  # control: the largest seed goes
            assert r.status == 200, await r.text()
    records = await setup.records(ro["rollout_id"])
    assert len(records) == 1 and records[0].error is None  # the refused call left no record
    stored = await setup.store.get_rollout(ro["rollout_id"])
    assert stored is not None and not stored.infra_tainted


def _assistant(**fields: object) -> dict:
    return {"role": "assistant", "content": "ok", **fields}


MALFORMED_TURNS = [
    ("tool_calls a number", _assistant(tool_calls=5)),
    ("tool_calls a string", _assistant(tool_calls="call")),
    ("a tool call a number", _assistant(tool_calls=[7])),
    ("function an integer", _assistant(tool_calls=[{"id": "c1", "type": "function", "function": 7}])),
    ("function a list", _assistant(tool_calls=[{"id": "c1", "type": "function", "function": ["bash"]}])),
]


@pytest.mark.parametrize(("name", "turn"), MALFORMED_TURNS, ids=[m[0] for m in MALFORMED_TURNS])
async def test_a_malformed_echoed_turn_is_a_400_once_the_rollout_has_an_answer(make_gateway, name, turn):
    setup = await make_gateway(lambda t: "ok")
    ro = await setup.rollout()
    headers = {"Authorization": f"Bearer {ro['api_key']}"}
    history = [{"role": "user", "content": "hi"}]
    async with aiohttp.ClientSession() as http:
        url = ro["openai_base_url"] + "/chat/completions"
        async with http.post(url, json={"model": "m", "messages": history}, headers=headers) as r:
            assert r.status == 200  # the rollout's first answer: verbatim history now has its text
        # control: the same echo, well-formed, is recognised and answered
        ok_turn = {"model": "m", "messages": [*history, _assistant(), {"role": "user", "content": "more"}]}
        async with http.post(url, json=ok_turn, headers=headers) as r:
            assert r.status == 200, await r.text()
        bad = {"model": "m", "messages": [*history, turn, {"role": "user", "content": "more"}]}
        for stream in (False, True):
            async with http.post(url, json={**bad, "stream": stream}, headers=headers) as r:
                assert r.status == 400, await r.text()
                err = (await r.json())["error"]
                assert err["param"] == "tool_calls" and err["type"] == "invalid_request_error"
    records = await setup.records(ro["rollout_id"])
    assert [r.error for r in records] == [None, None]  # refused before anything reached the engine
