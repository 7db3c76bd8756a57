"""GUI environment kinds (`[environment] kind = ...` in task.toml) -> how to open their screen.

Each environment package registers itself when imported (`gui.family.register_kind(GuiEnvironment(...))`,
which also makes its kind a task family run by `GuiTaskRuntime`);
`get_environment(kind)` imports the built-in packages on first use, so this module stays import-light
(the service process imports only the kind it runs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from openforgerl.registry import Registry

__all__ = ["BUILTIN", "KINDS", "GuiEnvironment", "OpenScreen", "SandboxNeeds", "get_environment", "kinds", "register"]

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


KINDS: Registry[GuiEnvironment] = Registry("GUI environment kind", modules=BUILTIN)
"""Kind -> environment; an unknown kind is an `UnknownNameError` (a KeyError)."""


def register(env: GuiEnvironment) -> GuiEnvironment:
    return KINDS.register(env.kind, env)


def get_environment(kind: str) -> GuiEnvironment:
    return KINDS.get(kind)


def kinds() -> list[str]:
    return sorted(KINDS.names())
