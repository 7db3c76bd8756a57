"""The Kubernetes backend end to end: real lightkube client → fake API server → bwrap "kubelet"."""

from __future__ import annotations

import asyncio
import dataclasses
import os

import pytest
from k8s_helpers import NAMESPACE, needs_bwrap

from openforgerl.sandbox.base import CommandNotFoundError, SandboxError, SandboxSpec
from openforgerl.sandbox.kubernetes import KubernetesBackend, SandboxExpired
from openforgerl.sandbox.kubernetes.config import LABEL_ROLLOUT
from openforgerl.sandbox.kubernetes.manifests import render_pod
from openforgerl.testing.fake_kube import FakeKubeServer

pytestmark = needs_bwrap


async def test_create_run_exec_logs_cleanup(kube_backend: KubernetesBackend, fake_kube: FakeKubeServer):
    spec = SandboxSpec("rollout-A1", files={"task/README": b"fix the bug\n"}, env={"OPENAI_API_KEY": "k-1"})
    sbx = await kube_backend.open_sandbox(spec)
    (pod,) = fake_kube.pods(NAMESPACE)
    assert pod["status"]["phase"] == "Running"
    assert pod["metadata"]["labels"][LABEL_ROLLOUT] == "rollout-a1-" + pod["metadata"]["name"][-8:]
    res = await sbx.exec(["sh", "-c", "cat task/README; echo oops >&2; exit 3"])
    assert (res.returncode, res.stdout, res.stderr, res.timed_out) == (3, b"fix the bug\n", b"oops\n", False)
    env = await sbx.exec(["sh", "-c", 'echo "$OPENFORGERL_GATEWAY_URL $OPENAI_API_KEY $X"'], env={"X": "y"})
    assert env.stdout.decode().split() == [sbx.gateway_url, "k-1", "y"]
    assert (await sbx.exec(["pwd"], cwd="/tmp")).stdout == b"/tmp\n"
    assert (await sbx.exec(["cat"], stdin=b"piped")).stdout == b"piped"
    assert b"openforgerl sandbox ready" in await sbx.logs()
    await sbx.aclose()
    await sbx.aclose()  # idempotent
    assert fake_kube.pods() == []
    with pytest.raises(SandboxError):
        await sbx.exec(["true"])


async def test_files_roundtrip_and_errors(kube_backend: KubernetesBackend):
    sbx = await kube_backend.open_sandbox(SandboxSpec("files"))
    try:
        blob = os.urandom(1_500_000)  # many exec frames both ways (clients cap a frame at 64 KiB)
        await sbx.write_file("deep/dir/out.bin", blob)
        assert await sbx.read_file("/workdir/deep/dir/out.bin") == blob
        with pytest.raises(FileNotFoundError):
            await sbx.read_file("missing.txt")
        with pytest.raises(SandboxError):
            await sbx.write_file("/usr/not-allowed", b"x")  # read-only root, as in the local backend
        with pytest.raises(CommandNotFoundError):
            await sbx.exec(["definitely-not-a-command-xyz"])
    finally:
        await sbx.aclose()


async def test_exec_timeout_kills_the_process_tree(kube_backend: KubernetesBackend):
    sbx = await kube_backend.open_sandbox(SandboxSpec("timeout"))
    try:
        res = await sbx.exec(["sh", "-c", "sleep 60 & echo $! > /tmp/child; wait"], timeout_s=1.0)
        assert res.timed_out and res.returncode == 137
        alive = await sbx.exec(["sh", "-c", 'kill -0 "$(cat /tmp/child)"'])
        assert alive.returncode != 0, "the background child survived the timeout"
    finally:
        await sbx.aclose()


async def test_spawn_runs_in_background(kube_backend: KubernetesBackend):
    sbx = await kube_backend.open_sandbox(SandboxSpec("spawn"))
    try:
        await sbx.spawn(["sh", "-c", "echo up > svc.txt; sleep 60"])
        for _ in range(100):
            if (await sbx.exec(["cat", "svc.txt"])).stdout == b"up\n":
                break
            await asyncio.sleep(0.05)
        assert (await sbx.exec(["cat", "svc.txt"])).stdout == b"up\n"
    finally:
        await sbx.aclose()


async def test_lifetime_deadline_deletes_pod(kube_backend: KubernetesBackend, fake_kube: FakeKubeServer):
    sbx = await kube_backend.open_sandbox(SandboxSpec("short", lifetime_s=3.0))
    pod = render_pod(SandboxSpec("short", lifetime_s=3.0), kube_backend.config)
    assert pod["spec"]["activeDeadlineSeconds"] == 3 + kube_backend.config.deadline_grace_s
    res = await sbx.exec(["sleep", "30"])  # no timeout given: clipped to the remaining lifetime
    assert res.timed_out
    await kube_backend.informer.wait_for(sbx.pod_name, lambda p: p is None, 30)
    assert fake_kube.pods() == []
    with pytest.raises(SandboxExpired):
        await sbx.exec(["true"])
    await sbx.aclose()


