"""Sandbox backends by name: what configs, `--backend` and the veRL runtime say. One table, so a new
backend is one registered factory (three string switches built them before: rollout, train, veRL)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from openforgerl.sandbox.base import SandboxBackend


async def _local(root: Path) -> SandboxBackend:
    from openforgerl.sandbox.local import LocalBackend

    return LocalBackend(root)


async def _podman(root: Path) -> SandboxBackend:
    from openforgerl.sandbox.podman import PodmanBackend

    return PodmanBackend()


async def _kubernetes(root: Path) -> SandboxBackend:
    from openforgerl.sandbox.kubernetes import KubernetesBackend

    return await KubernetesBackend.open()  # kubeconfig / in-cluster discovery


BACKENDS: dict[str, Callable[[Path], Awaitable[SandboxBackend]]] = {
    "local": _local,  # bubblewrap
    "podman": _podman,
    "kubernetes": _kubernetes,
}


class UnknownBackend(ValueError):
    pass


async def make_backend(name: str, root: Path) -> SandboxBackend:
    """The backend `name`; `root` is where a local backend keeps its sandboxes."""
    factory = BACKENDS.get(name)
    if factory is None:
        raise UnknownBackend(f"unknown backend {name!r} ({' | '.join(BACKENDS)})")
    return await factory(root)
