"""Podman sandboxes get the local backend's default CPU, memory and pids caps where a task names none
(`podman_sandbox.resolve_limits`); `0` still turns one off (the control: the same read shows no cap)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sbx_helpers import needs_root

from openforgerl.sandbox.base import Limits, SandboxSpec
from openforgerl.sandbox.images import BUSYBOX, ensure_busybox_image
from openforgerl.sandbox.local import DEFAULT_LIMITS
from openforgerl.sandbox.podman import PodmanBackend
from openforgerl.sandbox.podman_sandbox import resolve_limits

pytestmark = [
    pytest.mark.podman,
    needs_root,
    pytest.mark.skipif(shutil.which("podman") is None, reason="podman not installed"),
    pytest.mark.skipif(not BUSYBOX.exists(), reason="apt-get install busybox-static"),
]

# cgroup v2 at the root of the container's cgroup namespace, or v1's per-controller folders
READ = (
    "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max; "
    "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes"
)


def test_resolve_limits_fills_only_what_the_spec_leaves_open() -> None:
    assert resolve_limits(Limits()) == Limits(
        cpus=DEFAULT_LIMITS.cpus, memory_mb=DEFAULT_LIMITS.memory_mb, pids=DEFAULT_LIMITS.pids
    )
    assert resolve_limits(Limits(pids=0, memory_mb=64)) == Limits(
        cpus=DEFAULT_LIMITS.cpus, memory_mb=64, pids=0
    )


async def test_default_limits_apply_in_the_container(tmp_path: Path) -> None:
    backend = PodmanBackend(root=tmp_path / "podman")
    try:
        image = await ensure_busybox_image(backend)
        capped = await backend.open_sandbox(SandboxSpec(rollout_id="lim1", image=image))
        out = (await capped.exec(["sh", "-c", READ])).stdout.split()
        assert out == [str(DEFAULT_LIMITS.pids).encode(), str(DEFAULT_LIMITS.memory_mb * 2**20).encode()], out
        free = await backend.open_sandbox(
            SandboxSpec(rollout_id="lim2", image=image, limits=Limits(pids=0, memory_mb=0))
        )
        out = (await free.exec(["sh", "-c", READ])).stdout.split()
        assert out[0] == b"max" and out[1] != str(DEFAULT_LIMITS.memory_mb * 2**20).encode(), out
    finally:
        await backend.aclose()
