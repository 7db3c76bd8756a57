"""Rootful podman + runc sandboxes (image built locally with `podman import`, never pulled)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sbx_helpers import EchoServer, needs_root

from openforgerl.sandbox.base import CommandNotFoundError, Limits, SandboxError, SandboxSpec
from openforgerl.sandbox.images import BUSYBOX, ensure_busybox_image
from openforgerl.sandbox.podman import PodmanBackend

pytestmark = [
    pytest.mark.podman,
    needs_root,
    pytest.mark.skipif(shutil.which("podman") is None, reason="podman not installed"),
    pytest.mark.skipif(not BUSYBOX.exists(), reason="apt-get install busybox-static"),
]


@pytest.fixture
async def podman(tmp_path: Path) -> AsyncIterator[tuple[PodmanBackend, str]]:
    b = PodmanBackend(root=tmp_path / "podman")
    image = await ensure_busybox_image(b)
    yield b, image
    await b.aclose()


async def test_podman_sandbox_isolation_network_and_cleanup(
    podman, echo: EchoServer, other_port: EchoServer
) -> None:
    backend, image = podman
    sbx = await backend.open_sandbox(
        SandboxSpec(
            rollout_id="p1",
            image=image,
            gateway_port=echo.port,
            files={"task.txt": b"hello"},
            limits=Limits(memory_mb=128, cpus=1, pids=64),
        )
    )
    res = await sbx.exec(
        ["sh", "-c", "cat task.txt; echo out > result.txt; touch /etc/x || echo RO; ip -o link"]
    )
    assert res.returncode == 0, res.stderr
    assert b"hello" in res.stdout and b"RO" in res.stdout
    assert b"eth0" not in res.stdout
    assert await sbx.read_file("/workdir/result.txt") == b"out\n"
    gw = await sbx.exec(["sh", "-c", f"echo hi | nc -w 3 127.0.0.1 {echo.port}"], timeout_s=30)
    assert gw.stdout.startswith(b"gateway:hi"), gw
    other = await sbx.exec(["sh", "-c", f"echo hi | nc -w 3 127.0.0.1 {other_port.port}"], timeout_s=30)
    assert other_port.hits == 0 and not other.stdout.startswith(b"other")
    container, home = sbx.container, sbx.home
    await sbx.aclose()
    _, out, _ = await backend.run("ps", "-a", "--format", "{{.Names}}")
    assert container not in out.decode()
    assert not home.exists()


async def test_a_cancelled_exec_ends_its_command_and_leaves_no_reader(podman) -> None:
    """A stopped run cancels execs: the command ends inside the container too, and no task reading its
    output is left on the loop (without the fix: both sleeps keep running, two readers stay pending)."""
    backend, image = podman
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="p-cancel", image=image))
    try:
        before = set(asyncio.all_tasks())
        task = asyncio.create_task(sbx.exec(["sh", "-c", "sleep 1000 & sleep 1000"]))
        for _ in range(100):
            ps = await sbx.exec(["ps", "-o", "comm"])
            if ps.stdout.count(b"sleep") == 3:  # both of the command's and the container's idle one
                break
            await asyncio.sleep(0.1)
        assert ps.stdout.count(b"sleep") == 3, ps.stdout
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)
        left = [t for t in asyncio.all_tasks() - before if not t.done() and t is not asyncio.current_task()]
        assert left == []
        ps = await sbx.exec(["ps", "-o", "comm"])
        assert ps.stdout.count(b"sleep") == 1, ps.stdout  # only the container's own idle `sleep`
    finally:
        await sbx.aclose()


async def test_podman_timeout_missing_command_and_missing_image(podman) -> None:
    backend, image = podman
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="p2", image=image))
    res = await sbx.exec(["sh", "-c", "sleep 1000 & sleep 1000"], timeout_s=2)
    assert res.timed_out
    ps = await sbx.exec(["ps", "-o", "comm"])
    assert ps.stdout.count(b"sleep") == 1, ps.stdout  # only the container's own idle `sleep` is left
    with pytest.raises(CommandNotFoundError):
        await sbx.exec(["no-such-harness"])
    await sbx.spawn(["sh", "-c", "echo svc > /tmp/svc.txt; sleep 1000"])
    for _ in range(100):
        if (sbx.host_tmpdir / "svc.txt").exists():
            break
        await asyncio.sleep(0.1)
    assert await sbx.read_file("/tmp/svc.txt") == b"svc\n"
    await sbx.aclose()
    with pytest.raises(SandboxError):
        await backend.open_sandbox(SandboxSpec(rollout_id="p3", image="localhost/not-there:1"))
