"""Optional extras: a command that needs one says which to install, in one line, instead of a traceback.

The base package (`pip install openforgerl`) serves the gateway, export, rollout, eval, tasks and
harness commands against an external engine; torch and transformers come with the `engine` extra
(`train` needs the `train` extra, which includes them).
"""

from __future__ import annotations

import importlib.util

import typer

# extra -> the top-level modules it brings that the commands import
EXTRAS: dict[str, tuple[str, ...]] = {
    "engine": ("torch", "transformers", "safetensors"),
    "train": ("torch", "transformers", "safetensors", "matplotlib"),
}


def missing_modules(extra: str) -> list[str]:
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def require_extra(extra: str, what: str) -> None:
    """Exit with one line naming the extra when any of its modules is missing."""
    missing = missing_modules(extra)
    if missing:
        typer.echo(
            f"error: {what} needs the '{extra}' extra ({', '.join(missing)} not installed): "
            f"pip install 'openforgerl[{extra}]'",
            err=True,
        )
        raise typer.Exit(code=2)
