"""The gateway's two aiohttp apps, and `start_gateway` to run both in-process (tests, other stages).

Two planes, two listeners (docs/threat-model.md):
* the model listener serves `/r/{rollout_id}/...` (OpenAI base `/r/{id}/v1`, Anthropic base
  `/r/{id}`) and `/healthz`; a rollout's key authorises that rollout's model calls only. Admin
  paths do not exist here (404 in the protocol's shape). This is the one port a sandbox
  forwarder, or the Kubernetes sandbox NetworkPolicy, lets a rollout reach.
* the admin listener (its own port) serves `/rollouts...`, `/admin/pause|resume`, `/metrics`
  and `/healthz`, every route but `/healthz` behind `Authorization: Bearer <admin token>`.

The admin token is generated at start unless given (`start_gateway(admin_token=...)`;
`openforgerl gateway --admin-token-file F` or `$OPENFORGERL_ADMIN_TOKEN`). The process that starts
the gateway hands it to its own orchestrator, trainer or eval (`RunningGateway.access`); a user's
own orchestrator reads it from the same file or variable the gateway was given (or from the file
the CLI writes when it generated one) and sends it as a bearer token to the admin port only.
The token never enters a sandbox: the harness gets the model URL and its rollout key, nothing else.

Nothing a client sends can crash the server or turn into a 5xx: refusals are 4xx in the
protocol's own error shape, raised as `GatewayError` (unknown `Content-Encoding` 415, bodies that
do not decode 400, slow bodies 408; slow headers are cut by the keep-alive timer, which aiohttp
starts when the connection opens).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import orjson
from aiohttp import web

from openforgerl.engines.base import Engine
from openforgerl.gateway.access import GatewayAccess
from openforgerl.gateway.admin import add_admin_routes, admin_auth, healthz
from openforgerl.gateway.calls import GATEWAY_KEY, Gateway, api_key, read_json, serve_call
from openforgerl.gateway.errors import GatewayError, error_response
from openforgerl.gateway.flow import FlowGate
from openforgerl.gateway.images import ImagePolicy
from openforgerl.gateway.metrics import Metrics
from openforgerl.gateway.protocols import WireAdapter, adapter_for, adapters
from openforgerl.gateway.protocols.anthropic import AnthropicAdapter
from openforgerl.gateway.rollouts import RolloutRegistry, RolloutState
from openforgerl.records import WireProtocol
from openforgerl.store.base import CallStore


def _route_adapter(path: str) -> WireAdapter:
    """The protocol a model path speaks, for refusals made before its handler runs."""
    return adapter_for(WireProtocol.ANTHROPIC if "/messages" in path else WireProtocol.CHAT)


RolloutHandler = Callable[[web.Request, RolloutState], Awaitable[web.StreamResponse]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def rollout_auth(adapter: WireAdapter) -> Callable[[RolloutHandler], Handler]:
    """Route decorator: the route's rollout must be open and the caller hold its key; the handler gets
    the rollout's state, a refusal goes out in `adapter`'s error shape."""

    def wrap(handler: RolloutHandler) -> Handler:
        async def authorized(request: web.Request) -> web.StreamResponse:
            gw = request.app[GATEWAY_KEY]
            try:
                state = await gw.registry.authorize(request.match_info["rollout_id"], api_key(request))
            except GatewayError as err:
                return error_response(adapter, err)
            return await handler(request, state)

        return authorized

    return wrap


def _model_call(adapter: WireAdapter) -> Handler:
    return rollout_auth(adapter)(partial(serve_call, adapter))  # a partial: no extra coroutine per call


_CHAT = adapter_for(WireProtocol.CHAT)
_ANTHROPIC = cast(AnthropicAdapter, adapter_for(WireProtocol.ANTHROPIC))


@rollout_auth(_CHAT)
async def _models(request: web.Request, state: RolloutState) -> web.Response:
    names = await request.app[GATEWAY_KEY].engine.models()
    data = [
        {"id": n, "object": "model", "created": int(time.time()), "owned_by": "openforgerl"} for n in names
    ]
    return web.Response(body=orjson.dumps({"object": "list", "data": data}), content_type="application/json")


@rollout_auth(_ANTHROPIC)
async def _count_tokens(request: web.Request, state: RolloutState) -> web.Response:
    engine = request.app[GATEWAY_KEY].engine
    try:
        chat = _ANTHROPIC.count_body(await read_json(request))
        count = await _prompt_tokens(engine, chat)
    except GatewayError as err:
        return error_response(_ANTHROPIC, err)
    return web.Response(body=orjson.dumps({"input_tokens": count}), content_type="application/json")


async def _prompt_tokens(engine: Engine, chat_body: dict[str, Any]) -> int:
    """Prompt tokens for a chat body, asked of the engine when it can tokenize."""
    counter = getattr(engine, "count_tokens", None)
    if counter is None:
        raise GatewayError(404, "token counting is not supported by this engine")
    return int(await counter(chat_body))


async def _head_ok(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def _unknown(request: web.Request) -> web.Response:
    err = GatewayError(404, f"no route for {request.method} {request.path}")
    return error_response(_route_adapter(request.path), err)


def add_model_routes(app: web.Application) -> None:
    r = app.router
    for adapter in adapters():  # one route per registered wire protocol (protocols/)
        r.add_post("/r/{rollout_id}" + adapter.path, _model_call(adapter))
    r.add_post("/r/{rollout_id}/v1/messages/count_tokens", _count_tokens)
    r.add_get("/r/{rollout_id}/v1/models", _models)
    for path in ("/r/{rollout_id}", "/r/{rollout_id}/", "/r/{rollout_id}/v1", "/r/{rollout_id}/v1/"):
        r.add_route("HEAD", path, _head_ok)
    r.add_route("*", "/r/{rollout_id}/{tail:.*}", _unknown)


_ENCODINGS = frozenset({"", "identity", "gzip", "x-gzip", "deflate"})  # what aiohttp decodes
_log = logging.getLogger(__name__)


def _shape_of(request: web.Request, admin: bool) -> WireAdapter | None:
    """Who renders a refusal: the model route's protocol, or the admin plane's default (None)."""
    return None if admin else _route_adapter(request.path)


def _encoding_ok(request: web.Request) -> bool:
    return request.headers.get("Content-Encoding", "").strip().lower() in _ENCODINGS


def _not_found_hint(request: web.Request, admin: bool) -> str | None:
    """The right path for the common wrong ones: an SDK pointed at the gateway's root instead of a
    rollout's base URL, or a model call sent to the admin listener."""
    path = request.path
    if not admin and not path.startswith("/r/"):
        return (
            f"no route for {request.method} {path}: model calls go to /r/<rollout_id>/v1/... (OpenAI) or "
            "/r/<rollout_id>/v1/messages (Anthropic); use the openai_base_url or anthropic_base_url that "
            "POST /rollouts on the admin listener returned"
        )
    if admin and path.startswith("/r/"):
        return (
            f"no route for {request.method} {path}: model calls go "
            "to the model listener (--port), not the admin one"
        )
    return None


