"""Wire fidelity of the fake API server, checked with a second client (kubernetes-asyncio, the
generated port of the official client) and with raw HTTP/websocket frames."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from k8s_helpers import NAMESPACE, needs_bwrap

from openforgerl.sandbox.base import SandboxSpec
from openforgerl.sandbox.kubernetes import KubernetesConfig
from openforgerl.sandbox.kubernetes.manifests import render_pod
from openforgerl.testing.fake_kube import FakeKubeServer, watch

pytestmark = needs_bwrap
CFG = KubernetesConfig(namespace=NAMESPACE)


def pod_body(rollout: str, **spec_overrides: Any) -> dict[str, Any]:
    pod = render_pod(SandboxSpec(rollout), CFG)
    pod["spec"].update(spec_overrides)
    return pod


async def watch_lines(http: aiohttp.ClientSession, url: str, n: int) -> list[dict[str, Any]]:
    out = []
    async with http.get(url) as resp:
        assert resp.status == 200
        async for line in resp.content:
            out.append(json.loads(line))
            if len(out) == n:
                break
    return out


async def test_kubernetes_asyncio_client_full_cycle(fake_kube: FakeKubeServer, kubeconfig: Path):
    k8s = pytest.importorskip("kubernetes_asyncio")
    from kubernetes_asyncio.stream import WsApiClient

    await k8s.config.load_kube_config(config_file=str(kubeconfig))
    async with k8s.client.ApiClient() as api:
        assert (await k8s.client.VersionApi(api).get_code()).git_version == "v1.37.0-fake"
        core = k8s.client.CoreV1Api(api)
        await core.create_namespaced_pod(NAMESPACE, pod_body("second-client"))
        w = k8s.watch.Watch()  # sends watch=True (capital T)
        async for event in w.stream(core.list_namespaced_pod, NAMESPACE, timeout_seconds=30):
            if event["object"].status.phase == "Running":
                break
        w.stop()
        pods = await core.list_namespaced_pod(NAMESPACE, label_selector="openforgerl.io/backend-id=default")
        assert [p.metadata.name for p in pods.items] == ["ofrl-second-client"]
        assert "sandbox ready" in await core.read_namespaced_pod_log("ofrl-second-client", NAMESPACE)
        async with WsApiClient() as ws_api:
            code, out, err = await exec_v4(k8s.client.CoreV1Api(ws_api), WsApiClient)
        assert (code, out, err) == (3, "out\n", "err\n")
        await core.delete_namespaced_pod("ofrl-second-client", NAMESPACE)
        assert (await core.list_namespaced_pod(NAMESPACE)).items == []


async def exec_v4(core: Any, ws_client: Any) -> tuple[int, str, str]:
    """kubernetes-asyncio's exec (v4 protocol), reading channels ourselves for the exit code."""
    ctx = await core.connect_get_namespaced_pod_exec(
        "ofrl-second-client",
        NAMESPACE,
        command=["sh", "-c", "echo out; echo err >&2; exit 3"],
        container="sandbox",
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
        _preload_content=False,
    )
    chunks: dict[int, str] = {1: "", 2: "", 3: ""}
    async with ctx as ws:
        async for msg in ws:
            chunks[msg.data[0]] += msg.data[1:].decode()
    return ws_client.parse_error_data(chunks[3]), chunks[1], chunks[2]


async def test_discovery_paths(fake_kube: FakeKubeServer):
    async with aiohttp.ClientSession(fake_kube.url) as http:
        for path in ("/version", "/version/", "/api", "/api/", "/apis", "/api/v1", "/apis/apps/v1"):
            async with http.get(path) as resp:
                assert resp.status == 200, path
        async with http.get("/api/v1") as resp:
            names = {r["name"] for r in (await resp.json())["resources"]}
        assert {"pods", "pods/exec", "pods/log", "services"} <= names
        async with http.get(f"/api/v1/namespaces/{NAMESPACE}/pods/nope") as resp:
            body = await resp.json()
        assert (resp.status, body["kind"], body["reason"], body["code"]) == (404, "Status", "NotFound", 404)


