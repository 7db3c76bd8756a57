"""Sandbox backends by name: what configs, `--backend` and the veRL runtime say. One table, so a new
backend is one registered factory (three string switches built them before: rollout, train, veRL)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from openforgerl.errors import UserError
from openforgerl.sandbox.base import SandboxBackend

if TYPE_CHECKING:
    from openforgerl.config import SandboxSettings


async def _local(root: Path, settings: SandboxSettings | None) -> SandboxBackend:
    from openforgerl.sandbox.local import LocalBackend

    return LocalBackend(root)


async def _podman(root: Path, settings: SandboxSettings | None) -> SandboxBackend:
    from openforgerl.sandbox.podman import PodmanBackend

    backend = PodmanBackend()
    image = settings.image if settings is not None else None
    if image and not await backend.image_exists(image):  # one line now, not an infra error per rollout
        await backend.aclose()
        raise UserError(f"image {image!r} is not present in podman's store (images are never pulled): build it "
                        "with `bash scripts/build_images.sh`, or `podman load` / `podman pull` it yourself")
    return backend


async def _kubernetes(root: Path, settings: SandboxSettings | None) -> SandboxBackend:
    from openforgerl.sandbox.kubernetes import KubernetesBackend

    # kubeconfig / in-cluster discovery; the config's `sandbox.kubernetes` over $OPENFORGERL_K8S_*
    return await KubernetesBackend.open(settings.kubernetes.build() if settings is not None else None)


Factory = Callable[[Path, "SandboxSettings | None"], Awaitable[SandboxBackend]]
"""(where a local backend keeps its sandboxes, the config's `sandbox` section) -> an open backend."""

BACKENDS: dict[str, Factory] = {
    "local": _local,  # bubblewrap
    "podman": _podman,
    "kubernetes": _kubernetes,
}


def register_backend(name: str, factory: Factory) -> None:
    """Serve `name` (configs' `sandbox.backend`, `--backend`) with `factory`; a later call replaces it."""
    BACKENDS[name] = factory


class UnknownBackend(ValueError):
    pass


async def make_backend(name: str, root: Path, settings: SandboxSettings | None = None) -> SandboxBackend:
    """The backend `name`; `root` is where a local backend keeps its sandboxes, `settings` the config's
    `sandbox` section (backend options)."""
    factory = BACKENDS.get(name)
    if factory is None:
        raise UnknownBackend(f"unknown backend {name!r} ({' | '.join(BACKENDS)})")
    return await factory(root, settings)