def _json_errors(admin: bool) -> Any:
    """Middleware: 415 for an unknown body encoding; aiohttp's own refusals (405, 413, 404...) and
    stray bugs as JSON bodies in the plane's shape. No traceback text ever reaches a client."""

    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        if not _encoding_ok(request):
            return error_response(
                _shape_of(request, admin), GatewayError(415, "unsupported Content-Encoding")
            )
        try:
            response: web.StreamResponse = await handler(request)
            return response
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            reason = _not_found_hint(request, admin) if exc.status == 404 else None
            return error_response(_shape_of(request, admin), GatewayError(exc.status, reason or exc.reason))
        except GatewayError as err:
            return error_response(_shape_of(request, admin), err)
        except Exception:
            _log.exception("gateway bug on %s %s", request.method, request.path)
            return error_response(_shape_of(request, admin), GatewayError(500, "internal gateway error"))

    return middleware


def build_model_app(gw: Gateway) -> web.Application:
    """The listener a sandbox reaches: model routes and liveness only."""
    app = web.Application(client_max_size=gw.max_body_bytes, middlewares=[_json_errors(admin=False)])
    app[GATEWAY_KEY] = gw
    add_model_routes(app)  # first: aiohttp matches dynamic routes in order, model calls are the hot path
    app.router.add_get("/healthz", healthz)
    return app


def build_admin_app(gw: Gateway) -> web.Application:
    """The admin listener: never exposed to a sandbox, every route but /healthz needs the token."""
    app = web.Application(
        client_max_size=gw.max_body_bytes, middlewares=[_json_errors(admin=True), admin_auth(gw.admin_token)]
    )
    app[GATEWAY_KEY] = gw
    add_admin_routes(app)
    return app


@dataclass
class RunningGateway:
    """A gateway serving in this event loop: `model_url` (give it to harnesses, via rollouts'
    base URLs) and `admin_url` + `admin_token` (keep them to the orchestrator: `access`)."""

    model_url: str
    admin_url: str
    admin_token: str
    port: int
    admin_port: int
    gateway: Gateway
    runners: tuple[web.AppRunner, ...]
    owns_engine: bool = False

    def __repr__(self) -> str:
        return f"RunningGateway(model_url={self.model_url!r}, admin_url={self.admin_url!r})"

    @property
    def access(self) -> GatewayAccess:
        """What an admin client (`orchestrator.gateway_client.GatewayClient`) needs."""
        return GatewayAccess(self.admin_url, self.admin_token, self.model_url)

    def admin_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_token}"}

    async def pause(self, drain_timeout_s: float | None = None) -> bool:
        return await self.gateway.gate.pause(drain_timeout_s)

    def resume(self) -> int:
        return self.gateway.gate.resume()

    async def open_rollout(self, *, deadline_at: float | None = None, **spec: Any) -> dict[str, str]:
        """Open a rollout directly (same answer as `POST /rollouts`)."""
        record, key = await self.gateway.registry.open(spec, deadline_at=deadline_at)
        root = f"{self.model_url}/r/{record.rollout_id}"
        return {
            "rollout_id": record.rollout_id,
            "api_key": key,
            "openai_base_url": f"{root}/v1",
            "anthropic_base_url": root,
        }

    async def aclose(self) -> None:
        for runner in self.runners:
            await runner.cleanup()
        if self.owns_engine:
            await self.gateway.engine.aclose()


