"""The admin API (same port as the model routes): rollouts, rewards, pause/resume, health, metrics.

See DESIGN.md "Gateway admin API". Bodies are JSON; refusals use the OpenAI error shape.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from openforgerl.gateway.calls import Gateway, read_json
from openforgerl.gateway.errors import GatewayError, error_response

GATEWAY_KEY = web.AppKey("gateway", Gateway)


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def _gw(request: web.Request) -> Gateway:
    return request.app[GATEWAY_KEY]


def base_urls(request: web.Request, rollout_id: str) -> dict[str, str]:
    root = f"{request.scheme}://{request.host}/r/{rollout_id}"
    return {"openai_base_url": f"{root}/v1", "anthropic_base_url": root}


async def open_rollout(request: web.Request) -> web.Response:
    gw = _gw(request)
    spec = await read_json(request) if request.can_read_body else {}
    record, key = await gw.registry.open(spec)
    gw.metrics.rollouts_opened += 1
    return _json({"rollout_id": record.rollout_id, "api_key": key, **base_urls(request, record.rollout_id)})


async def get_rollout(request: web.Request) -> web.Response:
    gw = _gw(request)
    rid = request.match_info["rollout_id"]
    await gw.registry.state(rid)
    record = await gw.store.get_rollout(rid)
    calls = await gw.store.list_calls(rid)
    summary = record.model_dump(mode="json") if record else {}
    summary.update(num_calls=len(calls), num_errors=sum(c.error is not None for c in calls),
                   completion_tokens=sum(len(c.completion_token_ids) for c in calls))
    return _json(summary)


async def list_calls(request: web.Request) -> web.Response:
    gw = _gw(request)
    rid = request.match_info["rollout_id"]
    await gw.registry.state(rid)
    calls = await gw.store.list_calls(rid)
    return _json([c.model_dump(mode="json") for c in calls])


def _reward_fields(body: dict[str, Any]) -> dict[str, Any]:
    reward, comps = body.get("reward"), body.get("components") or {}
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, int | float)):
        raise GatewayError(400, "'reward' must be a number", param="reward")
    if not isinstance(comps, dict) or not all(isinstance(v, int | float) for v in comps.values()):
        raise GatewayError(400, "'components' must map names to numbers", param="components")
    fields: dict[str, Any] = {"reward": None if reward is None else float(reward),
                              "reward_components": {k: float(v) for k, v in comps.items()}}
    if isinstance(body.get("verifier_log"), str):
        fields["verifier_log"] = body["verifier_log"]
    return fields


async def set_reward(request: web.Request) -> web.Response:
    gw = _gw(request)
    fields = _reward_fields(await read_json(request))
    record = await gw.registry.update(request.match_info["rollout_id"], **fields)
    return _json(record.model_dump(mode="json"))


async def close_rollout(request: web.Request) -> web.Response:
    record = await _gw(request).registry.close(request.match_info["rollout_id"])
    return _json(record.model_dump(mode="json"))


async def pause(request: web.Request) -> web.Response:
    gw = _gw(request)
    timeout = request.query.get("timeout")
    drained = await gw.gate.pause(float(timeout) if timeout else None)
    return _json({"paused": True, "drained": drained, "in_flight": gw.gate.in_flight,
                  "policy_version": gw.gate.policy_version})


async def resume(request: web.Request) -> web.Response:
    return _json({"policy_version": _gw(request).gate.resume()})


async def healthz(request: web.Request) -> web.Response:
    gate = _gw(request).gate
    return _json({"ok": True, "paused": gate.paused, "in_flight": gate.in_flight,
                  "policy_version": gate.policy_version})


async def metrics(request: web.Request) -> web.Response:
    gw = _gw(request)
    return web.Response(text=gw.metrics.render(gw.gate), content_type="text/plain", charset="utf-8")


def _guarded(handler: Any) -> Any:
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except GatewayError as err:
            return error_response(None, err)
    return wrapped


def add_admin_routes(app: web.Application) -> None:
    r = app.router
    r.add_post("/rollouts", _guarded(open_rollout))
    r.add_get("/rollouts/{rollout_id}", _guarded(get_rollout))
    r.add_get("/rollouts/{rollout_id}/calls", _guarded(list_calls))
    r.add_post("/rollouts/{rollout_id}/reward", _guarded(set_reward))
    r.add_post("/rollouts/{rollout_id}/close", _guarded(close_rollout))
    r.add_post("/admin/pause", _guarded(pause))
    r.add_post("/admin/resume", _guarded(resume))
    r.add_get("/healthz", healthz)
    r.add_get("/metrics", metrics)
