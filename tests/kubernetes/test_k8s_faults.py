"""Every injected cluster fault ends as the right `SandboxError` subtype (an infra fault), except an OOM
kill, which is the agent's outcome; and no Pod is left behind (checked by the fixtures' teardown)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from k8s_helpers import NAMESPACE, needs_bwrap

from openforgerl.sandbox.base import SandboxError, SandboxSpec
from openforgerl.sandbox.kubernetes import (
    ApiUnavailable,
    ExecChannelLost,
    ImagePullFailed,
    KubernetesBackend,
    KubeSandboxError,
    PodCreateRejected,
    PodEvicted,
    Unschedulable,
)
from openforgerl.sandbox.kubernetes.manifests import render_pod
from openforgerl.testing.fake_kube import FakeKubeServer

pytestmark = needs_bwrap


async def open_and_echo(backend: KubernetesBackend, rollout: str) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout))
    try:
        assert (await sbx.exec(["echo", "ok"])).stdout == b"ok\n"
    finally:
        await sbx.aclose()


async def test_watch_reset_410_relists_and_resumes(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer
):
    assert fake_kube.reset_watches() == 1  # the informer's open watch gets ERROR 410 mid-stream
    fake_kube.faults.watch_resets = 1  # and its next watch too, right after the backlog
    await open_and_echo(kube_backend, "after-reset")
    assert kube_backend.informer.relists >= 2
    assert fake_kube.faults.watch_resets == 0
    async with aiohttp.ClientSession() as http, http.post(f"{fake_kube.url}/__fault/reset-watches") as resp:
        assert (await resp.json())["reset"] == 1
    await open_and_echo(kube_backend, "after-reset-2")
    assert kube_backend.informer.relists >= 3


async def test_watch_dropped_connection_recovers(kube_backend: KubernetesBackend, fake_kube: FakeKubeServer):
    fake_kube.faults.watch_drops = 1
    fake_kube.reset_watches()  # so the informer opens a new watch, which is then cut
    await open_and_echo(kube_backend, "after-drop")
    assert kube_backend.informer.errors >= 1
    assert fake_kube.faults.watch_drops == 0


async def test_409_on_create_is_idempotent(kube_backend: KubernetesBackend, fake_kube: FakeKubeServer):
    fake_kube.faults.create_conflicts = 1  # created, but the answer says 409 (a lost first answer)
    await open_and_echo(kube_backend, "conflict")
    assert fake_kube.faults.create_conflicts == 0


async def test_409_for_someone_elses_pod_is_rejected(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer
):
    squatter = render_pod(SandboxSpec("taken"), kube_backend.config)
    squatter["metadata"]["annotations"]["openforgerl.io/rollout-id"] = "another-rollout"
    squatter["metadata"]["labels"] = {"owner": "someone"}
    await kube_backend.api.create(squatter)
    with pytest.raises(PodCreateRejected) as err:
        await kube_backend.open_sandbox(SandboxSpec("taken"))
    assert err.value.reason == "AlreadyExists"
    assert await kube_backend.api.get_pod(NAMESPACE, "ofrl-taken") is not None  # not ours: left alone
    assert await kube_backend.api.delete("Pod", NAMESPACE, "ofrl-taken")


async def test_429_and_503_on_create_are_retried(kube_backend: KubernetesBackend, fake_kube: FakeKubeServer):
    fake_kube.faults.create_errors = [429, 503, 500]
    await open_and_echo(kube_backend, "retried")
    assert fake_kube.faults.create_errors == []


async def test_persistent_5xx_on_create_is_infra(make_backend, fake_kube: FakeKubeServer):
    backend = await make_backend(create_retries=2)
    fake_kube.faults.create_errors = [503, 429, 503]
    with pytest.raises(ApiUnavailable) as err:
        await backend.open_sandbox(SandboxSpec("never"))
    assert isinstance(err.value, SandboxError) and err.value.infra_class == "sandbox"
    assert fake_kube.pods() == []


async def test_exec_disconnect_is_infra_and_sandbox_survives(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer
):
    sbx = await kube_backend.open_sandbox(SandboxSpec("exec-drop"))
    try:
        fake_kube.faults.exec_disconnects = 1
        with pytest.raises(ExecChannelLost) as err:
            await sbx.exec(["sleep", "1"])
        assert err.value.reason == "ExecChannelLost"
        assert (await sbx.exec(["echo", "still here"])).stdout == b"still here\n"
    finally:
        await sbx.aclose()


async def test_stuck_pending_image_pull_is_infra(make_backend, fake_kube: FakeKubeServer):
    backend = await make_backend(boot_timeout_s=2.0)
    fake_kube.faults.stuck_pending = 1
    with pytest.raises(ImagePullFailed) as err:
        await backend.open_sandbox(SandboxSpec("no-image"))
    assert err.value.reason in ("ErrImagePull", "ImagePullBackOff")
    assert fake_kube.pods() == []


async def test_unschedulable_is_infra(make_backend, fake_kube: FakeKubeServer):
    backend = await make_backend(boot_timeout_s=2.0)
    fake_kube.faults.unschedulable = 1
    with pytest.raises(Unschedulable) as err:
        await backend.open_sandbox(SandboxSpec("no-node"))
    assert "Insufficient cpu" in str(err.value)
    assert fake_kube.pods() == []


async def test_oom_killed_during_exec_is_the_agents_outcome(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer
):
    """Every container OOMKilled (the fault's HTTP form acts on one; see test_k8s_oom.py): no infra fault,
    the exec ends 137 with the memory limit named, and so do later calls."""
    sbx = await kube_backend.open_sandbox(SandboxSpec("oom"))
    try:
        running = asyncio.create_task(sbx.exec(["sleep", "60"]))
        await asyncio.sleep(0.5)
        fake_kube.kubelet.oom_kill(NAMESPACE, sbx.pod_name)
        res = await running
        assert res.returncode == 137 and res.limits_hit == ("memory",) and not res.timed_out
        assert (await sbx.exec(["true"])).limits_hit == ("memory",)  # later calls name the same cause
    finally:
        await sbx.aclose()


async def test_evicted_via_http_fault_api(kube_backend: KubernetesBackend, fake_kube: FakeKubeServer):
    sbx = await kube_backend.open_sandbox(SandboxSpec("evict"))
    try:
        url = f"{fake_kube.url}/__fault/namespaces/{NAMESPACE}/pods/{sbx.pod_name}"
        async with aiohttp.ClientSession() as http, http.post(url, json={"action": "evict"}) as resp:
            assert resp.status == 200
            assert (await resp.json())["status"]["reason"] == "Evicted"
        with pytest.raises(PodEvicted) as err:
            await sbx.exec(["true"])
        assert isinstance(err.value, KubeSandboxError) and err.value.reason == "Evicted"
    finally:
        await sbx.aclose()


async def test_delete_retried_on_5xx(kube_backend: KubernetesBackend, fake_kube: FakeKubeServer):
    sbx = await kube_backend.open_sandbox(SandboxSpec("hard-to-delete"))
    fake_kube.faults.delete_errors = [503, 500, 429]
    await sbx.aclose()
    assert fake_kube.faults.delete_errors == []
    assert fake_kube.pods() == []


async def test_cancelled_boot_still_deletes_the_pod(make_backend, fake_kube: FakeKubeServer):
    backend = await make_backend(boot_timeout_s=60.0)
    fake_kube.faults.stuck_pending = 1
    opening = asyncio.create_task(backend.open_sandbox(SandboxSpec("cancelled")))
    await backend.informer.wait_for("ofrl-cancelled", lambda p: p is not None, 10)
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    await backend.informer.wait_for("ofrl-cancelled", lambda p: p is None, 10)
    assert fake_kube.pods() == [] and backend.known == set()
