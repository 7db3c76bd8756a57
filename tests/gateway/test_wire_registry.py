"""The wire-protocol table: every `WireProtocol` has one registered adapter, served at its own path."""

from __future__ import annotations

from aiohttp import web

from openforgerl.gateway.errors import GatewayError, error_body
from openforgerl.gateway.protocols import adapter_for, adapters
from openforgerl.gateway.server import add_model_routes
from openforgerl.records import WireProtocol


def test_every_wire_protocol_has_one_adapter_and_one_route():
    assert sorted(a.wire for a in adapters()) == sorted(WireProtocol)
    app = web.Application()
    add_model_routes(app)
    posts = {
        r.resource.canonical for r in app.router.routes() if r.method == "POST" and r.resource is not None
    }
    for adapter in adapters():
        assert adapter_for(adapter.wire) is adapter
        assert "/r/{rollout_id}" + adapter.path in posts


def test_each_adapter_shapes_its_own_errors_and_the_admin_plane_keeps_openai_s():
    err = GatewayError(503, "busy")
    assert error_body(adapter_for(WireProtocol.ANTHROPIC), err) == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "busy"},
    }
    openai = {"error": {"message": "busy", "type": "server_error", "param": None, "code": None}}
    assert error_body(adapter_for(WireProtocol.CHAT), err) == openai
    assert error_body(adapter_for(WireProtocol.RESPONSES), err) == openai
    assert error_body(None, err) == openai
