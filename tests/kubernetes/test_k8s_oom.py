"""A container OOMKilled at its own limit in a rollout's Pod is the agent's outcome, never infra: the agent's
container (its own processes' memory) and `services` (a task service's memory, which the agent drives through
the service's API). With `memory.oom.group` (a kubelet of 1.28 or later on cgroup v2) one process past the
limit ends the whole container, reported `OOMKilled`; were that infra, allocating would turn any failing
rollout into a retried one. Faults the agent cannot cause (an eviction, a container that died any other way)
stay infra. Fake API server, bwrap kubelet (`oom_kill` of one container), the real lightkube client."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from k8s_helpers import NAMESPACE, needs_bwrap
from test_k8s_services import agent as act
from test_k8s_services import open_task, verify

from openforgerl.sandbox.base import ExecResult, SandboxError, SandboxSpec
from openforgerl.sandbox.kubernetes import KubernetesBackend, KubernetesSandbox, PodEvicted, PodOOMKilled
from openforgerl.sandbox.kubernetes import sandbox as k8s_sandbox
from openforgerl.sandbox.kubernetes.commands import agent_tar_out_argv
from openforgerl.sandbox.verifier import run_verifier
from openforgerl.tasks.verdicts import TamperError, verdict_of
from openforgerl.testing.fake_kube import FakeKubeServer

pytestmark = needs_bwrap

# The fresh-Pod verifier: reward 1 iff the agent left the expected answer in /workdir.
CHECK = (
    "answer=$(cat /workdir/answer.txt 2>/dev/null); expected=$(cat /verifier/in/tests/expected); "
    'echo "{\\"reward\\": $([ "$answer" = "$expected" ] && echo 1 || echo 0)}" > reward.json'
)
HARNESS = ["sh", "-c", "echo 42 > answer.txt; sleep 60"]  # its work done, then it holds on (or allocates)


async def harness_oom_killed(sbx: KubernetesSandbox, fake_kube: FakeKubeServer, container: str) -> ExecResult:
    """The harness's exec, during which the kubelet OOM-kills `container` (over the fault API)."""
    running = asyncio.create_task(sbx.exec(HARNESS))
    await asyncio.sleep(0.5)
    url = f"{fake_kube.url}/__fault/namespaces/{NAMESPACE}/pods/{sbx.pod_name}"
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, json={"action": "oom", "container": container}) as r,
    ):
        assert r.status == 200, await r.text()
    return await running


async def fresh_pod_verdict(sbx: KubernetesSandbox) -> float:
    run = await run_verifier(sbx, ["/bin/sh", "-c", CHECK], inputs={"tests/expected": b"42\n"}, timeout_s=60)
    return verdict_of(run).reward


async def test_attack_the_agents_container_oomkilled_during_the_harness_is_its_outcome(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer
):
    """The harness's container goes past its memory limit and is OOMKilled whole: the exec ends 137 with
    "memory" in `limits_hit` (the orchestrator's `agent_failed`, the limit named), no `SandboxError`; later
    execs say the same, and the verifier still scores what the agent left in /workdir (read through the
    services container, which shares that volume)."""
    sbx = await kube_backend.open_sandbox(SandboxSpec("oom-agent"))
    try:
        res = await harness_oom_killed(sbx, fake_kube, kube_backend.config.container_name)
        assert res.returncode == 137 and "memory" in res.limits_hit and not res.timed_out, res
        later = await sbx.exec(["true"])
        assert later.returncode == 137 and later.limits_hit == ("memory",) and b"OOMKilled" in later.stderr
        assert await fresh_pod_verdict(sbx) == 1.0
    finally:
        await sbx.aclose()


async def test_attack_the_agents_oom_kill_leaves_a_wrong_answer_scored_zero(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer
):
    """The same kill where the agent had not done the task: a verdict of 0, not a retry."""
    sbx = await kube_backend.open_sandbox(SandboxSpec("oom-agent-fail"))
    try:
        assert (await sbx.exec(["sh", "-c", "echo 41 > answer.txt"])).returncode == 0
        fake_kube.kubelet.oom_kill(NAMESPACE, sbx.pod_name, kube_backend.config.container_name)
        res = await sbx.exec(["sh", "-c", "echo 42 > answer.txt"])  # too late: the container is gone
        assert res.returncode == 137 and res.limits_hit == ("memory",)
        assert await fresh_pod_verdict(sbx) == 0.0
    finally:
        await sbx.aclose()


