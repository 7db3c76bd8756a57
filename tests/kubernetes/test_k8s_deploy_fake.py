"""The deploy base's rollout Pods and Role against the in-repo fake API server (a simulation; no real
cluster here): the backend, configured as `deploy/k8s` configures it, boots a Pod, runs a command in it
and reads its log; every request it sent is mapped to the RBAC (resource, verb) a real API server would
authorize, and each must be granted by the base's Role.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from k8s_helpers import FAST, alive_pids, needs_bwrap

from openforgerl.sandbox.base import SandboxSpec
from openforgerl.sandbox.kubernetes import KubernetesBackend, deploy
from openforgerl.sandbox.kubernetes.lightkube_api import LightkubeApi
from openforgerl.sandbox.kubernetes.manifests import render_pod
from openforgerl.testing.fake_kube import FakeKubeServer

pytestmark = needs_bwrap
Grant = tuple[str, str]  # (resource[/subresource], verb)


class RecordingKube(FakeKubeServer):
    """The fake, plus a log of every request's method, path and query (what an authorizer sees)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root=root)
        self.requests: list[tuple[str, str, dict[str, str]]] = []

    def app(self) -> web.Application:
        app = super().app()

        @web.middleware
        async def record(request: web.Request, handler: Any) -> web.StreamResponse:
            self.requests.append((request.method, request.path, dict(request.query)))
            response: web.StreamResponse = await handler(request)
            return response

        app.middlewares.insert(0, record)
        return app


def rbac_attributes(method: str, path: str, query: dict[str, str]) -> set[Grant]:
    """Kubernetes' request-info rules for namespaced core resources: POST create, DELETE delete, GET on
    a name get, on a collection list (watch with `watch=true`). A websocket exec is a GET, so `get` on
    pods/exec, and since 1.35 also a synthetic `create` check
    (AuthorizePodWebsocketUpgradeCreatePermission)."""
    parts = path.strip("/").split("/")
    assert parts[:3] == ["api", "v1", "namespaces"], path
    plural, rest = parts[4], parts[5:]
    resource = plural + (f"/{rest[1]}" if len(rest) > 1 else "")
    if method == "POST":
        return {(resource, "create")}
    if method == "DELETE":
        return {(resource, "delete" if rest else "deletecollection")}
    if not rest:
        return {(resource, "watch" if query.get("watch") in ("1", "true") else "list")}
    return {(resource, "get"), (resource, "create")} if resource == "pods/exec" else {(resource, "get")}


def granted(rules: Any) -> set[Grant]:
    return {(res, verb) for r in rules for res in r["resources"] for verb in r["verbs"]}


@pytest.fixture
async def recording_kube(tmp_path: Path) -> AsyncIterator[RecordingKube]:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed")
    async with RecordingKube(tmp_path / "kubelet") as srv:
        yield srv
    assert alive_pids(srv.kubelet.started_pids) == []


async def run_one_rollout(srv: RecordingKube, tmp_path: Path) -> tuple[dict[str, Any], bytes, bytes]:
    cfg = dataclasses.replace(
        FAST, namespace=deploy.NAMESPACE, default_image=deploy.SANDBOXES.default_image, gateway=deploy.GATEWAY
    )
    kubeconfig = srv.write_kubeconfig(tmp_path / "kubeconfig.yaml", deploy.NAMESPACE)
    backend = KubernetesBackend(LightkubeApi.from_kubeconfig(kubeconfig, namespace=deploy.NAMESPACE), cfg)
    await backend.start()
    try:
        sbx = await backend.open_sandbox(SandboxSpec("deploy-rollout"))
        (pod,) = srv.pods(deploy.NAMESPACE)
        env = await sbx.exec(["sh", "-c", 'echo "$OPENFORGERL_GATEWAY_URL"'])
        logs = await sbx.logs()
        await sbx.aclose()
    finally:
        await backend.aclose()
    assert srv.pods() == []
    return pod, env.stdout, logs


async def test_deploy_profile_rollout_boots_and_stays_inside_the_role(
    recording_kube: RecordingKube, tmp_path: Path
):
    pod, gateway_url, logs = await run_one_rollout(recording_kube, tmp_path)
    template = deploy.render_rollout_template()["template"]["spec"]
    expected = render_pod(
        SandboxSpec("deploy-rollout"),
        dataclasses.replace(
            FAST,
            namespace=deploy.NAMESPACE,
            default_image=deploy.SANDBOXES.default_image,
            gateway=deploy.GATEWAY,
        ),
    )
    assert (
        pod["spec"]["containers"][0]["image"]
        == template["containers"][0]["image"]
        == "openforgerl/rollout:0.1.0"
    )
    assert (
        pod["spec"]["containers"][0]["securityContext"]
        == expected["spec"]["containers"][0]["securityContext"]
    )
    assert gateway_url.decode().strip() == "http://openforgerl-gateway.openforgerl.svc.cluster.local:8080"
    assert b"openforgerl sandbox ready" in logs

    used = set().union(*(rbac_attributes(*r) for r in recording_kube.requests))
    role = granted(deploy.ORCHESTRATOR_RULES)
    assert used - role == set(), f"the backend needs grants the Role lacks: {used - role}"
    # `get` on one Pod is the 409 path (adopting a Pod whose create answer was lost), not taken here
    assert role - used <= {("pods", "get")}, f"the Role grants what the backend never uses: {role - used}"


async def test_role_check_fails_without_exec_get(recording_kube: RecordingKube, tmp_path: Path):
    """Control: the same requests against a Role with only `create` on pods/exec (what SPDY clients
    such as kubectl need) leave the websocket exec unauthorized."""
    await run_one_rollout(recording_kube, tmp_path)
    used = set().union(*(rbac_attributes(*r) for r in recording_kube.requests))
    narrower = [
        r if r["resources"] != ["pods/exec"] else {**r, "verbs": ["create"]}
        for r in deploy.ORCHESTRATOR_RULES
    ]
    assert used - granted(narrower) == {("pods/exec", "get")}
