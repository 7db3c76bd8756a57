"""Sandbox backends by name: what configs, `--backend` and the veRL runtime say. One table, so a new
backend is one registered factory (three string switches built them before: rollout, train, veRL)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from openforgerl.errors import UnknownNameError, UserError
from openforgerl.registry import Registry
from openforgerl.sandbox.base import SandboxBackend

if TYPE_CHECKING:
    from openforgerl.sandbox.kubernetes.config import KubernetesConfig


class KubernetesOptions(Protocol):
    def build(self) -> KubernetesConfig: ...


class SandboxSettings(Protocol):
    """What a backend factory reads from the config's `sandbox` section (`config.SandboxSettings` is
    one): named here so the sandbox layer does not import the config above it."""

    @property
    def image(self) -> str | None: ...

    @property
    def kubernetes(self) -> KubernetesOptions: ...


async def _local(root: Path, settings: SandboxSettings | None) -> SandboxBackend:
    from openforgerl.sandbox.local import LocalBackend

    return LocalBackend(root)


async def _podman(root: Path, settings: SandboxSettings | None) -> SandboxBackend:
    from openforgerl.sandbox.podman import PodmanBackend

    backend = PodmanBackend()
    image = settings.image if settings is not None else None
    if image and not await backend.image_exists(image):  # one line now, not an infra error per rollout
        await backend.aclose()
        raise UserError(
            f"image {image!r} is not present in podman's store (images are never pulled): build it "
            "with `bash scripts/build_images.sh`, or `podman load` / `podman pull` it yourself"
        )
    return backend


async def _kubernetes(root: Path, settings: SandboxSettings | None) -> SandboxBackend:
    from openforgerl.sandbox.kubernetes import KubernetesBackend

    # kubeconfig / in-cluster discovery; the config's `sandbox.kubernetes` over $OPENFORGERL_K8S_*
    return await KubernetesBackend.open(settings.kubernetes.build() if settings is not None else None)


Factory = Callable[[Path, SandboxSettings | None], Awaitable[SandboxBackend]]
"""(where a local backend keeps its sandboxes, the config's `sandbox` section) -> an open backend."""


class UnknownBackend(UnknownNameError, ValueError):
    """An unknown backend name (still a ValueError for callers that validate settings with it)."""


BACKENDS: Registry[Factory] = Registry("backend", error=UnknownBackend)
BACKENDS.register("local", _local)  # bubblewrap
BACKENDS.register("podman", _podman)
BACKENDS.register("kubernetes", _kubernetes)


def register_backend(name: str, factory: Factory, *, replace: bool = False) -> None:
    """Serve `name` (configs' `sandbox.backend`, `--backend`) with `factory`; a name already served is
    an error unless `replace`."""
    BACKENDS.register(name, factory, replace=replace)


async def make_backend(name: str, root: Path, settings: SandboxSettings | None = None) -> SandboxBackend:
    """The backend `name`; `root` is where a local backend keeps its sandboxes, `settings` the config's
    `sandbox` section (backend options). An unknown name is an `UnknownBackend` naming the nearest one."""
    return await BACKENDS.get(name)(root, settings)
