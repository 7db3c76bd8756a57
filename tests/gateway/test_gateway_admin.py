"""The admin API over real HTTP: open, inspect, reward, close, pause/resume, health, metrics."""

from __future__ import annotations

import aiohttp
from openai import AsyncOpenAI, PermissionDeniedError


async def test_rollout_lifecycle(make_gateway):
    tasks_seen: list[str | None] = []  # the engine is told the task each call's rollout plays
    setup = await make_gateway(lambda t: tasks_seen.append(t.task_id) or "hello")
    url, model = setup.gateway.admin_url, setup.gateway.model_url
    async with aiohttp.ClientSession(headers=setup.gateway.admin_headers()) as http:
        async with http.post(
            f"{url}/rollouts", json={"task_id": "t9", "harness": "codex", "group_id": "g"}
        ) as r:
            assert r.status == 200
            ro = await r.json()
        assert ro["openai_base_url"] == f"{model}/r/{ro['rollout_id']}/v1"  # the model plane, never admin
        assert ro["anthropic_base_url"] == f"{model}/r/{ro['rollout_id']}"
        c = AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0)
        await c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])

        async with http.get(f"{url}/rollouts/{ro['rollout_id']}") as r:
            info = await r.json()
        assert info["task_id"] == "t9" and info["num_calls"] == 1 and info["infra_tainted"] is False
        assert tasks_seen == ["t9"]
        async with http.get(f"{url}/rollouts/{ro['rollout_id']}/calls") as r:
            calls = await r.json()
        assert len(calls) == 1 and calls[0]["completion_token_ids"] == setup.engine.produced[0].ids
        async with http.post(
            f"{url}/rollouts/{ro['rollout_id']}/reward", json={"reward": 1, "components": {"tests": 1.0}}
        ) as r:
            assert r.status == 200
        async with http.post(f"{url}/rollouts/{ro['rollout_id']}/reward", json={"reward": "high"}) as r:
            assert r.status == 400 and (await r.json())["error"]["param"] == "reward"
        async with http.post(f"{url}/rollouts/{ro['rollout_id']}/close") as r:
            assert (await r.json())["closed"] is True
        stored = await setup.store.get_rollout(ro["rollout_id"])
        assert stored is not None and stored.reward == 1.0 and stored.reward_components == {"tests": 1.0}
        try:
            await c.chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])
            raise AssertionError("closed rollout accepted a call")
        except PermissionDeniedError as exc:
            assert exc.status_code == 403 and "closed" in exc.message
        async with http.get(f"{url}/rollouts/nope") as r:
            assert r.status == 404 and "error" in await r.json()


async def test_pause_resume_health_metrics(make_gateway):
    setup = await make_gateway(lambda t: "hello")
    url = setup.gateway.admin_url
    async with aiohttp.ClientSession(headers=setup.gateway.admin_headers()) as http:
        async with http.post(f"{url}/admin/pause") as r:
            assert (await r.json())["paused"] is True
        async with http.get(f"{url}/healthz") as r:
            assert (await r.json())["paused"] is True
        async with http.post(f"{url}/admin/resume") as r:
            assert await r.json() == {"policy_version": 1}
        ro = await setup.rollout()
        c = AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0)
        await c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        async with http.get(f"{url}/metrics") as r:
            text = await r.text()
        assert 'openforgerl_gateway_calls_total{protocol="chat_completions",outcome="ok"} 1' in text
        assert "openforgerl_gateway_policy_version 1" in text
