"""Two planes: admin routes are not on the model listener, and the admin listener needs its token."""

from __future__ import annotations

import aiohttp
import pytest

from openforgerl.orchestrator.gateway_client import GatewayAccess, GatewayClient, GatewayClientError

ADMIN_ROUTES = [
    ("POST", "/rollouts"),
    ("GET", "/rollouts/{rid}"),
    ("GET", "/rollouts/{rid}/calls"),
    ("POST", "/rollouts/{rid}/reward"),
    ("POST", "/rollouts/{rid}/outcome"),
    ("POST", "/rollouts/{rid}/close"),
    ("POST", "/admin/pause"),
    ("POST", "/admin/resume"),
    ("GET", "/metrics"),
]


async def test_admin_routes_do_not_exist_on_the_model_listener(make_gateway):
    setup = await make_gateway(lambda t: "ok")
    gw = setup.gateway
    ro = await setup.rollout()
    assert gw.port != gw.admin_port
    async with aiohttp.ClientSession() as http:
        for method, path in ADMIN_ROUTES:
            for auth in ({}, {"Authorization": f"Bearer {ro['api_key']}"}, gw.admin_headers()):
                url = gw.model_url + path.format(rid=ro["rollout_id"])
                async with http.request(method, url, json={"reward": 1.0}, headers=auth) as r:
                    assert r.status == 404, (method, path, await r.text())
                    assert (await r.json())["error"]["message"]
        async with http.get(gw.model_url + "/healthz") as r:
            assert r.status == 200 and "model_url" not in await r.json()
    record = await setup.store.get_rollout(ro["rollout_id"])
    assert record is not None and record.reward is None and not record.closed and not gw.gateway.gate.paused


@pytest.mark.parametrize(
    "auth", [None, "Bearer wrong", "Bearer ", "Basic x", "rollout-key", "admin-token-raw"]
)
async def test_the_admin_listener_needs_the_admin_token(make_gateway, auth):
    setup = await make_gateway(lambda t: "ok")
    gw = setup.gateway
    ro = await setup.rollout()
    header = {"rollout-key": f"Bearer {ro['api_key']}", "admin-token-raw": gw.admin_token}.get(
        auth or "", auth
    )
    headers = {"Authorization": header} if header else {}
    async with aiohttp.ClientSession() as http:
        for method, path in ADMIN_ROUTES:
            url = gw.admin_url + path.format(rid=ro["rollout_id"])
            async with http.request(method, url, json={"reward": 1.0}, headers=headers) as r:
                assert r.status == 401, (method, path)
                assert (await r.json())["error"]["code"] == "invalid_admin_token"
        async with http.get(gw.admin_url + "/healthz") as r:  # liveness needs no token
            assert r.status == 200 and (await r.json())["model_url"] == gw.model_url
    assert not gw.gateway.gate.paused and gw.gateway.gate.policy_version == 0
    record = await setup.store.get_rollout(ro["rollout_id"])
    assert record is not None and record.reward is None and not record.closed
    assert len(await setup.store.list_rollouts()) == 1


async def test_admin_client_uses_the_token_and_learns_the_model_address(make_gateway):
    setup = await make_gateway(lambda t: "ok")
    gw = setup.gateway
    async with GatewayClient(GatewayAccess(gw.admin_url, gw.admin_token)) as client:  # no model_url given
        assert await client.model_address() == ("127.0.0.1", gw.port)
        opened = await client.open_rollout(task_id="t", budget_s=30.0)
        assert opened.openai_base_url.startswith(gw.model_url + "/r/")
        assert (await client.pause(timeout_s=1.0))["paused"] is True
        assert await client.resume() == 1
        await client.close_rollout(opened.rollout_id)
    async with GatewayClient(GatewayAccess(gw.admin_url, "not-the-token"), attempts=1) as client:
        with pytest.raises(GatewayClientError, match="401"):
            await client.open_rollout(task_id="t")
    with pytest.raises(TypeError):
        GatewayClient(gw.admin_url)  # type: ignore[arg-type]
    assert "token" not in repr(gw.access) and gw.admin_token not in repr(gw)


async def test_a_rollout_key_authorises_only_its_own_rollout(make_gateway):
    setup = await make_gateway(lambda t: "ok")
    mine, other = await setup.rollout(), await setup.rollout()
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(
            other["openai_base_url"] + "/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {mine['api_key']}"},
        ) as r:
            assert r.status == 401
        async with http.post(
            other["anthropic_base_url"] + "/v1/messages",
            json={**body, "max_tokens": 5},
            headers={"x-api-key": mine["api_key"]},
        ) as r:
            assert r.status == 401 and (await r.json())["type"] == "error"
    assert await setup.records(other["rollout_id"]) == []


def test_cli_admin_token_comes_from_the_file_the_environment_or_is_generated_into_the_file(
    tmp_path, monkeypatch
):
    import stat

    from openforgerl.cli.gateway import admin_token
    from openforgerl.gateway.access import ADMIN_TOKEN_ENV

    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)
    path = tmp_path / "run" / "admin-token"
    made = admin_token(path)  # neither: generated, and saved for a separately started orchestrator
    assert len(made) >= 32 and path.read_text().strip() == made
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert admin_token(path) == made  # the file wins from now on
    monkeypatch.setenv(ADMIN_TOKEN_ENV, "from-env")
    assert admin_token(None) == "from-env" and admin_token(path) == made
    assert admin_token(tmp_path / "new") == "from-env" == (tmp_path / "new").read_text().strip()
    assert GatewayAccess.from_env("http://h:1/", token_file=path).admin_token == made


async def test_an_sdk_pointed_at_the_gateway_root_is_told_the_rollout_path(make_gateway):
    """The official SDK with base_url=<gateway>/v1 (no /r/<rollout>) gets a 404 that names the right path;
    the same call on the rollout's base URL is answered (control)."""
    import openai

    setup = await make_gateway(lambda t: "ok")
    gw = setup.gateway
    ro = await setup.rollout()
    wrong = openai.AsyncOpenAI(base_url=gw.model_url + "/v1", api_key=ro["api_key"], max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        await wrong.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    message = caught.value.body["message"] if isinstance(caught.value.body, dict) else str(caught.value)
    assert "/r/<rollout_id>/v1" in message and "openai_base_url" in message, message
    right = openai.AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0)
    answer = await right.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == "ok"
    async with aiohttp.ClientSession() as http:  # a model call sent to the admin listener
        url = gw.admin_url + f"/r/{ro['rollout_id']}/v1/chat/completions"
        async with http.post(url, json={}, headers=gw.admin_headers()) as r:
            assert r.status == 404 and "model listener" in (await r.json())["error"]["message"]