async def _serve(
    app: web.Application, host: str, port: int, shutdown_timeout_s: float, header_timeout_s: float
) -> tuple[web.AppRunner, int]:
    # keepalive_timeout doubles as the header timeout: aiohttp arms it when a connection opens and
    # closes the connection when it fires while no complete request has arrived (a slow-loris).
    # handler_cancellation: a client that disconnects cancels its call, and with it the engine request.
    # lingering_time: how long an unread body is drained after a refusal (aiohttp: 10 s) before closing.
    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        shutdown_timeout=shutdown_timeout_s,
        keepalive_timeout=header_timeout_s,
        handler_cancellation=True,
        lingering_time=2.0,
        auto_decompress=False,
    )  # calls.read_raw decodes, in the protocol's error shape
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=4096)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


async def start_gateway(
    engine: Engine,
    store: CallStore,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    admin_host: str | None = None,
    admin_port: int = 0,
    admin_token: str | None = None,
    call_deadline_s: float = 600.0,
    pause_wait_s: float = 30.0,
    max_in_flight: int = 4096,
    secret: str | None = None,
    policy_version: int = 0,
    max_body_bytes: int = 64 * 1024 * 1024,
    owns_engine: bool = False,
    shutdown_timeout_s: float = 5.0,
    header_timeout_s: float = 30.0,
    body_timeout_s: float = 60.0,
    deadline_margin_s: float = 2.0,
    public_model_url: str | None = None,
    images: ImagePolicy | None = None,
    verbatim_history: bool = True,
    max_in_flight_per_rollout: int = 64,
    max_log_bytes_per_rollout: int = 512 * 1024 * 1024,
) -> RunningGateway:
    """Serve a gateway for `engine`, recording into `store`, in the running event loop: the model
    listener on `host:port`, the admin listener on `admin_host:admin_port` (default: same host,
    any free port), guarded by `admin_token` (generated when not given). `images`: which prompt
    images are accepted (default: data URLs up to 20 MiB / 40 M pixels, no http URLs).
    `verbatim_history`: echoed assistant turns reach the engine as the model sampled them (verbatim.py).
    `max_in_flight_per_rollout` / `max_log_bytes_per_rollout`: one rollout's share of the gateway
    (`calls.serve_call`): past it that rollout gets a 429 / a 413, and no other rollout notices. The
    calls share is at most half of `max_in_flight`, so no one rollout can hold the whole gateway."""
    token = admin_token or secrets.token_urlsafe(32)
    gw = Gateway(
        engine,
        store,
        RolloutRegistry(store, secret, deadline_margin_s=deadline_margin_s),
        FlowGate(policy_version=policy_version, pause_wait_s=pause_wait_s, max_in_flight=max_in_flight),
        Metrics(),
        call_deadline_s,
        max_body_bytes,
        admin_token=token,
        body_timeout_s=body_timeout_s,
        deadline_margin_s=deadline_margin_s,
        images=images or ImagePolicy(),
        verbatim_history=verbatim_history,
        max_in_flight_per_rollout=rollout_share(max_in_flight_per_rollout, max_in_flight),
        max_log_bytes_per_rollout=max_log_bytes_per_rollout,
    )
    gw.registry.follow_store()  # closes and taints stored by other replicas of a shared log
    await gw.gate.follow_store(store)  # and their pause/resume and policy version
    model_runner, bound = await _serve(build_model_app(gw), host, port, shutdown_timeout_s, header_timeout_s)
    admin_runner, admin_bound = await _serve(
        build_admin_app(gw), admin_host or host, admin_port, shutdown_timeout_s, header_timeout_s
    )
    gw.model_url = public_model_url or f"http://{_reachable(host)}:{bound}"
    admin_url = f"http://{_reachable(admin_host or host)}:{admin_bound}"
    return RunningGateway(
        gw.model_url, admin_url, token, bound, admin_bound, gw, (model_runner, admin_runner), owns_engine
    )


def rollout_share(per_rollout: int, max_in_flight: int) -> int:
    """One rollout's calls in flight: as configured, but at most half the gateway's. A gateway of one
    call cannot be shared: its own limit (503) is the only one."""
    share = min(per_rollout, max_in_flight // 2)
    return share if share >= 1 else max_in_flight + 1


def _reachable(host: str) -> str:
    """A bind address as clients dial it (a wildcard bind is reached on loopback here)."""
    return {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}.get(host, host)