async def test_watch_resume_and_410(fake_kube: FakeKubeServer):
    base = f"/api/v1/namespaces/{NAMESPACE}/pods"
    async with aiohttp.ClientSession(fake_kube.url) as http:
        async with http.post(base, json=pod_body("w1")) as resp:
            rv = (await resp.json())["metadata"]["resourceVersion"]
        await http.post(base, json=pod_body("w2"))
        events = await watch_lines(http, f"{base}?watch=1&resourceVersion={rv}", 1)
        assert events[0]["type"] in ("ADDED", "MODIFIED")
        assert int(events[0]["object"]["metadata"]["resourceVersion"]) > int(rv)
        fresh = await watch_lines(http, f"{base}?watch=True", 2)  # no RV: synthetic ADDED for what exists
        assert {e["object"]["metadata"]["name"] for e in fresh} == {"ofrl-w1", "ofrl-w2"}
        fake_kube.reset_watches()
        (gone,) = await watch_lines(http, f"{base}?watch=true&resourceVersion={rv}", 1)
        assert (gone["type"], gone["object"]["code"], gone["object"]["reason"]) == ("ERROR", 410, "Expired")
        async with http.delete(f"{base}/ofrl-w1"), http.delete(f"{base}/ofrl-w2"):
            pass


async def test_watch_bookmarks_and_timeout(fake_kube: FakeKubeServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(watch, "BOOKMARK_EVERY_S", 0.1)
    url = f"/api/v1/namespaces/{NAMESPACE}/pods?watch=true&allowWatchBookmarks=true&resourceVersion=0"
    async with aiohttp.ClientSession(fake_kube.url) as http:
        (mark,) = await watch_lines(http, url, 1)
        assert mark["type"] == "BOOKMARK" and mark["object"]["metadata"]["resourceVersion"]
        async with http.get(f"/api/v1/namespaces/{NAMESPACE}/pods?watch=true&timeoutSeconds=1") as resp:
            assert await resp.read() == b""  # ends cleanly at the server-side timeout


async def running(fake_kube: FakeKubeServer, name: str, phase: str = "Running") -> dict[str, Any]:
    for _ in range(400):
        pods = [p for p in fake_kube.pods() if p["metadata"]["name"] == name]
        if pods and pods[0].get("status", {}).get("phase") == phase:
            return pods[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} never reached {phase}: {fake_kube.pods()}")


async def test_exec_v5_frames_stdin_close_and_status(fake_kube: FakeKubeServer):
    base = f"/api/v1/namespaces/{NAMESPACE}/pods"
    async with aiohttp.ClientSession(fake_kube.url) as http:
        await http.post(base, json=pod_body("frames"))
        pod = await running(fake_kube, "ofrl-frames")
        conds = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert conds == {
            "PodScheduled": "True",
            "Initialized": "True",
            "ContainersReady": "True",
            "Ready": "True",
        }
        url = (
            f"{base}/ofrl-frames/exec?container=sandbox&command=sh&command=-c&command=cat;exit "
            "5&stdin=true&stdout=true&stderr=true"
        )
        frames: list[bytes] = []
        async with http.ws_connect(url, protocols=("v5.channel.k8s.io",)) as ws:
            assert ws.protocol == "v5.channel.k8s.io"
            await ws.send_bytes(b"\x00hello ")
            await ws.send_bytes(b"\x00world")
            await ws.send_bytes(b"\xff\x00")  # v5: close stdin
            frames = [m.data async for m in ws]
        assert b"".join(f[1:] for f in frames if f[0] == 1) == b"hello world"
        status = json.loads(frames[-1][1:])
        assert frames[-1][0] == 3 and status["reason"] == "NonZeroExitCode"
        assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "5"}]
        async with http.delete(f"{base}/ofrl-frames") as resp:
            assert resp.status == 200


