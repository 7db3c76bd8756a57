"""Assembles the fake API server (aiohttp on 127.0.0.1) and gives tests a handle on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from openforgerl.testing.fake_kube.exec import ExecHandler
from openforgerl.testing.fake_kube.faults import Faults
from openforgerl.testing.fake_kube.kubelet import Kubelet
from openforgerl.testing.fake_kube.rest import VERSION, Rest, group_list, resource_list, status_errors
from openforgerl.testing.fake_kube.store import Store


def static(body: dict[str, Any]) -> Any:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(body)

    return handler


def discovery_routes(app: web.Application, api_versions: dict[str, Any]) -> None:
    for path, body in {
        "/version": VERSION,
        "/api": api_versions,
        "/apis": group_list(),
        "/api/v1": resource_list("", "v1"),
    }.items():
        app.router.add_get(path, static(body))
        app.router.add_get(path + "/", static(body))
    for group, version in {("apps", "v1"), ("networking.k8s.io", "v1")}:
        app.router.add_get(f"/apis/{group}/{version}", static(resource_list(group, version)))


def resource_routes(app: web.Application, rest: Rest, exec_handler: ExecHandler) -> None:
    r = app.router
    for prefix in ("/api/{version:v1}", "/apis/{group}/{version}"):
        coll = prefix + "/namespaces/{namespace}/{plural}"
        r.add_get(prefix + "/{plural}", rest.list_or_watch)
        r.add_get(coll, rest.list_or_watch)
        r.add_post(coll, rest.create)
        r.add_get(coll + "/{name}", rest.get)
        r.add_delete(coll + "/{name}", rest.delete)
    pod = "/api/v1/namespaces/{namespace}/pods/{name}"
    r.add_get(pod + "/log", rest.log)
    r.add_get(pod + "/exec", exec_handler.handle)
    r.add_post(pod + "/exec", exec_handler.handle)
    r.add_get("/__fault", rest.fault)
    r.add_post("/__fault", rest.fault)
    r.add_post("/__fault/namespaces/{namespace}/pods/{name}", rest.pod_fault)
    r.add_post("/__fault/reset-watches", rest.reset_watches)


class FakeKubeServer:
    """In-process fake API server; `async with FakeKubeServer() as srv: srv.url ...`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, root: Path | None = None) -> None:
        self.host, self.port = host, port
        self.store, self.faults = Store(), Faults()
        self.kubelet = Kubelet(self.store, self.faults, root)
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application(middlewares=[status_errors], client_max_size=256 * 1024 * 1024)
        versions = {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self.host}:{self.port}"}
            ],
        }
        discovery_routes(app, versions)
        rest = Rest(self.store, self.kubelet, self.faults)
        resource_routes(app, rest, ExecHandler(self.store, self.kubelet, self.faults))
        return app

    async def start(self) -> FakeKubeServer:
        self._runner = web.AppRunner(self.app(), handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def kubeconfig(self, namespace: str = "default") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [
                {"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}
            ],
        }

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        path.write_text(yaml.safe_dump(self.kubeconfig(namespace)))
        return path

    def reset_watches(self) -> int:
        """410 every open watch now (mid-stream) and compact the log; returns how many were open."""
        open_watches = len(self.store.subscriptions)
        self.store.compact()
        return open_watches

    def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.store.list("pods", namespace, lambda o: True)

    async def aclose(self) -> None:
        await self.kubelet.aclose()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeKubeServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
