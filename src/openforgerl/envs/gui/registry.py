"""GUI environment kinds (`[environment] kind = ...` in task.toml) -> how to open their screen.

Each environment package registers itself when imported (`gui.family.register_kind(GuiEnvironment(...))`,
which also makes its kind a task family run by `GuiTaskRuntime`);
`get_environment(kind)` imports the built-in packages on first use, so this module stays import-light
(the service process imports only the kind it runs).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["BUILTIN", "GuiEnvironment", "OpenScreen", "SandboxNeeds", "get_environment", "kinds", "register"]

BUILTIN = ("openforgerl.envs.browser", "openforgerl.envs.desktop")


class OpenScreen(Protocol):
    """A started screen in the service process: `computer` (the action API), `locate` (oracle only)."""

    computer: Any

    def locate(self, selector: str) -> dict[str, int]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class SandboxNeeds:
    """What the environment needs from a sandbox beyond the system binds (data, not code)."""

    ro_binds: tuple[str, ...] = ()
    """Host paths shown read-only (missing ones are skipped by the backend)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment for the service process (the service sets it for its children itself)."""
    image: str = ""
    """The container image for podman / kubernetes (deploy/gui/Containerfile.<kind>)."""


@dataclass(frozen=True)
class GuiEnvironment:
    kind: str
    open_screen: Callable[[Mapping[str, Any], str], OpenScreen]
    """(task config, apps base URL) -> a started screen; runs inside the sandbox."""
    needs: SandboxNeeds = SandboxNeeds()


_REGISTRY: dict[str, GuiEnvironment] = {}


def register(env: GuiEnvironment) -> GuiEnvironment:
    _REGISTRY[env.kind] = env
    return env


def _load_builtins() -> None:
    for module in BUILTIN:
        importlib.import_module(module)


def get_environment(kind: str) -> GuiEnvironment:
    if kind not in _REGISTRY:
        _load_builtins()
    try:
        return _REGISTRY[kind]
    except KeyError:
        raise KeyError(f"unknown GUI environment kind {kind!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def kinds() -> list[str]:
    _load_builtins()
    return sorted(_REGISTRY)