async def test_a_pods_containers_share_the_network_not_the_processes(fake_kube: FakeKubeServer):
    """Two containers: exec must name one (400 otherwise, as a real API server says); one container's
    processes are not the other's; a port bound in one is taken in the other; one
    ending leaves the Pod Running."""
    base = f"/api/v1/namespaces/{NAMESPACE}/pods"

    async def run(http: aiohttp.ClientSession, ctr: str | None, script: str) -> tuple[int, bytes]:
        which = f"container={ctr}&" if ctr else ""
        url = (
            f"{base}/ofrl-two/exec?{which}command=sh&command=-c&command={quote(script)}"
            "&stdout=true&stderr=true"
        )
        async with http.ws_connect(url, protocols=("v5.channel.k8s.io",)) as ws:
            frames = [m.data async for m in ws]
        status = json.loads(frames[-1][1:])
        code = 0 if status["status"] == "Success" else int(status["details"]["causes"][0]["message"])
        return code, b"".join(f[1:] for f in frames if f[0] == 1)

    async with aiohttp.ClientSession(fake_kube.url) as http:
        await http.post(base, json=pod_body("two"))
        await running(fake_kube, "ofrl-two")
        async with http.get(f"{base}/ofrl-two/exec?command=true&stdout=true") as resp:
            assert resp.status == 400 and "choose one of" in (await resp.json())["message"]
        listen = (
            "python3 -c 'import socket,time; s=socket.socket(); "
            's.bind(("127.0.0.1", 8799)); s.listen(); time.sleep(600)\''
        )
        assert (await run(http, "services", f"(setsid {listen} > /dev/null 2>&1 &); sleep 0.5"))[0] == 0
        seen = "for c in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $c; echo; done | grep -c 'sleep[(]600'; "
        assert (await run(http, "services", seen))[1].startswith(b"1\n")  # the control: it sees its own
        _, out = await run(
            http,
            "sandbox",
            seen + "python3 -c 'import socket; socket.socket().bind((\"127.0.0.1\", 8799))' 2>&1 | tail -1",
        )
        assert out.startswith(b"0\n") and b"Address already in use" in out, out
        await run(http, "sandbox", "kill -TERM 1")
        for _ in range(100):
            pod = await running(fake_kube, "ofrl-two")
            states = {s["name"]: s["state"] for s in pod["status"]["containerStatuses"]}
            if "terminated" in states["sandbox"]:
                break
            await asyncio.sleep(0.05)
        assert states["sandbox"]["terminated"]["exitCode"] == 0 and "running" in states["services"]
        assert (await run(http, "services", "true"))[0] == 0
        async with http.delete(f"{base}/ofrl-two") as resp:
            assert resp.status == 200


async def test_kubelet_enforces_active_deadline(fake_kube: FakeKubeServer):
    async with aiohttp.ClientSession(fake_kube.url) as http:
        await http.post(
            f"/api/v1/namespaces/{NAMESPACE}/pods", json=pod_body("deadline", activeDeadlineSeconds=1)
        )
        pod = await running(fake_kube, "ofrl-deadline", phase="Failed")
        assert pod["status"]["reason"] == "DeadlineExceeded"
        assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
        await http.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/ofrl-deadline")


async def test_fault_api_validates_and_reports(fake_kube: FakeKubeServer):
    async with aiohttp.ClientSession(fake_kube.url) as http:
        async with http.post("/__fault", json={"no_such_fault": 1}) as resp:
            assert resp.status == 400
        async with http.post("/__fault", json={"create_errors": [429], "stuck_pending": 2}) as resp:
            body = await resp.json()
        assert (body["create_errors"], body["stuck_pending"]) == ([429], 2)
        async with http.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json=pod_body("x")) as resp:
            assert (resp.status, resp.headers["Retry-After"]) == (429, "1")
    assert fake_kube.pods() == []


async def test_log_follow_streams_until_the_pod_ends(fake_kube: FakeKubeServer):
    base = f"/api/v1/namespaces/{NAMESPACE}/pods"
    async with aiohttp.ClientSession(fake_kube.url) as http:
        await http.post(base, json=pod_body("follow"))
        await running(fake_kube, "ofrl-follow")
        async with http.get(f"{base}/ofrl-follow/log?follow=true") as resp:
            first = await resp.content.readline()
            assert first == b"openforgerl sandbox ready\n"
            fake_kube.kubelet.evict(NAMESPACE, "ofrl-follow")
            assert await asyncio.wait_for(resp.content.read(), 30) == b""  # stream ends with the container
        await http.delete(f"{base}/ofrl-follow")