async def test_a_workdir_file_is_read_once_the_agents_container_is_oomkilled(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer
):
    """A task that reads the agent's answer itself (`read_file`) still reads it; a link leaving /workdir (to
    the services container's /tmp, where its spawn logs are) or a FIFO is not followed: a missing file."""
    sbx = await kube_backend.open_sandbox(SandboxSpec("oom-read"))
    try:
        await sbx.spawn(["sh", "-c", "echo secret; sleep 60"])
        leave = "echo 42 > answer.txt; ln -s /tmp/openforgerl-spawn-1.log log; mkfifo fifo; ln -s .. up"
        assert (await sbx.exec(["sh", "-c", leave])).returncode == 0
        fake_kube.kubelet.oom_kill(NAMESPACE, sbx.pod_name, kube_backend.config.container_name)
        assert await sbx.read_file("/workdir/answer.txt") == b"42\n"
        for path in ("/workdir/log", "/workdir/fifo", "/workdir/up/tmp/openforgerl-spawn-1.log", "/tmp/x"):
            with pytest.raises(FileNotFoundError):
                await asyncio.wait_for(sbx.read_file(path), 20)
        svc = kube_backend.config.services_container_name  # control: a plain read there follows the link
        assert (await sbx._exec_in(svc, ["cat", "/workdir/log"])).stdout == b"secret\n"
    finally:
        await sbx.aclose()


async def test_control_without_the_check_the_same_pod_fault_was_infra(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer, monkeypatch: pytest.MonkeyPatch
):
    """The same OOM kill read as every other Pod fault (no container's end counted the agent's):
    `PodOOMKilled`, a `SandboxError` the orchestrator drops and retries as infra."""
    monkeypatch.setattr(k8s_sandbox, "agents_doing", lambda pod, agent, services: {})
    sbx = await kube_backend.open_sandbox(SandboxSpec("oom-agent-control"))
    try:
        with pytest.raises(PodOOMKilled):
            await harness_oom_killed(sbx, fake_kube, kube_backend.config.container_name)
    finally:
        await sbx.aclose()


async def test_control_an_evicted_pod_during_the_harness_is_still_infra(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer
):
    """Node pressure the agent cannot cause: every container killed, exit 137,
    phase Failed, reason Evicted."""
    sbx = await kube_backend.open_sandbox(SandboxSpec("oom-evict-control"))
    try:
        running = asyncio.create_task(sbx.exec(HARNESS))
        await asyncio.sleep(0.5)
        fake_kube.kubelet.evict(NAMESPACE, sbx.pod_name)
        with pytest.raises(PodEvicted):
            await running
    finally:
        await sbx.aclose()


async def test_attack_ending_its_own_container_on_a_task_without_a_service_is_scored(
    kube_backend: KubernetesBackend,
):
    """`kill 1` on a task without a service: the fresh-Pod verifier's copy of the workdir is read through the
    services container and the rollout is scored on it."""
    sbx = await kube_backend.open_sandbox(SandboxSpec("self-end-fresh"))
    try:
        res = await sbx.exec(["sh", "-c", "echo 42 > answer.txt; kill -TERM 1; sleep 5"])
        assert res.returncode == 137 and res.limits_hit == ()
        assert await fresh_pod_verdict(sbx) == 1.0
    finally:
        await sbx.aclose()


async def test_control_the_workdir_cannot_be_copied_out_of_the_ended_container(
    kube_backend: KubernetesBackend,
):
    """The copy the fresh-Pod path made before, out of the agent's container, once that container has ended:
    exit 137, which failed the copy-out as the sandbox's fault."""
    sbx = await kube_backend.open_sandbox(SandboxSpec("self-end-fresh-control"))
    try:
        await sbx.exec(["sh", "-c", "echo 42 > answer.txt; kill -TERM 1; sleep 5"])
        res = await sbx.exec(agent_tar_out_argv("/workdir"))
        assert res.returncode == 137 and not res.stdout
    finally:
        await sbx.aclose()


