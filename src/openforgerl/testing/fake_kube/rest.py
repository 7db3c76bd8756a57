"""REST handlers of the fake API server: discovery, CRUD on a few kinds, pod logs, fault control.

Paths and shapes follow the real API: `/api/v1/namespaces/{ns}/pods`, `/apis/apps/v1/...`, list
objects carry `metadata.resourceVersion`, errors are `Status` objects with the HTTP code. Trailing
slashes on discovery paths are accepted (some clients send them).
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import asdict
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from openforgerl.testing.fake_kube.faults import Faults
from openforgerl.testing.fake_kube.kubelet import Kubelet
from openforgerl.testing.fake_kube.store import ApiStatus, Obj, Store, parse_field_selector, parse_selector
from openforgerl.testing.fake_kube.watch import WatchStream, is_watch

VERSION = {
    "major": "1",
    "minor": "37",
    "gitVersion": "v1.37.0-fake",
    "gitCommit": "fake",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25",
    "compiler": "gc",
    "platform": "linux/amd64",
}
# (group, version, plural) -> (kind, namespaced verbs)
RESOURCES: dict[tuple[str, str, str], str] = {
    ("", "v1", "pods"): "Pod",
    ("", "v1", "services"): "Service",
    ("apps", "v1", "deployments"): "Deployment",
    ("networking.k8s.io", "v1", "networkpolicies"): "NetworkPolicy",
}
SUBRESOURCES = {"pods": ("exec", "log", "status")}
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
VERBS = ["create", "delete", "get", "list", "watch"]


def api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def resource_list(group: str, version: str) -> Obj:
    out = []
    for (g, v, plural), kind in RESOURCES.items():
        if (g, v) == (group, version):
            out.append(
                {
                    "name": plural,
                    "singularName": kind.lower(),
                    "namespaced": True,
                    "kind": kind,
                    "verbs": VERBS,
                }
            )
            out += [
                {
                    "name": f"{plural}/{sub}",
                    "singularName": "",
                    "namespaced": True,
                    "kind": kind,
                    "verbs": ["create", "get"],
                }
                for sub in SUBRESOURCES.get(plural, ())
            ]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": api_version(group, version),
        "resources": out,
    }


def group_list() -> Obj:
    groups = sorted({(g, v) for g, v, _ in RESOURCES if g})
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {
                "name": g,
                "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v},
            }
            for g, v in groups
        ],
    }


def error_response(e: ApiStatus) -> web.Response:
    headers = {"Retry-After": "1"} if e.code == 429 else None
    return web.json_response(e.body(), status=e.code, headers=headers)


@web.middleware
async def status_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every `ApiStatus` raised by a handler becomes a `Status` body with its HTTP code."""
    try:
        return await handler(request)
    except ApiStatus as e:
        return error_response(e)


def check_object(kind: str, obj: Obj, namespace: str) -> None:
    """The few server-side validations clients rely on (the rest is kubernetes-validate's job)."""
    if obj.get("kind") != kind:
        raise ApiStatus(400, "BadRequest", f"expected kind {kind}, got {obj.get('kind')!r}")
    meta = obj.get("metadata") or {}
    if meta.get("namespace") not in (None, namespace):
        raise ApiStatus(400, "BadRequest", "the namespace of the object does not match the request")
    if not DNS_LABEL.match(meta.get("name", "")):
        raise ApiStatus(422, "Invalid", f"metadata.name {meta.get('name')!r}: Invalid value (DNS-1123)")
    if kind == "Pod" and not (obj.get("spec") or {}).get("containers"):
        raise ApiStatus(422, "Invalid", "spec.containers: Required value")


