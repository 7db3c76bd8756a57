"""The gateway's aiohttp app, and `start_gateway` to run one in-process (tests, other stages).

Model routes live under `/r/{rollout_id}` (OpenAI base `/r/{id}/v1`, Anthropic base `/r/{id}`);
the admin API sits beside them (admin.py). Nothing a client sends can crash the server or turn
into a 5xx: refusals are 4xx in the protocol's own error shape, raised as `GatewayError`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from openforgerl.engines.base import Engine
from openforgerl.gateway import adapters
from openforgerl.gateway.admin import GATEWAY_KEY, add_admin_routes
from openforgerl.gateway.calls import Gateway, ProtocolAdapter, read_json, serve_call
from openforgerl.gateway.errors import GatewayError, error_response
from openforgerl.gateway.flow import FlowGate
from openforgerl.gateway.metrics import Metrics
from openforgerl.gateway.rollouts import RolloutRegistry
from openforgerl.records import WireProtocol
from openforgerl.store.base import CallStore


def _route_protocol(path: str) -> WireProtocol:
    return WireProtocol.ANTHROPIC if "/messages" in path else WireProtocol.CHAT


def _model_route(pick: Any) -> Any:
    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            adapter: ProtocolAdapter = pick()
        except GatewayError as err:
            return error_response(_route_protocol(request.path), err)
        return await serve_call(request.app[GATEWAY_KEY], request, adapter)
    return handler


async def _models(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY_KEY]
    try:
        await gw.registry.authorize(request.match_info["rollout_id"], _key(request))
    except GatewayError as err:
        return error_response(WireProtocol.CHAT, err)
    names = await gw.engine.models()
    data = [{"id": n, "object": "model", "created": int(time.time()), "owned_by": "openforgerl"} for n in names]
    return web.Response(body=orjson.dumps({"object": "list", "data": data}), content_type="application/json")


def _key(request: web.Request) -> str | None:
    from openforgerl.gateway.calls import api_key

    return api_key(request)


async def _count_tokens(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY_KEY]
    try:
        await gw.registry.authorize(request.match_info["rollout_id"], _key(request))
        body = await read_json(request)
        chat = adapters.anthropic_count_body(body)
        count = await adapters.count_tokens(gw.engine, chat)
    except GatewayError as err:
        return error_response(WireProtocol.ANTHROPIC, err)
    return web.Response(body=orjson.dumps({"input_tokens": count}), content_type="application/json")


async def _head_ok(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def _unknown(request: web.Request) -> web.Response:
    err = GatewayError(404, f"no route for {request.method} {request.path}")
    return error_response(_route_protocol(request.path), err)


def add_model_routes(app: web.Application) -> None:
    r = app.router
    r.add_post("/r/{rollout_id}/v1/chat/completions", _model_route(adapters.chat_adapter))
    r.add_post("/r/{rollout_id}/v1/responses", _model_route(adapters.responses_adapter))
    r.add_post("/r/{rollout_id}/v1/messages", _model_route(adapters.anthropic_adapter))
    r.add_post("/r/{rollout_id}/v1/messages/count_tokens", _count_tokens)
    r.add_get("/r/{rollout_id}/v1/models", _models)
    for path in ("/r/{rollout_id}", "/r/{rollout_id}/", "/r/{rollout_id}/v1", "/r/{rollout_id}/v1/"):
        r.add_route("HEAD", path, _head_ok)
    r.add_route("*", "/r/{rollout_id}/{tail:.*}", _unknown)


@web.middleware
async def _json_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """Turn aiohttp's own refusals (405, 413, ...) and stray bugs into JSON bodies."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(_route_protocol(request.path), GatewayError(exc.status, exc.reason))
    except GatewayError as err:
        return error_response(_route_protocol(request.path), err)


def build_app(gw: Gateway) -> web.Application:
    app = web.Application(client_max_size=gw.max_body_bytes, middlewares=[_json_errors])
    app[GATEWAY_KEY] = gw
    add_model_routes(app)  # first: aiohttp matches dynamic routes in order, model calls are the hot path
    add_admin_routes(app)
    return app


@dataclass
class RunningGateway:
    """A gateway serving in this event loop; `url` is its root (admin API at `url`/rollouts)."""

    url: str
    port: int
    gateway: Gateway
    runner: web.AppRunner
    owns_engine: bool = False

    async def pause(self, drain_timeout_s: float | None = None) -> bool:
        return await self.gateway.gate.pause(drain_timeout_s)

    def resume(self) -> int:
        return self.gateway.gate.resume()

    async def open_rollout(self, **spec: Any) -> dict[str, str]:
        """Open a rollout directly (same answer as `POST /rollouts`)."""
        record, key = await self.gateway.registry.open(spec)
        root = f"{self.url}/r/{record.rollout_id}"
        return {"rollout_id": record.rollout_id, "api_key": key, "openai_base_url": f"{root}/v1",
                "anthropic_base_url": root}

    async def aclose(self) -> None:
        await self.runner.cleanup()
        if self.owns_engine:
            await self.gateway.engine.aclose()


async def start_gateway(engine: Engine, store: CallStore, *, host: str = "127.0.0.1", port: int = 0,
                        call_deadline_s: float = 600.0, pause_wait_s: float = 30.0,
                        max_in_flight: int = 4096, secret: str | None = None, policy_version: int = 0,
                        max_body_bytes: int = 64 * 1024 * 1024, owns_engine: bool = False,
                        shutdown_timeout_s: float = 5.0) -> RunningGateway:
    """Serve a gateway for `engine`, recording into `store`, in the running event loop."""
    gw = Gateway(engine, store, RolloutRegistry(store, secret),
                 FlowGate(policy_version=policy_version, pause_wait_s=pause_wait_s, max_in_flight=max_in_flight),
                 Metrics(), call_deadline_s, max_body_bytes)
    runner = web.AppRunner(build_app(gw), access_log=None, handle_signals=False,
                           shutdown_timeout=shutdown_timeout_s)
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=4096)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return RunningGateway(f"http://{host}:{bound}", bound, gw, runner, owns_engine)
