"""The backend against a real cluster. Runs only when KUBECONFIG is set (never in this project's CI,
which has no cluster): `KUBECONFIG=~/.kube/config pytest -m k8s tests/kubernetes`.

Optional: OPENFORGERL_K8S_NAMESPACE (default "default"), OPENFORGERL_K8S_IMAGE (default busybox;
needs sh, timeout, tar). The namespace must exist and allow creating Pods.
"""

from __future__ import annotations

import os

import pytest

from openforgerl.sandbox.base import SandboxSpec
from openforgerl.sandbox.kubernetes import KubernetesBackend, KubernetesConfig

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.skipif(
        not os.environ.get("KUBECONFIG"),
        reason="KUBECONFIG not set: no real cluster (the fake API server tests cover the wire)",
    ),
]


async def test_real_cluster_lifecycle():
    cfg = KubernetesConfig(
        namespace=os.environ.get("OPENFORGERL_K8S_NAMESPACE", "default"),
        default_image=os.environ.get("OPENFORGERL_K8S_IMAGE", "docker.io/library/busybox:1.36"),
        backend_id="pytest-k8s",
        default_cpus=0.1,
        default_memory_mb=64,
        boot_timeout_s=180.0,
    )
    backend = await KubernetesBackend.open(cfg, kubeconfig=os.environ["KUBECONFIG"])
    try:
        sbx = await backend.open_sandbox(
            SandboxSpec("pytest-k8s-1", files={"in.txt": b"hi\n"}, lifetime_s=300)
        )
        res = await sbx.exec(["sh", "-c", "cat in.txt; echo e >&2; exit 4"])
        assert (res.returncode, res.stdout, res.stderr) == (4, b"hi\n", b"e\n")
        assert (await sbx.exec(["sleep", "30"], timeout_s=2)).timed_out
        assert b"sandbox ready" in await sbx.logs()
        await sbx.aclose()
        pods, _ = await backend.api.list_pods(cfg.namespace, {"openforgerl.io/backend-id": "pytest-k8s"})
        assert pods == []
    finally:
        await backend.aclose()
