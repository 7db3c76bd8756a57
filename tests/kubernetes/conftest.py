"""Fixtures: the in-repo fake API server (a simulation, see `openforgerl.testing.fake_kube`) and a
`KubernetesBackend` talking to it through the real lightkube client via a kubeconfig file."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from k8s_helpers import FAST, NAMESPACE, alive_pids

from openforgerl.sandbox.kubernetes import KubernetesBackend
from openforgerl.sandbox.kubernetes.lightkube_api import LightkubeApi
from openforgerl.testing.fake_kube import FakeKubeServer


@pytest.fixture
async def fake_kube(tmp_path: Path) -> AsyncIterator[FakeKubeServer]:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed")
    async with FakeKubeServer(root=tmp_path / "kubelet") as srv:
        yield srv
    alive = alive_pids(srv.kubelet.started_pids)
    assert alive == [], f"pod processes outlived the fake server: {alive}"


@pytest.fixture
def kubeconfig(fake_kube: FakeKubeServer, tmp_path: Path) -> Path:
    return fake_kube.write_kubeconfig(tmp_path / "kubeconfig.yaml", NAMESPACE)


@pytest.fixture
async def make_backend(fake_kube: FakeKubeServer, kubeconfig: Path) -> AsyncIterator[Callable[..., object]]:
    """Backends over lightkube + kubeconfig; closed at teardown, which must leave no Pod behind."""
    made: list[KubernetesBackend] = []

    async def make(**overrides: object) -> KubernetesBackend:
        cfg = dataclasses.replace(FAST, **overrides)
        backend = KubernetesBackend(LightkubeApi.from_kubeconfig(kubeconfig, namespace=NAMESPACE), cfg)
        await backend.start()
        made.append(backend)
        return backend

    yield make
    for backend in made:
        await backend.aclose()
    assert fake_kube.pods() == [], "pods left behind"


@pytest.fixture
async def kube_backend(
    make_backend: Callable[..., object], fake_kube: FakeKubeServer
) -> AsyncIterator[KubernetesBackend]:
    yield await make_backend()  # type: ignore[misc]
