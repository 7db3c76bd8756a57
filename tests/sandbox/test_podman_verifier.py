"""The podman verifier runs in a fresh container after the agent's container is gone (busybox image).

Attack: the agent leaves a process behind (its own session, so the harness's exit does not end it) that
rewrites the workdir while the verifier reads it. Control: the same check run in the agent's container
(the in-place fallback other backends use) sees that process and its writes."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sbx_helpers import needs_root

from openforgerl.sandbox.base import SandboxError, SandboxSpec
from openforgerl.sandbox.images import BUSYBOX, ensure_busybox_image
from openforgerl.sandbox.podman import PodmanBackend
from openforgerl.sandbox.verifier import _in_place, run_verifier

pytestmark = [
    pytest.mark.podman,
    needs_root,
    pytest.mark.skipif(shutil.which("podman") is None, reason="podman not installed"),
    pytest.mark.skipif(not BUSYBOX.exists(), reason="apt-get install busybox-static"),
]

# Leaves `sleep 999` behind in its own session, which appends to /workdir/answer.txt every 0.1 s.
TAMPER = (
    "setsid sh -c 'while :; do echo tampered >> /workdir/answer.txt; "
    "sleep 0.1; done' </dev/null >/dev/null 2>&1 &"
)
# The verifier's view: any process besides itself (pid 1 is --init), its writable places, the service.
CHECK = (
    "ps -o pid,args > /verifier/out/ps.txt; cat /workdir/answer.txt > /verifier/out/a1.txt; sleep 1; "
    "cat /workdir/answer.txt > /verifier/out/a2.txt; touch /workdir/x 2>/dev/null && echo wrote-workdir;"
    "ls -A /tmp > /verifier/out/tmp.txt; cat /verifier/in/expected.txt; "
    "wget -q -O - http://127.0.0.1:8088/state.txt > "
    "/verifier/out/service.txt; echo done > /verifier/out/reward.json"
)


@pytest.fixture(params=["netns", "none"])
async def podman(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[PodmanBackend, str]]:
    """Both network modes: our loopback namespace (root) and `--network none`, where the containers share
    a holder container's loopback instead (what a machine without root gets)."""
    b = PodmanBackend(root=tmp_path / "podman", network=request.param)
    image = await ensure_busybox_image(b)
    yield b, image
    await b.aclose()


async def _rollout(backend: PodmanBackend, image: str, rid: str):  # type: ignore[no-untyped-def]
    sbx = await backend.open_sandbox(
        SandboxSpec(rollout_id=rid, image=image, files={"www/state.txt": b"svc-state"})
    )
    await sbx.spawn(["httpd", "-f", "-p", "127.0.0.1:8088", "-h", "/workdir/www"])
    agent = await sbx.exec(
        ["sh", "-c", f"echo answer > /workdir/answer.txt; echo secret > /tmp/agent.txt; {TAMPER}"]
    )
    assert agent.returncode == 0, agent
    await asyncio.sleep(0.5)
    return sbx


async def test_verifier_runs_in_a_fresh_container_after_the_agents_is_gone(podman) -> None:
    backend, image = podman
    sbx = await _rollout(backend, image, "v1")
    agent_container = sbx.container
    run = await run_verifier(
        sbx,
        ["/bin/sh", "-c", CHECK],
        inputs={"expected.txt": b"expected-input"},
        outputs=("reward.json",),
        timeout_s=60,
    )
    assert run.result.returncode == 0, run.result
    out = run.outputs
    assert b"sleep 0.1" not in out["ps.txt"] and b"while" not in out["ps.txt"], out["ps.txt"]
    assert out["a1.txt"] == out["a2.txt"], "the agent's process still wrote after the verifier started"
    assert b"wrote-workdir" not in run.result.stdout  # /workdir is read-only to the verifier
    assert out["tmp.txt"] == b""  # a fresh /tmp, not the agent's
    assert b"expected-input" in run.result.stdout
    assert out["service.txt"] == b"svc-state"  # the task's service outlives the agent's container
    _, names, _ = await backend.run("ps", "-a", "--format", "{{.Names}}")
    assert agent_container not in names.decode().split()
    with pytest.raises(SandboxError):  # the agent's container is gone for good
        await sbx.exec(["true"])
    with pytest.raises(SandboxError):  # the verifier never runs the agent's files
        await run_verifier(sbx, ["/workdir/answer.txt"], inputs={})
    home = sbx.home
    await sbx.aclose()
    _, left, _ = await backend.run(
        "ps", "-a", "--filter", f"label=openforgerl.sandbox={sbx.id}", "--format", "{{.Names}}"
    )
    assert left.strip() == b"" and not home.exists()


async def test_control_in_the_agents_container_the_leftover_process_tampers(podman) -> None:
    """The attack works where the verifier shares the agent's container: the same check sees it."""
    backend, image = podman
    sbx = await _rollout(backend, image, "v2")
    run = await _in_place(
        sbx,
        ["/bin/sh", "-c", CHECK.replace("/verifier/out/", "")],
        {},
        ("ps.txt", "a1.txt", "a2.txt"),
        None,
        60,
    )
    assert b"sleep 0.1" in run.outputs["ps.txt"] or b"while" in run.outputs["ps.txt"], run.outputs
    assert run.outputs["a1.txt"] != run.outputs["a2.txt"]
    await sbx.aclose()
