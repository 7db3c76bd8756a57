"""Bad input never gets a 5xx or kills the server: 4xx in the protocol's own error shape."""

from __future__ import annotations

import aiohttp
import orjson
import pytest


def _good() -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


CASES = [
    ("invalid json", b"{not json", 400),
    ("array body", b"[1, 2]", 400),
    ("messages not a list", orjson.dumps({"model": "m", "messages": "hi"}), 400),
    ("empty messages", orjson.dumps({"model": "m", "messages": []}), 400),
    ("message not an object", orjson.dumps({"model": "m", "messages": ["hi"]}), 400),
    ("message without role", orjson.dumps({"model": "m", "messages": [{"content": "x"}]}), 400),
    ("content a number", orjson.dumps({"model": "m", "messages": [{"role": "user", "content": 3}]}), 400),
    ("max_tokens a string", orjson.dumps({**_good(), "max_tokens": "10"}), 400),
    ("max_tokens negative", orjson.dumps({**_good(), "max_tokens": -1}), 400),
    ("stream a string", orjson.dumps({**_good(), "stream": "yes"}), 400),
    ("tools not a list", orjson.dumps({**_good(), "tools": {"a": 1}}), 400),
    ("temperature a string", orjson.dumps({**_good(), "temperature": "hot"}), 400),
    ("n > 1", orjson.dumps({**_good(), "n": 2}), 400),
    ("huge body", b'{"x": "' + b"a" * (2 * 1024 * 1024) + b'"}', 413),
]


@pytest.mark.parametrize(("name", "body", "status"), CASES, ids=[c[0] for c in CASES])
async def test_chat_bad_bodies(make_gateway, name, body, status):
    setup = await make_gateway(lambda t: "ok", max_body_bytes=1024 * 1024)
    ro = await setup.rollout()
    headers = {"Authorization": f"Bearer {ro['api_key']}", "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as http:
        async with http.post(ro["openai_base_url"] + "/chat/completions", data=body, headers=headers) as r:
            assert r.status == status, await r.text()
            err = (await r.json())["error"]
            assert set(err) == {"message", "type", "param", "code"} and err["message"]
        async with http.post(ro["openai_base_url"] + "/chat/completions", json=_good(), headers=headers) as r:
            assert r.status == 200  # the server is still fine
    assert setup.engine.produced and len(setup.engine.produced) == 1


async def test_auth_and_routing_errors(make_gateway):
    setup = await make_gateway(lambda t: "ok")
    ro = await setup.rollout()
    other = await setup.rollout()
    base = ro["openai_base_url"]
    root = setup.gateway.model_url
    checks = [
        ("POST", f"{root}/r/unknown/v1/chat/completions", {"Authorization": "Bearer x"}, 404, "openai"),
        ("POST", f"{base}/chat/completions", {}, 401, "openai"),
        ("POST", f"{base}/chat/completions", {"Authorization": f"Bearer {other['api_key']}"}, 401, "openai"),
        ("POST", f"{base}/chat/completions", {"x-api-key": "wrong"}, 401, "openai"),
        ("GET", f"{base}/chat/completions", {"Authorization": f"Bearer {ro['api_key']}"}, 404, "openai"),
        ("POST", f"{base}/nothing/here", {"Authorization": f"Bearer {ro['api_key']}"}, 404, "openai"),
        ("POST", f"{root}/r/unknown/v1/messages", {"x-api-key": "x"}, 404, "anthropic"),
        ("POST", f"{ro['anthropic_base_url']}/v1/messages", {"x-api-key": "wrong"}, 401, "anthropic"),
    ]
    async with aiohttp.ClientSession() as http:
        for method, url, headers, status, shape in checks:
            async with http.request(method, url, json=_good(), headers=headers) as r:
                assert r.status == status, (method, url, await r.text())
                body = await r.json()
                if shape == "anthropic":
                    assert body["type"] == "error" and body["error"]["type"] and body["error"]["message"]
                else:
                    assert body["error"]["message"] and body["error"]["type"]
        async with http.head(ro["anthropic_base_url"]) as r:
            assert r.status == 200
        async with http.post(
            f"{base}/chat/completions", json=_good(), headers={"x-api-key": ro["api_key"]}
        ) as r:
            assert r.status == 200  # x-api-key works as well as Bearer
