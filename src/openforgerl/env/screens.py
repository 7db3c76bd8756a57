"""GUI environment kinds (`[environment] kind = ...` in task.toml) -> how to open their screen.

A GUI kind is a package that calls `register(GuiEnvironment(...))` when imported and is named by an
`openforgerl.gui_kinds` entry point (pyproject.toml: `browser = "openforgerl.envs.browser"`); the GUI
environment (`envs.gui`) makes each registered kind a task family run by its `GuiTaskRuntime`. So a kind
imports only this SDK module, and `get_environment(kind)` imports only that kind's package on first use
(the service process imports only the kind it runs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from openforgerl.registry import Registry

__all__ = [
    "ENTRY_POINTS",
    "KINDS",
    "GuiEnvironment",
    "OpenScreen",
    "SandboxNeeds",
    "get_environment",
    "kinds",
    "register",
]

ENTRY_POINTS = "openforgerl.gui_kinds"


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


KINDS: Registry[GuiEnvironment] = Registry("GUI environment kind", group=ENTRY_POINTS)
"""Kind -> environment; an unknown kind is an `UnknownNameError` (a KeyError)."""


def register(env: GuiEnvironment) -> GuiEnvironment:
    return KINDS.register(env.kind, env)


def get_environment(kind: str) -> GuiEnvironment:
    return KINDS.get(kind)


def kinds() -> list[str]:
    return sorted(KINDS.names())