class Rest:
    def __init__(self, store: Store, kubelet: Kubelet, faults: Faults) -> None:
        self.store, self.kubelet, self.faults = store, kubelet, faults

    def _resource(self, request: web.Request) -> tuple[str, str, str]:
        info = request.match_info
        key = (info.get("group", ""), info.get("version", "v1"), info["plural"])
        if key not in RESOURCES:
            raise ApiStatus(404, "NotFound", f"the server could not find the requested resource {key}")
        return key

    async def list_or_watch(self, request: web.Request) -> web.StreamResponse:
        group, version, plural = self._resource(request)
        ns = request.match_info.get("namespace")
        labels = parse_selector(request.query.get("labelSelector"))
        fields = parse_field_selector(request.query.get("fieldSelector"))

        def matches(o: Obj) -> bool:
            return labels(o["metadata"].get("labels") or {}) and fields(o)

        kind = RESOURCES[(group, version, plural)]
        if is_watch(request):
            stream = WatchStream(self.store, self.faults, kind, api_version(group, version))
            return await stream.serve(request, plural, ns, matches)
        items = self.store.list(plural, ns, matches)
        return web.json_response(
            {
                "kind": f"{kind}List",
                "apiVersion": api_version(group, version),
                "metadata": {"resourceVersion": str(self.store.rv)},
                "items": items,
            }
        )

    async def create(self, request: web.Request) -> web.Response:
        group, version, plural = self._resource(request)
        ns = request.match_info["namespace"]
        obj = await request.json()
        check_object(RESOURCES[(group, version, plural)], obj, ns)
        if plural == "pods":
            self._inject(self.faults.take_create_error())
        created = self.store.create(plural, ns, obj)
        if plural == "pods" and self.faults.take("create_conflicts"):
            raise ApiStatus(409, "AlreadyExists", f'pods "{created["metadata"]["name"]}" already exists')
        return web.json_response(created, status=201)

    @staticmethod
    def _inject(code: int | None) -> None:
        if code is not None:
            reason = {429: "TooManyRequests", 409: "AlreadyExists"}.get(code, "InternalError")
            raise ApiStatus(code, reason, f"injected fault {code}")

    async def get(self, request: web.Request) -> web.Response:
        _, _, plural = self._resource(request)
        info = request.match_info
        return web.json_response(self.store.get(plural, info["namespace"], info["name"]))

    async def delete(self, request: web.Request) -> web.Response:
        _, _, plural = self._resource(request)
        ns, name = request.match_info["namespace"], request.match_info["name"]
        obj = self.store.get(plural, ns, name)
        if plural == "pods":
            self._inject(self.faults.take_delete_error())
            await self.kubelet.delete(ns, name)
        else:
            self.store.delete(plural, ns, name)
        return web.json_response(obj)

    async def log(self, request: web.Request) -> web.StreamResponse:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        self.store.get("pods", ns, name)
        path = self.kubelet.log_path(ns, name, request.query.get("container"))
        if path is None or not path.exists():
            raise ApiStatus(400, "BadRequest", f'container in pod "{name}" is waiting to start')
        if request.query.get("follow", "").lower() != "true":
            return web.Response(body=path.read_bytes(), content_type="text/plain")
        return await self._follow(request, ns, name, path)

    async def _follow(self, request: web.Request, ns: str, name: str, path: Any) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        offset = 0
        while True:
            data = path.read_bytes()[offset:] if path.exists() else b""
            offset += len(data)
            if data:
                await resp.write(data)
            rt = self.kubelet.pods.get((ns, name))
            if rt is None or rt.terminated:
                return resp
            await asyncio.sleep(0.2)

    async def fault(self, request: web.Request) -> web.Response:
        if request.method == "POST":
            try:
                self.faults.update(await request.json())
            except ValueError as e:
                raise ApiStatus(400, "BadRequest", str(e)) from e
        return web.json_response(asdict(self.faults))

    async def reset_watches(self, request: web.Request) -> web.Response:
        open_watches = len(self.store.subscriptions)
        self.store.compact()
        return web.json_response({"reset": open_watches})

    async def pod_fault(self, request: web.Request) -> web.Response:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        body = await request.json()
        action, container = body.get("action"), body.get("container")
        acts = {"oom": self.kubelet.oom_kill, "evict": self.kubelet.evict}
        if action not in acts:
            raise ApiStatus(400, "BadRequest", f"action must be one of {sorted(acts)}")
        if container is not None and action != "oom":
            raise ApiStatus(400, "BadRequest", "only the oom action takes a container")
        if container is not None:
            self.kubelet.oom_kill(ns, name, str(container))
        else:
            acts[action](ns, name)
        return web.json_response(self.store.get("pods", ns, name))
