"""The GUI kinds' registry, which lives in the environment SDK (`openforgerl.env.screens`) so that a kind
(`envs.browser`, `envs.desktop`) imports the SDK rather than this environment."""

from __future__ import annotations

from openforgerl.env.screens import (
    KINDS,
    GuiEnvironment,
    OpenScreen,
    SandboxNeeds,
    get_environment,
    kinds,
    register,
)

__all__ = ["KINDS", "GuiEnvironment", "OpenScreen", "SandboxNeeds", "get_environment", "kinds", "register"]