async def test_boot_concurrency_cap(make_backend, fake_kube: FakeKubeServer):
    backend = await make_backend(max_concurrent_boots=2)
    sandboxes = await asyncio.gather(*(backend.open_sandbox(SandboxSpec(f"cap-{i}")) for i in range(6)))
    assert backend.gate.peak == 2
    assert len(fake_kube.pods(NAMESPACE)) == 6
    outs = await asyncio.gather(*(s.exec(["sh", "-c", "echo $OPENFORGERL_ROLLOUT_ID"]) for s in sandboxes))
    assert sorted(o.stdout.decode().strip() for o in outs) == [f"cap-{i}" for i in range(6)]
    await asyncio.gather(*(s.aclose() for s in sandboxes))


async def test_backend_close_deletes_open_sandboxes(make_backend, fake_kube: FakeKubeServer):
    backend = await make_backend()
    await backend.open_sandbox(SandboxSpec("left-open-1"))
    await backend.open_sandbox(SandboxSpec("left-open-2"))
    assert len(fake_kube.pods()) == 2
    await backend.aclose()
    assert fake_kube.pods() == []


async def test_janitor_reaps_leftovers_by_label(make_backend, fake_kube: FakeKubeServer):
    first = await make_backend(backend_id="run-7")
    await first.api.create(render_pod(SandboxSpec("orphan"), first.config))  # as if we crashed
    await first.informer.wait_for("ofrl-orphan", lambda p: p is not None, 10)
    other = await make_backend(backend_id="someone-else")
    await other.api.create(render_pod(SandboxSpec("not-mine"), other.config))
    assert await first.reap(min_age_s=0) == ["ofrl-orphan"]  # only unowned pods with our labels
    await first.informer.wait_for("ofrl-orphan", lambda p: p is None, 10)
    assert [p["metadata"]["name"] for p in fake_kube.pods()] == ["ofrl-not-mine"]
    restarted = await make_backend(backend_id="someone-else")  # start() reaps its own leftovers
    assert restarted is not None
    await other.informer.wait_for("ofrl-not-mine", lambda p: p is None, 10)


async def test_gateway_service_objects_created_once(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer
):
    from openforgerl.sandbox.kubernetes.gateway import ensure_gateway

    cfg = kube_backend.config
    created = await ensure_gateway(kube_backend.api, cfg)
    assert created == [
        "Deployment/openforgerl-gateway",
        "Service/openforgerl-gateway",
        "NetworkPolicy/openforgerl-sandbox-egress",
        "NetworkPolicy/openforgerl-gateway-ingress",
    ]
    assert await ensure_gateway(kube_backend.api, cfg) == []  # 409s: already there
    svc = fake_kube.store.get("services", cfg.gateway.namespace, cfg.gateway.name)
    assert svc["spec"]["ports"][0]["port"] == cfg.gateway.port
    for kind, ns, name in [
        ("Deployment", cfg.gateway.namespace, cfg.gateway.name),
        ("Service", cfg.gateway.namespace, cfg.gateway.name),
        ("NetworkPolicy", cfg.namespace, "openforgerl-sandbox-egress"),
        ("NetworkPolicy", cfg.gateway.namespace, "openforgerl-gateway-ingress"),
    ]:
        assert await kube_backend.api.delete(kind, ns, name)
    assert fake_kube.store.objects == {}


async def test_janitor_reaps_finished_pods_of_any_backend(make_backend, fake_kube: FakeKubeServer):
    ours = await make_backend(backend_id="a")
    theirs = render_pod(SandboxSpec("done-elsewhere"), dataclasses.replace(ours.config, backend_id="b"))
    theirs["spec"]["containers"][0]["command"] = ["true"]  # exits at once: phase Succeeded
    await ours.api.create(theirs)
    running = await ours.open_sandbox(SandboxSpec("still-running"))
    for _ in range(200):
        if [
            p["status"].get("phase")
            for p in fake_kube.pods()
            if p["metadata"]["name"] == "ofrl-done-elsewhere"
        ] == ["Succeeded"]:
            break
        await asyncio.sleep(0.05)
    assert await ours.reap_finished(min_age_s=0) == ["ofrl-done-elsewhere"]
    assert [p["metadata"]["name"] for p in fake_kube.pods()] == [running.pod_name]
    await running.aclose()


async def test_open_discovers_kubeconfig_from_env(fake_kube: FakeKubeServer, kubeconfig, monkeypatch):
    """What `openforgerl rollout --backend kubernetes` does: `KubernetesBackend.open()`, no arguments."""
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("OPENFORGERL_K8S_NAMESPACE", "from-env")
    backend = await KubernetesBackend.open()
    try:
        sbx = await backend.open_sandbox(SandboxSpec("discovered"))
        assert fake_kube.pods("from-env")[0]["metadata"]["name"] == sbx.pod_name
        assert (await sbx.exec(["echo", "hi"])).stdout == b"hi\n"
    finally:
        await backend.aclose()
    assert fake_kube.pods() == []