async def test_attack_a_service_driven_out_of_memory_is_the_agents_failure_not_infra(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer
):
    """The agent does the task, then drives the service's memory through its API until `services` is
    OOMKilled: its own execs go on (an exit 137 of its own is no fault), and the verdict is the agent's
    failure (exit 3, tampered, reward 0), neither the pass the task would have earned nor infra."""
    sbx = await open_task(kube_backend, "oom-services")
    try:
        await act(
            sbx,
            "echo 42 > answer.txt; /usr/bin/python3 -I -c 'import urllib.request; "
            'urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:8731/done", data=b""))\'',
        )
        fake_kube.kubelet.oom_kill(NAMESPACE, sbx.pod_name, kube_backend.config.services_container_name)
        res = await sbx.exec(["sh", "-c", "kill -KILL $$"])  # type: ignore[attr-defined]
        assert res.returncode == 137 and res.limits_hit == ()
        run = await run_verifier(
            sbx, ["/bin/sh", "-c", CHECK], inputs={"tests/expected": b"42\n"}, timeout_s=60
        )
        assert run.result.returncode == 3 and run.outputs == {} and "memory" in run.result.limits_hit
        with pytest.raises(TamperError, match="OOMKilled"):
            verdict_of(run)
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def test_attack_a_service_oom_kill_then_ending_its_own_container_is_not_infra(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer
):
    """`services` OOMKilled, then the agent's `kill 1`: every container of the Pod has ended (phase Failed),
    all by the agent's doing, so its exec ends 137 (no `PodLost`) and the verdict is still tampered."""
    sbx = await open_task(kube_backend, "oom-services-self-end")
    try:
        fake_kube.kubelet.oom_kill(NAMESPACE, sbx.pod_name, kube_backend.config.services_container_name)  # type: ignore[attr-defined]
        res = await sbx.exec(["sh", "-c", "echo 42 > answer.txt; kill -TERM 1; sleep 5"])  # type: ignore[attr-defined]
        assert res.returncode == 137 and res.limits_hit == ()
        assert (sbx.pod() or {})["status"]["phase"] == "Failed"  # type: ignore[attr-defined]
        run = await run_verifier(
            sbx, ["/bin/sh", "-c", CHECK], inputs={"tests/expected": b"42\n"}, timeout_s=60
        )
        assert run.result.returncode == 3 and run.outputs == {}
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def test_control_the_task_done_without_the_oom_kill_passes(kube_backend: KubernetesBackend):
    """The same work without the kill: the verifier beside the service scores it 1."""
    sbx = await open_task(kube_backend, "oom-services-pass")
    try:
        await act(
            sbx,
            "echo 42 > answer.txt; /usr/bin/python3 -I -c 'import urllib.request; "
            'urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:8731/done", data=b""))\'',
        )
        reward, seen = await verify(sbx)
        assert reward == {"reward": 1} and seen["done"] == 1
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def test_control_a_services_oom_kill_without_the_check_was_infra(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(k8s_sandbox, "agents_doing", lambda pod, agent, services: {})
    sbx = await open_task(kube_backend, "oom-services-control")
    try:
        fake_kube.kubelet.oom_kill(NAMESPACE, sbx.pod_name, kube_backend.config.services_container_name)  # type: ignore[attr-defined]
        with pytest.raises(PodOOMKilled):
            await run_verifier(
                sbx, ["/bin/sh", "-c", CHECK], inputs={"tests/expected": b"42\n"}, timeout_s=60
            )
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def test_control_a_services_container_that_died_otherwise_is_infra(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer
):
    """`services` killed with no OOM (its PID 1 is in a PID namespace the agent cannot reach: only the node
    can end it so): the verifier cannot run, and that is the sandbox's fault."""
    sbx = await open_task(kube_backend, "svc-died-control")
    try:
        pod = fake_kube.kubelet.pods[(NAMESPACE, sbx.pod_name)]  # type: ignore[attr-defined]
        pod.containers[kube_backend.config.services_container_name].kill()
        await kube_backend.informer.wait_for(sbx.pod_name, lambda p: json.dumps(p).count('"Error"') > 0, 10)  # type: ignore[attr-defined]
        with pytest.raises(SandboxError) as err:
            await run_verifier(
                sbx, ["/bin/sh", "-c", CHECK], inputs={"tests/expected": b"42\n"}, timeout_s=60
            )
        assert not isinstance(err.value, PodOOMKilled) and err.value.reason == "Error"  # type: ignore[attr-defined]
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]


async def test_control_an_evicted_service_task_is_infra(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer
):
    sbx = await open_task(kube_backend, "svc-evict-control")
    try:
        fake_kube.kubelet.evict(NAMESPACE, sbx.pod_name)  # type: ignore[attr-defined]
        with pytest.raises(PodEvicted):
            await run_verifier(
                sbx, ["/bin/sh", "-c", CHECK], inputs={"tests/expected": b"42\n"}, timeout_s=60
            )
    finally:
        await sbx.aclose()  # type: ignore[attr-defined]
