"""Shared GUI pieces: the action API, its HTTP service and client (re-exported from the environment
SDK, `openforgerl.env.computer`), the per-rollout service process (`service`), the GUI verifier
(`verify`), the task runtime for `[environment] kind = "browser" | "desktop"` tasks (`runtime`) and the
environment registry (`registry`).

The browser environment (`envs.browser`) and the desktop environment (`envs.desktop`) register
themselves in the SDK's `openforgerl.env.screens` (found by their `openforgerl.gui_kinds` entry points;
`registry` re-exports it); nothing here switches on a kind's name.
"""

__all__ = ["ACTIONS", "Computer", "HttpComputer", "Screen"]


def __getattr__(name: str) -> object:
    if name in ("ACTIONS", "Computer", "Screen"):
        from openforgerl.env.computer import actions

        return getattr(actions, name)
    if name == "HttpComputer":
        from openforgerl.env.computer.client import HttpComputer

        return HttpComputer
    raise AttributeError(name)
