"""The verifier on Kubernetes runs in a fresh Pod once the agent's Pod is gone
(fake API server, bwrap kubelet)."""

from __future__ import annotations

import json

import pytest
from k8s_helpers import FAST, NAMESPACE, needs_bwrap

from openforgerl.sandbox.base import Limits, SandboxError, SandboxSpec
from openforgerl.sandbox.kubernetes import KubernetesBackend
from openforgerl.sandbox.kubernetes.manifests import (
    LABEL_ROLE,
    render_pod,
    render_verifier_pod,
    verifier_pod_name,
)
from openforgerl.sandbox.kubernetes.validation import check_manifest
from openforgerl.sandbox.verifier import run_verifier
from openforgerl.testing.fake_kube import FakeKubeServer

pytestmark = needs_bwrap

# What the verifier sees, as JSON in its output folder: the answer against its input, where it runs,
# the modes of the workdir's and inputs' files (sealed: no write bit; a real runtime, whose Pods run
# without capabilities, enforces them, the fake kubelet keeps root's), and whether anything the
# agent started is still running.
PROBE = r"""
answer=$(cat /workdir/answer.txt); expected=$(cat /verifier/in/tests/expected)
wd=$(stat -c %A /workdir/answer.txt /verifier/in/tests/expected | tr -d '\n'); n=21
left=0
for c in /proc/[0-9]*/cmdline; do
  tr '\0' ' ' < "$c" 2>/dev/null | grep -q "sleep 43$n" && left=1
done
printf '{"pod": "%s", "cwd": "%s", "workdir": "%s", "agent_left": %s, "ok": %s}\n' \
  "$HOSTNAME" "$(pwd)" "$wd" "$left" "$([ "$answer" = "$expected" ] && echo 1 || echo 0)" > seen.json
echo '{"reward": 0}' > reward.json
sleep 1
"""
# Left running by the agent: writes a reward of 1 into any verifier output folder it can reach.
REWRITER = (
    "while :; do for d in /tmp/.openforgerl-verifier-*/out /verifier/out; do "
    '[ -d "$d" ] && echo \'{"reward": 1}\' > "$d/reward.json"; done; sleep 0.05; done'
)


async def leave_behind(sbx: object) -> None:
    """The agent's last acts: its answer, a process that outlives it, a rewriter of verdicts."""
    res = await sbx.exec(
        [
            "sh",
            "-c",
            "echo 42 > answer.txt; (setsid sleep 4321 > /dev/null 2>&1 < /dev/null &); "  # type: ignore[attr-defined]
            '(setsid sh -c "$0" > /dev/null 2>&1 < /dev/null &)',
            REWRITER,
        ]
    )
    assert res.returncode == 0, res.stderr


async def verify(sbx: object) -> tuple[dict[str, object], dict[str, object]]:
    run = await run_verifier(sbx, ["/bin/sh", "-c", PROBE], inputs={"tests/expected": b"42\n"}, timeout_s=60)
    assert run.result.returncode == 0, run.result.stderr
    return json.loads(run.outputs["reward.json"]), json.loads(run.outputs["seen.json"])


async def test_verifier_runs_in_a_fresh_pod_after_the_agents_is_gone(
    kube_backend: KubernetesBackend, fake_kube: FakeKubeServer
):
    sbx = await kube_backend.open_sandbox(SandboxSpec("verify-fresh", files={"README": b"answer 42\n"}))
    agent_pod = sbx.pod_name
    await leave_behind(sbx)
    reward, seen = await verify(sbx)
    assert reward == {"reward": 0}  # the verifier's own verdict: the rewriter died with the agent's Pod
    assert seen == {
        "pod": verifier_pod_name("verify-fresh", 1),
        "cwd": "/verifier/out",
        "workdir": "-r--r--r---r--r--r--",
        "agent_left": 0,
        "ok": 1,
    }
    assert agent_pod not in [p["metadata"]["name"] for p in fake_kube.pods(NAMESPACE)]
    with pytest.raises(SandboxError):
        await sbx.exec(["true"])  # the agent's Pod is gone for good
    _, again = await verify(sbx)  # a second round (a grader's judge answers) gets a Pod of its own
    assert again["pod"] == verifier_pod_name("verify-fresh", 2) and again["ok"] == 1
    assert fake_kube.pods(NAMESPACE) == []  # each verifier Pod is deleted after its run
    await sbx.aclose()


def test_verifier_pod_is_the_sandbox_pod_without_the_tasks_env_plus_its_own_folder():
    spec = SandboxSpec(
        "r/1", image="img:1", env={"OPENAI_API_KEY": "k"}, limits=Limits(cpus=0.5, memory_mb=64)
    )
    pod = render_verifier_pod(spec, FAST, 3)
    agent = render_pod(spec, FAST)
    assert pod["metadata"]["name"] == verifier_pod_name("r/1", 3) != agent["metadata"]["name"]
    assert pod["metadata"]["labels"] == {**agent["metadata"]["labels"], LABEL_ROLE: "verifier"}
    (ctr,) = pod["spec"]["containers"]
    assert "OPENAI_API_KEY" not in {e["name"] for e in ctr["env"]}
    assert ctr["resources"]["limits"] == {
        "cpu": f"{round(FAST.default_cpus * 1000)}m",
        "memory": f"{FAST.default_memory_mb}Mi",
    }
    assert {"name": "verifier", "mountPath": "/verifier"} in ctr["volumeMounts"]
    assert ctr["securityContext"] == agent["spec"]["containers"][0]["securityContext"]
    assert pod["spec"]["automountServiceAccountToken"] is False
    check_manifest(pod)


