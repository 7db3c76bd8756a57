"""Pure pieces: the token bucket (virtual clock), status classification, exec argv wrapping."""

from __future__ import annotations

import asyncio

import pytest

from openforgerl.sandbox.kubernetes import ratelimit
from openforgerl.sandbox.kubernetes.commands import exec_argv, tar_bytes
from openforgerl.sandbox.kubernetes.errors import (
    BootTimeout,
    ImagePullFailed,
    PodEvicted,
    PodLost,
    PodOOMKilled,
    SandboxExpired,
    Unschedulable,
)
from openforgerl.sandbox.kubernetes.status import boot_timeout_fault, fault, is_running


async def test_token_bucket_rate_with_virtual_clock(monkeypatch: pytest.MonkeyPatch):
    now = [0.0]

    async def fake_sleep(seconds: float) -> None:
        now[0] += seconds

    monkeypatch.setattr(ratelimit.asyncio, "sleep", fake_sleep)
    bucket = ratelimit.TokenBucket(rate=4.0, burst=2, clock=lambda: now[0])
    stamps = []
    for _ in range(6):
        await bucket.take()
        stamps.append(now[0])
    assert stamps == pytest.approx([0, 0, 0.25, 0.5, 0.75, 1.0])


async def test_boot_gate_caps_concurrency():
    gate = ratelimit.BootGate(max_concurrent=3, rate=1e6, burst=1000)
    release = asyncio.Event()

    async def boot() -> None:
        async with gate.slot():
            await release.wait()

    tasks = [asyncio.create_task(boot()) for _ in range(10)]
    for _ in range(20):
        await asyncio.sleep(0)
    assert gate.in_flight == 3
    release.set()
    await asyncio.gather(*tasks)
    assert gate.peak == 3 and gate.in_flight == 0


def pod(phase: str = "Running", state: dict | None = None, **status: object) -> dict:
    cs = [{"name": "sandbox", "state": state or {"running": {}}}]
    return {"metadata": {"name": "p"}, "status": {"phase": phase, "containerStatuses": cs, **status}}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (pod(), None),
        (pod("Pending", {"waiting": {"reason": "ContainerCreating"}}), None),
        (
            pod("Pending", {"waiting": {"reason": "ErrImagePull"}}),
            None,
        ),  # may still recover: boot timeout decides
        (pod("Pending", {"waiting": {"reason": "InvalidImageName"}}), ImagePullFailed),
        (pod("Failed", {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}), PodOOMKilled),
        (pod("Failed", {"terminated": {"exitCode": 137, "reason": "Error"}}, reason="Evicted"), PodEvicted),
        (pod("Succeeded", {"terminated": {"exitCode": 0, "reason": "Completed"}}), PodLost),
        (pod("Failed", {"terminated": {"exitCode": 137}}, reason="DeadlineExceeded"), SandboxExpired),
        (pod("Failed", {"terminated": {"exitCode": 1, "reason": "Error"}}), PodLost),
    ],
)
def test_fault_classification(obj: dict, expected: type | None):
    got = fault(obj)
    assert (type(got) if got else None) is expected


def test_boot_timeout_reasons():
    pulling = pod("Pending", {"waiting": {"reason": "ImagePullBackOff"}})
    assert isinstance(boot_timeout_fault(pulling, "p", 5), ImagePullFailed)
    unsched = {
        "metadata": {"name": "p"},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}
            ],
        },
    }
    assert isinstance(boot_timeout_fault(unsched, "p", 5), Unschedulable)
    assert type(boot_timeout_fault(None, "p", 5)) is BootTimeout
    assert not is_running(pod("Running", {"waiting": {"reason": "x"}}))


async def test_exec_argv_runs_as_described(tmp_path):
    argv = exec_argv(
        ["sh", "-c", 'pwd; echo "$A"; sleep 5'], cwd=str(tmp_path), env={"A": "b c"}, timeout_s=0.5
    )
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    assert out.decode().split("\n")[:2] == [str(tmp_path), "b c"]
    assert proc.returncode == -9  # `timeout -s KILL` took its own group down (a kubelet reports 137)


def test_tar_bytes_layout(tmp_path):
    import io
    import tarfile

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.txt").write_text("x")
    blob = tar_bytes({"a/b.txt": b"hi"}, {tmp_path / "d": "copied"})
    names = tarfile.open(fileobj=io.BytesIO(blob)).getnames()
    assert {"a/b.txt", "copied", "copied/f.txt"} <= set(names)


def test_config_from_env():
    from openforgerl.sandbox.kubernetes import KubernetesConfig

    cfg = KubernetesConfig.from_env(
        {
            "OPENFORGERL_K8S_NAMESPACE": "rl",
            "OPENFORGERL_K8S_IMAGE": "img:1",
            "OPENFORGERL_K8S_GATEWAY_URL": "http://gw:8000",
            "OTHER": "x",
        }
    )
    assert (cfg.namespace, cfg.default_image, cfg.effective_gateway_url) == ("rl", "img:1", "http://gw:8000")
    assert KubernetesConfig.from_env({}) == KubernetesConfig()