async def test_verifier_refuses_the_agents_programs(kube_backend: KubernetesBackend):
    sbx = await kube_backend.open_sandbox(SandboxSpec("verify-refuse"))
    try:
        await sbx.exec(
            [
                "sh",
                "-c",
                "printf '#!/bin/sh\\necho {\\\"reward\\\": 1} > reward.json\\n' > v.sh; chmod +x v.sh",
            ]
        )
        for planted in ("/workdir/v.sh", "v.sh", "/tmp/../workdir/v.sh", "/tmp/x"):
            with pytest.raises(SandboxError, match="not a trusted image path"):
                await sbx.run_verifier([planted], inputs={})
        run = await sbx.run_verifier(["/bin/sh", "-c", "echo ok > done"], inputs={})
        assert run.outputs == {"done": b"ok\n"}
    finally:
        await sbx.aclose()


async def test_attack_a_process_left_in_the_agents_pod_cannot_rewrite_the_verdict(
    kube_backend: KubernetesBackend,
):
    sbx = await kube_backend.open_sandbox(SandboxSpec("verify-attack"))
    try:
        await leave_behind(sbx)
        reward, _ = await verify(sbx)
        assert reward == {"reward": 0}
    finally:
        await sbx.aclose()


async def test_control_in_the_agents_pod_the_leftover_process_rewrites_the_verdict(
    kube_backend: KubernetesBackend,
):
    """The same attack where the verifier runs as a plain exec in the agent's container."""
    sbx = await kube_backend.open_sandbox(SandboxSpec("verify-control"))
    try:
        await leave_behind(sbx)
        reward, seen = await verify_in_place(sbx)
        assert reward == {"reward": 1}  # the agent's leftover wrote the verdict
        assert seen["agent_left"] == 1
    finally:
        await sbx.aclose()


class PlainExec:
    """The sandbox without its own `run_verifier`: `sandbox.verifier`'s fallback, a plain exec in the
    agent's container with the inputs and outputs in a fresh folder under its /tmp."""

    def __init__(self, sbx: object) -> None:
        self.exec = sbx.exec  # type: ignore[attr-defined]
        self.read_file, self.write_file = sbx.read_file, sbx.write_file  # type: ignore[attr-defined]


async def verify_in_place(
    sbx: object, probe: str = PROBE, outputs: tuple[str, ...] = ("reward.json", "seen.json")
) -> tuple[dict[str, object], dict[str, object]]:
    probe = probe.replace("/verifier/in", "$VIN")
    run = await run_verifier(
        PlainExec(sbx),
        ["/bin/sh", "-c", f'VIN="$(dirname "$(pwd)")/in"; {probe}'],
        inputs={"tests/expected": b"42\n"},
        outputs=outputs,
        timeout_s=60,
    )
    assert run.result.returncode == 0, run.result.stderr
    return json.loads(run.outputs["reward.json"]), json.loads(run.outputs["seen.json"])


# Left running by the agent: a file in its workdir that grows while the host copies the workdir out, so
# GNU tar ends with "file changed as we read it" (exit 1).
GROWER = "while :; do head -c 65536 /dev/zero >> /workdir/grow.bin; sleep 0.01; done"


async def leave_a_growing_file(sbx: object) -> None:
    res = await sbx.exec(
        [
            "sh",
            "-c",
            'echo 42 > answer.txt; (setsid sh -c "$0" > /dev/null 2>&1 < /dev/null &); '  # type: ignore[attr-defined]
            "sleep 0.5",
            GROWER,
        ]
    )
    assert res.returncode == 0, res.stderr


async def test_attack_a_file_growing_during_the_copy_out_is_not_infra(kube_backend: KubernetesBackend):
    """What the agent leaves changing cannot fail the copy-out (which would be infra, the agent's choice):
    the workdir as tar read it is verified, and scored by the verifier."""
    sbx = await kube_backend.open_sandbox(SandboxSpec("verify-grow", files={"README": b"answer 42\n"}))
    await leave_a_growing_file(sbx)
    reward, seen = await verify(sbx)
    assert reward == {"reward": 0} and seen["ok"] == 1 and seen["agent_left"] == 0
    await sbx.aclose()


async def test_control_a_file_growing_fails_a_plain_tar_of_the_workdir(kube_backend: KubernetesBackend):
    """The attack is real: a plain `tar -c` of that workdir exits non-zero. Whether one read overlaps a
    write is timing (a loaded machine can schedule the grower out for a whole read), so a few reads are
    taken: the attack needs only one, and the copy-out above gets no second chance either."""
    sbx = await kube_backend.open_sandbox(
        SandboxSpec("verify-grow-control", files={"README": b"answer 42\n"})
    )
    await leave_a_growing_file(sbx)
    seen = []
    for _ in range(10):
        res = await sbx.exec(["tar", "-c", "-f", "-", "-C", "/workdir", "."])  # type: ignore[attr-defined]
        seen.append((res.returncode, b"file changed as we read it" in res.stderr))
        if seen[-1] == (1, True):
            break
    assert seen[-1] == (1, True), seen
    await sbx.aclose()
